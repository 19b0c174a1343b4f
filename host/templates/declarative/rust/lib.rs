//! {{name}}: a declarative kubewasm controller plugin.
//!
//! Every Namespace labeled `{{name}}.example.com/enabled=true` is a parent whose one child is a
//! summary ConfigMap in it, `<namespace>-summary`, that lists the keys of the namespace's labels.
//! `sync` answers what the children should be; the host creates the summary owned by its parent,
//! applies changes in place, and deletes children no longer answered.
//!
//! `manifest` says what the parents and children are; `sync` is the logic.

use std::collections::BTreeMap;

use kubewasm_sdk::k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kubewasm_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubewasm_sdk::prelude::*;

/// The label that makes a Namespace a parent.
const LABEL: &str = "{{name}}.example.com/enabled";

/// Settings, from `{{name}}.toml` beside `{{name}}.wasm` in the host's plugin directory.
#[derive(serde::Deserialize)]
struct Settings {
    /// A summary is named `<namespace>-<suffix>`.
    #[serde(default = "default_suffix")]
    suffix: String,
}

fn default_suffix() -> String {
    "summary".into()
}

impl Default for Settings {
    fn default() -> Self {
        Settings { suffix: default_suffix() }
    }
}

struct Summarizer {
    suffix: String,
}

impl Composite for Summarizer {
    type Parent = Namespace;
    type Settings = Settings;

    fn new(settings: Settings) -> Result<Self, String> {
        if settings.suffix.is_empty() {
            return Err("suffix must be a non-empty string".into());
        }
        Ok(Summarizer { suffix: settings.suffix })
    }

    fn manifest(&self) -> Manifest {
        Manifest::new("{{name}}", env!("CARGO_PKG_VERSION"))
            .primary::<Namespace>()
            .primary_selector(&format!("{LABEL}=true"))
            .child::<ConfigMap>(UpdateStrategy::InPlace)
    }

    fn sync(&self, request: &SyncRequest<Namespace>, ctx: &Context) -> Result<SyncResponse> {
        let namespace = &request.parent;
        // `labels` is a BTreeMap: its keys come sorted.
        let keys: Vec<&str> = namespace.metadata.labels.iter().flatten().map(|(key, _)| key.as_str()).collect();
        let summary = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("{}-{}", namespace.name(), self.suffix)),
                namespace: Some(namespace.name().to_string()),
                ..Default::default()
            },
            data: Some(BTreeMap::from([
                ("source".to_string(), namespace.name().to_string()),
                ("keys".to_string(), keys.join(",")),
                ("count".to_string(), keys.len().to_string()),
            ])),
            ..Default::default()
        };
        ctx.info(&format!("{} labels on {}", keys.len(), namespace.name()));
        // The Namespace's status is the API server's: none leaves it alone.
        Ok(SyncResponse::new().child(summary))
    }
}

kubewasm_sdk::export_composite!(Summarizer);
