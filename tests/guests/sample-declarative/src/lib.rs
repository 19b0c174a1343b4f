//! The Kubernetes sample-controller as a declarative plugin (`tests/benches/declarative.rs`
//! runs it beside the imperative one, `examples/sample-controller/rust`): each `Foo` gets a
//! Deployment with `spec.replicas` replicas, and the Foo's status reports the Deployment's
//! available replicas. The same objects as the imperative version; the host makes every write:
//! it applies the Deployment in place with the Foo as its controller, and writes the status with
//! `observedGeneration`, and neither when they already are as answered.
//!
//! Where the imperative version emits a Warning Event, this one cannot (a declarative plugin's
//! writes and Events are the host's): a Foo without `spec.deploymentName` fails its sync with
//! `invalid`, and a Deployment of that name that the Foo does not own is left alone by the host,
//! which fails the sync with `already-exists`; both retry with backoff and a Warning Event from
//! the host.

use kubewasm_sdk::k8s_openapi::api::apps::v1::Deployment;
use kubewasm_sdk::prelude::*;
use kubewasm_sdk::serde_json::{Value, json};

fn foo_kind() -> Gvk {
    Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo")
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct FooSpec {
    deployment_name: Option<String>,
    replicas: Option<i32>,
}

struct SampleDeclarative;

impl Composite for SampleDeclarative {
    type Parent = DynamicObject;
    type Settings = ();

    fn new(_: ()) -> Result<Self, String> {
        Ok(SampleDeclarative)
    }

    fn manifest(&self) -> Manifest {
        // The imperative version's concurrency; the host grants what managing the Deployments
        // and the Foos' status takes.
        Manifest::new("sample-declarative", "0.1.0").primary_gvk(&foo_kind()).child::<Deployment>(UpdateStrategy::InPlace).max_concurrency(2)
    }

    fn sync(&self, request: &SyncRequest<DynamicObject>, _: &Context) -> kubewasm_sdk::Result<SyncResponse> {
        let foo = &request.parent;
        let spec: FooSpec = foo.parse_field("spec")?.unwrap_or_default();
        let Some(name) = spec.deployment_name.filter(|n| !n.is_empty()) else {
            return Err(Error::new(ErrorCode::Invalid, "spec.deploymentName must be set"));
        };
        let observed = request.children::<Deployment>()?;
        let available = observed
            .iter()
            .find(|d| d.metadata.name.as_deref() == Some(name.as_str()))
            .and_then(|d| d.status.as_ref())
            .and_then(|s| s.available_replicas)
            .unwrap_or(0);
        Ok(SyncResponse::new().child(deployment(foo.name(), &name, spec.replicas.unwrap_or(1))).status(json!({"availableReplicas": available})))
    }
}

/// The Deployment a Foo asks for: the imperative version's, without the owner reference (the
/// host's to add).
fn deployment(foo: &str, name: &str, replicas: i32) -> Value {
    let labels = json!({"app": "nginx", "controller": foo});
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]},
            },
        },
    })
}

kubewasm_sdk::export_composite!(SampleDeclarative);
