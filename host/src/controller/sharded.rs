//! The children a sharded plugin writes, labelled for this replica's shard as they are written:
//! an object of a kind the plugin owns whose controller is of the plugin's primary kind belongs
//! where its controller is — the one this shard is reconciling. Labelled at the write it costs
//! no request of the assigner's, and it is in this shard's (label-selected) cache at once, so
//! the plugin reads its own write. An apply or update that leaves the label out would otherwise
//! take it off again (server-side apply removes what its manager no longer sets).
//!
//! Not a child whose kind a sharded plugin here reconciles as its primary: labelling it would
//! move it without a drain while that plugin may be reconciling it on another shard. The
//! assigner places those, by their controller's ring key (so still with their controller).

use std::sync::Arc;

use crate::client::{RequestError, WriteOp, WriteRequest};
use crate::manifest::Manifest;
use crate::resource::Gvk;
use crate::runtime::host::Api;
use crate::shard::{Claims, Shard};

pub struct Labelling {
    inner: Arc<dyn Api>,
    primary: Gvk,
    owns: Vec<Gvk>,
    label: String,
    shard: String,
    /// The claims of the sharded plugins here: whose primaries the assigner places.
    claims: Claims,
}

impl Labelling {
    pub fn new(inner: Arc<dyn Api>, shard: &Shard, manifest: &Manifest) -> Self {
        Labelling {
            inner,
            primary: manifest.primary.clone(),
            owns: manifest.owns.clone(),
            label: shard.shard_label().into(),
            shard: shard.name().into(),
            claims: shard.claims().clone(),
        }
    }

    /// Labels `object` when its controller is of the primary kind.
    fn label(&self, object: &mut serde_json::Value) {
        let controlled = object["metadata"]["ownerReferences"].as_array().is_some_and(|refs| {
            refs.iter().any(|r| {
                r["controller"].as_bool() == Some(true)
                    && r["kind"].as_str() == Some(self.primary.kind.as_str())
                    && r["apiVersion"].as_str().map(|v| v.split_once('/').map_or("", |(group, _)| group)) == Some(self.primary.group.as_str())
            })
        });
        if !controlled {
            return;
        }
        let Some(metadata) = object.get_mut("metadata").and_then(|m| m.as_object_mut()) else { return };
        let labels = metadata.entry("labels").or_insert_with(|| serde_json::json!({}));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(self.label.clone(), self.shard.clone().into());
        }
    }
}

#[async_trait::async_trait]
impl Api for Labelling {
    async fn write(&self, mut request: WriteRequest) -> Result<Option<Arc<str>>, RequestError> {
        if self.owns.contains(&request.resource) && !self.claims.is_primary(&request.resource) {
            match &mut request.op {
                WriteOp::Create { object, .. } | WriteOp::Update { object, status: false } | WriteOp::Apply { object, status: false, .. } => self.label(object),
                _ => {}
            }
        }
        self.inner.write(request).await
    }

    async fn get(&self, resource: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<String>, RequestError> {
        self.inner.get(resource, namespace, name).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<WriteRequest>>);

    #[async_trait::async_trait]
    impl Api for Recorder {
        async fn write(&self, request: WriteRequest) -> Result<Option<Arc<str>>, RequestError> {
            self.0.lock().push(request);
            Ok(None)
        }

        async fn get(&self, _: &Gvk, _: Option<&str>, _: &str) -> Result<Option<String>, RequestError> {
            Ok(None)
        }
    }

    #[tokio::test]
    async fn children_of_the_primary_kind_are_labelled_for_this_shard_and_nothing_else_is() {
        let recorder = Arc::new(Recorder::default());
        let labelling = Labelling {
            inner: recorder.clone(),
            primary: Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo"),
            owns: vec![Gvk::new("apps", "v1", "Deployment"), Gvk::new("", "v1", "Secret")],
            label: "shard.alpha.sharding.timebertt.dev/r".into(),
            shard: "replica-a".into(),
            claims: Claims::default(),
        };
        let secret = Gvk::new("", "v1", "Secret");
        let claim = crate::shard::Claim { primary: secret.clone(), selector: None, owns: vec![], namespaces: vec![None] };
        let _reconciled_here = labelling.claims.add("follower", claim);
        let child = |kind: &str, api_version: &str| serde_json::json!({"metadata": {"name": "c", "ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": "p", "controller": true}]}});
        let write = |resource: Gvk, op: WriteOp| WriteRequest { resource, namespace: Some("n".into()), name: "c".into(), op };
        let deployment = Gvk::new("apps", "v1", "Deployment");
        labelling
            .write(write(deployment.clone(), WriteOp::Apply { object: child("Foo", "samplecontroller.k8s.io/v1alpha1"), force: true, status: false }))
            .await
            .unwrap();
        labelling.write(write(deployment.clone(), WriteOp::Create { object: child("Bar", "samplecontroller.k8s.io/v1alpha1"), applied: false })).await.unwrap();
        labelling
            .write(write(deployment.clone(), WriteOp::Apply { object: child("Foo", "samplecontroller.k8s.io/v1alpha1"), force: true, status: true }))
            .await
            .unwrap();
        labelling
            .write(write(Gvk::new("", "v1", "ConfigMap"), WriteOp::Create { object: child("Foo", "samplecontroller.k8s.io/v1alpha1"), applied: false }))
            .await
            .unwrap();
        labelling.write(write(secret, WriteOp::Create { object: child("Foo", "samplecontroller.k8s.io/v1alpha1"), applied: false })).await.unwrap();
        let labels: Vec<Option<String>> = recorder
            .0
            .lock()
            .iter()
            .map(|r| match &r.op {
                WriteOp::Apply { object, .. } | WriteOp::Create { object, .. } => {
                    object["metadata"]["labels"]["shard.alpha.sharding.timebertt.dev/r"].as_str().map(String::from)
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            labels,
            [Some("replica-a".to_string()), None, None, None, None],
            "only an owned kind, controlled by a primary, outside status, and no other plugin's primary"
        );
    }
}
