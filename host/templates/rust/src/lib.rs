//! {{name}}: a kubewasm controller plugin.
//!
//! Every ConfigMap labeled `{{name}}.example.com/enabled=true` gets a summary ConfigMap,
//! `<name>-summary`, that lists the keys of its data and is owned by it (so Kubernetes deletes
//! the summary with it). One server-side apply per reconcile; the host does the rest (watches,
//! cache, queue, retries).
//!
//! `manifest` says what the plugin reconciles and what it may do; `reconcile` is the logic.

use std::collections::BTreeMap;

use kubewasm_sdk::k8s_openapi::api::core::v1::ConfigMap;
use kubewasm_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubewasm_sdk::prelude::*;

/// The label that selects the ConfigMaps this controller reconciles.
const LABEL: &str = "{{name}}.example.com/enabled";

/// Settings, from `{{name}}.toml` beside `{{name}}.wasm` in the host's plugin directory.
#[derive(serde::Deserialize)]
struct Settings {
    /// A summary is named `<name>-<suffix>`.
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

impl Controller for Summarizer {
    type Primary = ConfigMap;
    type Settings = Settings;

    fn new(settings: Settings) -> Result<Self, String> {
        if settings.suffix.is_empty() {
            return Err("suffix must be a non-empty string".into());
        }
        Ok(Summarizer { suffix: settings.suffix })
    }

    fn manifest(&self) -> Manifest {
        Manifest::new("{{name}}", env!("CARGO_PKG_VERSION"))
            .primary::<ConfigMap>()
            .primary_selector(&format!("{LABEL}=true"))
            .permission::<ConfigMap>(&[Verb::Create, Verb::Patch])
    }

    fn reconcile(&self, cm: ConfigMap, ctx: &Context) -> Result<Action> {
        // `data` is a BTreeMap: its keys come sorted.
        let keys: Vec<&str> = cm.data.iter().flatten().map(|(key, _)| key.as_str()).collect();
        let summary = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("{}-{}", cm.name(), self.suffix)),
                namespace: cm.namespace().map(Into::into),
                owner_references: Some(vec![cm.controller_owner_ref()]),
                ..Default::default()
            },
            data: Some(BTreeMap::from([
                ("source".to_string(), cm.name().to_string()),
                ("keys".to_string(), keys.join(",")),
                ("count".to_string(), keys.len().to_string()),
            ])),
            ..Default::default()
        };
        ctx.apply(&summary)?;
        ctx.info(&format!("summarized {} keys of {}", keys.len(), cm.name()));
        Ok(Action::Done)
    }
}

kubewasm_sdk::export_controller!(Summarizer);
