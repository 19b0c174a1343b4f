//! The webhooks suite's plugin. Its settings name it, the group of the suite's custom resource
//! (`Widget`, versions v1 and v2, in a group of the test's own) and what its hooks do:
//!
//! - `good`: a validating hook `validate` (a Widget's `spec.size` at most 10, else denied 422 with
//!   "size must be at most 10"; a warning "big widget" above 5), a mutating hook `default`
//!   (`spec.color` "blue" when unset) and the conversion between v1 (`spec.size`) and v2
//!   (`spec.dimensions.size`);
//! - `loop`: its validating hook computes forever; `trap`: it panics; `huge`: it answers a
//!   100 MiB warning; `sleep`: it sleeps an hour in a host call.
//!
//! Its primary is ConfigMaps with a label nobody sets: it reconciles nothing.

use std::time::Duration;

use kubewasm_sdk::prelude::*;
use kubewasm_sdk::serde_json::{Value, json};
use kubewasm_sdk::webhook::{FailurePolicy, Operation};

#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "kebab-case")]
struct Settings {
    name: String,
    group: String,
    mode: String,
    /// The failure policy of its validating hook: `fail` (default) or `ignore`.
    policy: String,
    /// The kind its validating hook admits (default `Widget`).
    kind: Option<String>,
    /// Its hooks' timeout in seconds (default 10).
    timeout: Option<u64>,
}

struct Hooks {
    settings: Settings,
}

impl Hooks {
    fn widget(&self, version: &str) -> Gvk {
        Gvk::new(&self.settings.group, version, self.settings.kind.as_deref().unwrap_or("Widget"))
    }
}

impl Controller for Hooks {
    type Primary = kubewasm_sdk::k8s_openapi::api::core::v1::ConfigMap;
    type Settings = Settings;

    fn new(settings: Settings) -> Result<Self, String> {
        if settings.name.is_empty() || settings.group.is_empty() {
            return Err("settings: name and group are required".into());
        }
        Ok(Hooks { settings })
    }

    fn manifest(&self) -> Manifest {
        let timeout = Duration::from_secs(self.settings.timeout.unwrap_or(10));
        let policy = if self.settings.policy == "ignore" { FailurePolicy::Ignore } else { FailurePolicy::Fail };
        let validate = Webhook::validating("validate")
            .kind_gvk(&self.widget("v1"))
            .operations(&[Operation::Create, Operation::Update])
            .failure_policy(policy)
            .timeout(timeout);
        let manifest =
            Manifest::new(&self.settings.name, "0.1.0").primary::<Self::Primary>().primary_selector("hooks.kubewasm.io/never=true").webhook(validate);
        match self.settings.mode.as_str() {
            "good" => manifest
                .webhook(Webhook::mutating("default").kind_gvk(&self.widget("v1")).operations(&[Operation::Create]).timeout(timeout))
                .converts_gvk(&self.widget("v1")),
            _ => manifest,
        }
    }

    fn reconcile(&self, _: Self::Primary, _: &Context) -> Result<Action> {
        Ok(Action::Done)
    }

    fn validate(&self, review: &Review, _: &Context) -> std::result::Result<Warnings, Denial> {
        match self.settings.mode.as_str() {
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "trap" => panic!("the trap hook traps"),
            "huge" => Ok(vec!["x".repeat(100 << 20)]),
            "sleep" => {
                std::thread::sleep(Duration::from_secs(3600));
                Ok(vec![])
            }
            _ => {
                let widget: Value = review.object()?;
                let size = widget["spec"]["size"].as_i64().unwrap_or(0);
                if size > 10 {
                    return Err(Denial::invalid(format!("size must be at most 10, not {size}")));
                }
                Ok(if size > 5 { vec!["big widget".into()] } else { vec![] })
            }
        }
    }

    fn mutate(&self, review: &Review, _: &Context) -> std::result::Result<Mutation, Denial> {
        let mut widget: Value = review.object()?;
        if widget["spec"].get("color").is_some() {
            return Ok(Mutation::unchanged());
        }
        widget["spec"]["color"] = json!("blue");
        Ok(Mutation::to(&widget).warn("color defaulted to blue"))
    }

    fn convert(&self, object: DynamicObject, desired_api_version: &str) -> std::result::Result<DynamicObject, String> {
        let mut value = kubewasm_sdk::serde_json::to_value(&object).map_err(|e| e.to_string())?;
        let spec = value["spec"].take();
        let size = spec["size"].as_i64().or_else(|| spec["dimensions"]["size"].as_i64());
        let mut converted = spec.as_object().cloned().unwrap_or_default();
        converted.remove("size");
        converted.remove("dimensions");
        let (field, value_of) = match desired_api_version.rsplit('/').next() {
            Some("v1") => ("size", json!(size)),
            Some("v2") => ("dimensions", json!({ "size": size })),
            other => return Err(format!("no version {other:?}")),
        };
        if size.is_some() {
            converted.insert(field.into(), value_of);
        }
        value["spec"] = Value::Object(converted);
        value["apiVersion"] = json!(desired_api_version);
        kubewasm_sdk::serde_json::from_value(value).map_err(|e| e.to_string())
    }
}

kubewasm_sdk::export_controller!(Hooks);
