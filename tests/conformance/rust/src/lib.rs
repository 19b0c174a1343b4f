//! The SDK conformance plugin in Rust: what each `data.do` of a primary ConfigMap and each `do`
//! annotation of a watched Secret makes it do is in `tests/conformance/README.md`, the same in
//! every language.

use std::time::Duration;

use kubewasm_sdk::k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kubewasm_sdk::prelude::*;

#[derive(serde::Deserialize)]
#[serde(default)]
struct Settings {
    prefix: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { prefix: "conformance".into() }
    }
}

struct Conformance {
    prefix: String,
}

fn code(name: &str) -> Option<ErrorCode> {
    Some(match name {
        "not-found" => ErrorCode::NotFound,
        "already-exists" => ErrorCode::AlreadyExists,
        "conflict" => ErrorCode::Conflict,
        "forbidden" => ErrorCode::Forbidden,
        "invalid" => ErrorCode::Invalid,
        "unavailable" => ErrorCode::Unavailable,
        "other" => ErrorCode::Other,
        _ => return None,
    })
}

impl Controller for Conformance {
    type Primary = ConfigMap;
    type Settings = Settings;

    fn new(settings: Settings) -> Result<Self, String> {
        Ok(Conformance { prefix: settings.prefix })
    }

    fn manifest(&self) -> Manifest {
        Manifest::new("conformance", "0.1.0").primary::<ConfigMap>().watches::<Secret>(Mapping::MapRelated).permission::<ConfigMap>(&[Verb::Patch])
    }

    fn reconcile(&self, cm: ConfigMap, ctx: &Context) -> Result<Action> {
        let data = cm.data.clone().unwrap_or_default();
        let field = |key: &str| data.get(key).map(String::as_str).unwrap_or_default();
        match field("do") {
            "" | "done" => Ok(Action::Done),
            "requeue" => Ok(Action::RequeueAfter(Duration::from_micros(field("after-us").parse().map_err(Error::other)?))),
            "error" => {
                let name = field("code");
                let code = code(name).ok_or_else(|| Error::other(format!("unknown code {name:?}")))?;
                Err(Error::new(code, format!("{}: {name}", self.prefix)))
            }
            "long-error" => Err(Error::other("é".repeat(40_000))),
            "panic" => panic!("conformance panics on purpose"),
            "get-long-name" => ctx.get::<ConfigMap>(cm.namespace(), &"a".repeat(254)).map(|_| Action::Done),
            "list-long-selector" => ctx.list::<ConfigMap>(cm.namespace(), Some(&"a".repeat(4097))).map(|_| Action::Done),
            "event-long-note" => ctx.event(&cm, EventType::Normal, "Checked", "Reconcile", &"n".repeat(1025)).map(|()| Action::Done),
            "event-empty-reason" => ctx.event(&cm, EventType::Normal, "", "Reconcile", "").map(|()| Action::Done),
            "read-pod" => ctx.get::<Pod>(cm.namespace(), "x").map(|_| Action::Done),
            other => Err(Error::other(format!("unknown do {other:?}"))),
        }
    }

    fn map_related(&self, _: &Gvk, secret: DynamicObject, _: &Context) -> Result<Vec<ObjectKey>> {
        match secret.annotation("do") {
            Some("panic") => panic!("conformance panics on purpose in map-related"),
            Some("error") => Err(Error::new(ErrorCode::Invalid, "conformance fails map-related on purpose")),
            _ => Ok(secret.label("primary").map(|name| ObjectKey::new(secret.namespace(), name)).into_iter().collect()),
        }
    }
}

kubewasm_sdk::export_controller!(Conformance);
