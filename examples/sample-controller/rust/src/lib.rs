//! The Kubernetes sample-controller (k8s.io/sample-controller) as a kubewasm plugin: each `Foo`
//! gets a Deployment it owns, with `spec.replicas` replicas; the Foo's status reports the
//! Deployment's available replicas and the generation it saw. A Deployment of that name that
//! the Foo does not own is left alone, with a Warning Event on the Foo.

use kubewasm_sdk::k8s_openapi::api::apps::v1::Deployment;
use kubewasm_sdk::prelude::*;
use kubewasm_sdk::serde_json::json;

fn foo_kind() -> Gvk {
    Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo")
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct FooSpec {
    deployment_name: Option<String>,
    replicas: Option<i32>,
}

struct SampleController;

impl Controller for SampleController {
    type Primary = DynamicObject;
    type Settings = ();

    fn new(_: ()) -> Result<Self, String> {
        Ok(SampleController)
    }

    fn manifest(&self) -> Manifest {
        Manifest::new("sample-controller", "0.1.0")
            .primary_gvk(&foo_kind())
            .owns::<Deployment>()
            .permission::<Deployment>(&[Verb::Create, Verb::Patch])
            .grant(&foo_kind(), Some("status"), &[Verb::Patch], &[])
            // Parse only what is read: a Foo's spec, a Deployment's available replicas (and,
            // of both, the metadata, which every object keeps).
            .reads_fields_gvk(&foo_kind(), &["spec"])
            .reads_fields::<Deployment>(&["status.availableReplicas"])
            .max_concurrency(2)
    }

    fn reconcile(&self, foo: DynamicObject, ctx: &Context) -> Result<Action> {
        let spec: FooSpec = foo.parse_field("spec")?.unwrap_or_default();
        let Some(name) = spec.deployment_name.filter(|n| !n.is_empty()) else {
            ctx.event(&foo, EventType::Warning, "InvalidSpec", "Reconcile", "spec.deploymentName must be set")?;
            return Ok(Action::Done);
        };
        if let Some(existing) = ctx.get::<Deployment>(foo.namespace(), &name)?
            && !existing.is_controlled_by(&foo)
        {
            let note = format!("Resource \"{name}\" already exists and is not managed by Foo");
            ctx.event(&foo, EventType::Warning, "ErrResourceExists", "Reconcile", &note)?;
            return Ok(Action::Done);
        }
        let deployment = ctx.apply(&deployment_for(&foo, &name, spec.replicas.unwrap_or(1))?)?;
        let available = deployment.status.and_then(|s| s.available_replicas).unwrap_or(0);
        let mut status = DynamicObject::new(&foo_kind(), foo.namespace(), foo.name());
        status.data.insert("status".into(), json!({"availableReplicas": available, "observedGeneration": foo.generation()}));
        ctx.apply_status(&status)?;
        Ok(Action::Done)
    }
}

/// The Deployment a Foo asks for, owned by the Foo.
fn deployment_for(foo: &DynamicObject, name: &str, replicas: i32) -> Result<Deployment> {
    let labels = json!({"app": "nginx", "controller": foo.name()});
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": foo.namespace(), "ownerReferences": [foo.controller_owner_ref()]},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]},
            },
        },
    });
    Ok(kubewasm_sdk::serde_json::from_value(deployment)?)
}

kubewasm_sdk::export_controller!(SampleController);
