//! The runtime benchmark's plugin. It implements the WIT exports directly (not through the SDK's
//! `Controller` trait) so that it does exactly what the native side of the benchmark does: hand
//! the request's JSON text to `bench_logic::reconcile`.

use kubewasm_sdk::bindings::exports::kubewasm::controller::access::{self, Rule};
use kubewasm_sdk::bindings::exports::kubewasm::controller::plugin::{self, Limits, Manifest, Permission, Verb};
use kubewasm_sdk::bindings::exports::kubewasm::controller::reconciler::{self, Request};
use kubewasm_sdk::bindings::exports::kubewasm::controller::{clusters, composite, projections, release, views, webhooks};
use kubewasm_sdk::bindings::kubewasm::controller::types::{Action, Error, ErrorCode, Gvk, ObjectKey};
use kubewasm_sdk::bindings::kubewasm::controller::{cache, client};

struct Bench;

struct WasmHost;

fn configmap() -> Gvk {
    Gvk { group: String::new(), version: "v1".into(), kind: "ConfigMap".into() }
}

impl bench_logic::Host for WasmHost {
    fn get(&self, namespace: &str, name: &str) -> Option<String> {
        cache::get(&configmap(), Some(namespace), name).ok().flatten()
    }

    fn apply(&self, object: String) -> Result<(), String> {
        client::apply(&object, true).map(drop).map_err(|e| e.message)
    }
}

impl plugin::Guest for Bench {
    fn describe(_settings: String) -> Result<Manifest, String> {
        Ok(Manifest {
            name: "bench".into(),
            version: "0.1.0".into(),
            primary: configmap(),
            primary_selector: None,
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

impl reconciler::Guest for Bench {
    fn reconcile(request: Request) -> Result<Action, Error> {
        bench_logic::reconcile(&request.object, &WasmHost).map(|()| Action::Done).map_err(|message| Error { code: ErrorCode::Other, message })
    }

    fn finalize(_: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }

    fn map_related(_: Gvk, _: String) -> Vec<ObjectKey> {
        Vec::new()
    }
}

impl access::Guest for Bench {
    fn rules() -> Vec<Rule> {
        Vec::new()
    }
}

impl release::Guest for Bench {
    fn released(_: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

impl views::Guest for Bench {
    fn metadata_only() -> Vec<Gvk> {
        Vec::new()
    }
}

impl projections::Guest for Bench {
    fn fields() -> Vec<projections::Projection> {
        Vec::new()
    }
}

// It serves no hooks: the host never calls the rest.
impl webhooks::Guest for Bench {
    fn declare() -> webhooks::Declaration {
        webhooks::Declaration { admission: Vec::new(), conversion: Vec::new() }
    }

    fn validate(_: webhooks::AdmissionRequest) -> Result<Vec<String>, webhooks::Denial> {
        unreachable!("declares no hooks")
    }

    fn mutate(_: webhooks::AdmissionRequest) -> Result<webhooks::Mutation, webhooks::Denial> {
        unreachable!("declares no hooks")
    }

    fn convert(_: Vec<String>, _: String) -> Result<Vec<String>, String> {
        unreachable!("declares no hooks")
    }
}

impl clusters::Guest for Bench {
    fn scope() -> clusters::ClusterScope {
        clusters::ClusterScope { serve_local: true, serve: clusters::Members::None, reach: clusters::Members::None }
    }
}

/// Not declarative: the host never calls the rest.
impl composite::Guest for Bench {
    fn describe_composition() -> Option<composite::Composition> {
        None
    }
    fn customize(_: String) -> Result<Vec<composite::RelatedRule>, Error> {
        unreachable!("the host never calls a controller's customize")
    }
    fn sync(_: composite::SyncRequest) -> Result<composite::SyncResponse, Error> {
        unreachable!("the host never calls a controller's sync")
    }
    fn finalize(_: composite::SyncRequest) -> Result<composite::SyncResponse, Error> {
        unreachable!("the host never calls a controller's composite finalize")
    }
}

kubewasm_sdk::bindings::__export_controller_bindings!(Bench with_types_in kubewasm_sdk::bindings);
