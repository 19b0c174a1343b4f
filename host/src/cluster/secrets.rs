//! The Secret provider (`--cluster-secrets`): kubeconfig Secrets in the host's namespace
//! labelled `kubewasm.io/cluster=true` (Cluster API's convention: the kubeconfig under the key
//! `value`, or `kubeconfig`). The Secret's name names the cluster and its other labels are the
//! cluster's. A new Secret engages its cluster, a changed one engages it anew, a deleted one
//! (or one that loses the label) disengages it. Watched with kube-rs's watcher, which relists
//! after a broken watch: a Secret deleted meanwhile is disengaged when the relist ends.
//!
//! A Secret's author is not the host's operator: a Secret the host will not engage (its
//! kubeconfig refused, unreadable, or its name taken) gets a Warning Event `ClusterRefused`
//! naming why, besides the log line and `kubewasm_member_refusals_total`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::{WatchStreamExt, watcher};
use tokio_util::sync::CancellationToken;

use super::{Fleet, Offer, SECRET_LABEL, digest};
use crate::events::{EventRecorder, ObjectEvent};
use crate::resource::{Gvk, ObjectKey};

/// The keys a kubeconfig may be under, in the order they are looked for.
const KEYS: [&str; 2] = ["value", "kubeconfig"];

fn source(namespace: &str, name: &str) -> String {
    format!("Secret {namespace}/{name}")
}

/// Keeps the members of the labelled Secrets of `namespace` engaged until `shutdown`, reporting
/// refusals on the Secrets through `events`.
pub async fn run(client: kube::Client, namespace: String, fleet: Arc<Fleet>, events: EventRecorder, shutdown: CancellationToken) {
    let api: kube::Api<Secret> = kube::Api::namespaced(client, &namespace);
    let config = watcher::Config::default().labels(&format!("{SECRET_LABEL}=true"));
    let mut changes = watcher(api, config).default_backoff().boxed();
    let ours = |s: &str| s.starts_with(&format!("Secret {namespace}/"));
    // The Secrets a relist has shown so far.
    let mut listed: Option<BTreeSet<String>> = None;
    loop {
        let event = tokio::select! {
            _ = shutdown.cancelled() => return,
            event = changes.next() => event,
        };
        match event {
            None => return,
            Some(Err(e)) => tracing::warn!(%namespace, "watching cluster Secrets: {e}"),
            Some(Ok(watcher::Event::Init)) => listed = Some(BTreeSet::new()),
            Some(Ok(watcher::Event::InitApply(secret))) => {
                if let Some(listed) = &mut listed {
                    listed.insert(secret.metadata.name.clone().unwrap_or_default());
                }
                offer(&fleet, &events, &namespace, secret).await;
            }
            Some(Ok(watcher::Event::Apply(secret))) => offer(&fleet, &events, &namespace, secret).await,
            Some(Ok(watcher::Event::InitDone)) => {
                let listed = listed.take().unwrap_or_default();
                for (name, source) in fleet.engaged_from(ours) {
                    if !listed.contains(&name) {
                        fleet.disengage(&name, &source);
                    }
                }
            }
            Some(Ok(watcher::Event::Delete(secret))) => {
                let name = secret.metadata.name.unwrap_or_default();
                fleet.disengage(&name, &source(&namespace, &name));
            }
        }
    }
}

/// Engages the cluster of `secret`, reporting why not.
async fn offer(fleet: &Fleet, events: &EventRecorder, namespace: &str, secret: Secret) {
    let name = secret.metadata.name.clone().unwrap_or_default();
    let from = source(namespace, &name);
    let refuse = |problem: String| {
        tracing::warn!("cannot engage {from}: {problem}");
        events.publish(ObjectEvent {
            regarding: Gvk::new("", "v1", "Secret"),
            key: ObjectKey::new(Some(namespace), &name),
            uid: secret.metadata.uid.clone(),
            warning: true,
            reason: "ClusterRefused".into(),
            action: "Engage".into(),
            note: problem,
        });
    };
    let data = secret.data.clone().unwrap_or_default();
    let Some(text) = KEYS.iter().find_map(|key| data.get(*key)) else {
        fleet.refused("kubeconfig");
        return refuse("it has neither a `value` nor a `kubeconfig` key".into());
    };
    let kubeconfig =
        match std::str::from_utf8(&text.0).map_err(|e| e.to_string()).and_then(|t| kube::config::Kubeconfig::from_yaml(t).map_err(|e| e.to_string())) {
            Ok(kubeconfig) => kubeconfig,
            Err(e) => {
                fleet.refused("kubeconfig");
                return refuse(format!("its kubeconfig does not parse: {e}"));
            }
        };
    let labels: BTreeMap<String, String> = secret.metadata.labels.clone().unwrap_or_default().into_iter().filter(|(k, _)| k != SECRET_LABEL).collect();
    let label_text = serde_json::to_vec(&labels).unwrap_or_default();
    let offer = Offer { name: name.clone(), labels, kubeconfig, source: from.clone(), digest: digest(&[&text.0, &label_text]) };
    if let Err(e) = fleet.engage(offer).await {
        refuse(e.to_string());
    }
}
