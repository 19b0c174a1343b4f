//! A controller built against `kubewasm:controller@0.1.0` (the WIT in `wit/`, frozen as it was
//! released), with wit-bindgen directly: it exports `plugin` and `reconciler` only. Each
//! reconcile applies `<name>.legacy`, a ConfigMap whose data names the primary.

wit_bindgen::generate!({ world: "controller", path: "wit" });

use exports::kubewasm::controller::plugin::{Guest as Plugin, Limits, Manifest, Permission, Verb};
use exports::kubewasm::controller::reconciler::{Guest as Reconciler, Request};
use kubewasm::controller::client;
use kubewasm::controller::types::{Action, Error, Gvk, ObjectKey};

struct Legacy;

fn configmap() -> Gvk {
    Gvk { group: String::new(), version: "v1".into(), kind: "ConfigMap".into() }
}

impl Plugin for Legacy {
    fn describe(_settings: String) -> Result<Manifest, String> {
        Ok(Manifest {
            name: "legacy".into(),
            version: "0.1.0".into(),
            primary: configmap(),
            primary_selector: Some("legacy.kubewasm.io/primary".into()),
            owns: Vec::new(),
            watches: Vec::new(),
            finalizer: None,
            resync_seconds: None,
            max_concurrency: 1,
            limits: Limits { deadline_ms: None, memory_bytes: None },
            permissions: vec![Permission { resource: configmap(), subresource: None, verbs: vec![Verb::Create, Verb::Patch], namespaces: Vec::new() }],
        })
    }
}

impl Reconciler for Legacy {
    fn reconcile(request: Request) -> Result<Action, Error> {
        let name = format!("{}.legacy", request.key.name);
        let object = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{}"}},"data":{{"from":"{}"}}}}"#,
            request.key.namespace.unwrap_or_default(),
            request.key.name
        );
        client::apply(&object, true)?;
        Ok(Action::Done)
    }

    fn finalize(_: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }

    fn map_related(_: Gvk, _: String) -> Vec<ObjectKey> {
        Vec::new()
    }
}

export!(Legacy);
