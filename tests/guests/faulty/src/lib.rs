//! A plugin for the runtime's fault catalog. Its primary resource is ConfigMap; each reconcile
//! does what the ConfigMap's `data.mode` says, so one loaded plugin can show every fault and
//! prove that it keeps serving afterwards. Settings choose how `describe` misbehaves.

use std::cell::Cell;
use std::time::Duration;

use kubewasm_sdk::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kubewasm_sdk::prelude::*;

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Settings {
    /// The plugin name (to load several copies side by side).
    name: Option<String>,
    /// "invalid-manifest", "trap" or "refuse" make describe misbehave; "metadata-flood" declares
    /// 1001 metadata-only kinds, "metadata-unwatched" a metadata-only kind it neither owns nor
    /// watches; "fields-flood" a projection of 65 paths, "fields-deep" one path of 9 field
    /// names, "fields-unwatched" a projection of a kind it neither reconciles, owns nor watches.
    describe: Option<String>,
}

struct Faulty {
    name: String,
    describe: Option<String>,
}

thread_local! {
    /// Calls served by this instance: shows whether the host reused it.
    static CALLS: Cell<u64> = const { Cell::new(0) };
}

impl Controller for Faulty {
    type Primary = ConfigMap;
    type Settings = Settings;

    fn new(settings: Settings) -> Result<Self, String> {
        match settings.describe.as_deref() {
            Some("trap") => panic!("describe was asked to trap"),
            Some("refuse") => Err("setting `describe` is \"refuse\"".into()),
            _ => Ok(Faulty { name: settings.name.unwrap_or_else(|| "faulty".into()), describe: settings.describe }),
        }
    }

    fn manifest(&self) -> Manifest {
        let name = if self.describe.as_deref() == Some("invalid-manifest") { "Not_A_DNS_Label" } else { &self.name };
        let manifest = Manifest::new(name, "0.1.0")
            .primary::<ConfigMap>()
            .permission::<ConfigMap>(&[Verb::Create, Verb::Patch])
            .max_concurrency(2)
            .limits(kubewasm_sdk::Limits { deadline: Some(Duration::from_millis(500)), memory_bytes: Some(32 << 20) });
        match self.describe.as_deref() {
            Some("metadata-flood") => (0..1001).fold(manifest, |m, _| m.metadata_only::<Secret>()),
            Some("metadata-unwatched") => manifest.metadata_only::<Secret>(),
            Some("fields-flood") => manifest.reads_fields::<ConfigMap>(&["data"; 65]),
            Some("fields-deep") => manifest.reads_fields::<ConfigMap>(&["a.b.c.d.e.f.g.h.i"]),
            Some("fields-unwatched") => manifest.reads_fields::<Secret>(&["data"]),
            _ => manifest,
        }
    }

    fn reconcile(&self, cm: ConfigMap, ctx: &Context) -> Result<Action> {
        let calls = CALLS.with(|c| {
            c.set(c.get() + 1);
            c.get()
        });
        let mode = cm.data.as_ref().and_then(|d| d.get("mode")).map(String::as_str).unwrap_or("ok");
        match mode {
            "ok" => {
                let mut out = ConfigMap::default();
                out.metadata.name = Some(format!("{}-out", cm.name()));
                out.metadata.namespace = cm.namespace().map(Into::into);
                out.metadata.owner_references = Some(vec![cm.controller_owner_ref()]);
                out.data = cm.data.clone();
                ctx.apply(&out)?;
                ctx.info(&format!("reconciled {} in call {calls}", cm.name()));
                Ok(Action::Done)
            }
            "count" => Err(Error::other(format!("calls={calls}"))),
            "requeue" => Ok(Action::RequeueAfter(Duration::from_millis(1500))),
            "trap" => panic!("reconcile was asked to trap"),
            "loop" => loop {
                std::hint::black_box(calls);
            },
            "memory-bomb" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "recursion" => Ok(Action::RequeueAfter(Duration::from_millis(recurse(u64::MAX)))),
            "oversized-error" => Err(Error::other("x".repeat(1 << 20))),
            "forbidden-read" => ctx.get::<Secret>(cm.namespace(), "anything").map(|_| Action::Done),
            "sandbox-file" => Err(Error::other(format!("read /etc/hostname: {:?}", std::fs::read_to_string("/etc/hostname")))),
            "sandbox-dir" => Err(Error::other(format!("list /: {:?}", std::fs::read_dir("/").map(|d| d.count())))),
            "sandbox-socket" => Err(Error::other(format!(
                "connect: {:?}",
                std::net::TcpStream::connect(cm.data.as_ref().and_then(|d| d.get("address")).map(String::as_str).unwrap_or("127.0.0.1:1"))
            ))),
            "sandbox-env" => {
                Err(Error::other(format!("env: {} vars, HOME={:?}, args: {}", std::env::vars().count(), std::env::var("HOME").ok(), std::env::args().count())))
            }
            "stdout" => {
                println!("hello from stdout");
                eprintln!("hello from stderr");
                Ok(Action::Done)
            }
            "oversized-args" => Err(Error::other(oversized_args().join("\n"))),
            other => Err(Error::new(ErrorCode::Invalid, format!("unknown mode {other:?}"))),
        }
    }

    fn map_related(&self, _: &Gvk, object: DynamicObject, _: &Context) -> Result<Vec<ObjectKey>> {
        let mode = object.field("data").and_then(|d| d.get("mode")).and_then(|m| m.as_str());
        let count = if mode == Some("oversized-keys") { 200_000 } else { 1 };
        Ok((0..count).map(|i| ObjectKey::new(object.namespace(), &format!("{}-{i}", object.name()))).collect())
    }
}

/// Calls the host with each argument over its bound, straight through the generated bindings
/// (the SDK would refuse them first), and says what each call answered: `Code: message`, one a
/// line, in this order.
fn oversized_args() -> Vec<String> {
    use kubewasm_sdk::bindings::kubewasm::controller::{cache, client, events, types};
    let configmap = || types::Gvk { group: String::new(), version: "v1".into(), kind: "ConfigMap".into() };
    let long = |n: usize| "a".repeat(n);
    fn answer<T>(result: std::result::Result<T, types::Error>) -> String {
        match result {
            Ok(_) => "ok".into(),
            Err(e) => format!("{:?}: {}", e.code, e.message),
        }
    }
    let event = |name: String, reason: &str, note: String| events::Event {
        regarding: types::ObjectRef { resource: configmap(), namespace: Some("default".into()), name },
        event_type: events::EventType::Normal,
        reason: reason.into(),
        action: "Test".into(),
        note,
    };
    vec![
        answer(cache::get(&configmap(), Some("default"), &long(254))),
        answer(cache::get(&configmap(), Some(&long(64)), "x")),
        answer(cache::get(&types::Gvk { kind: long(64), ..configmap() }, Some("default"), "x")),
        answer(cache::get(&types::Gvk { group: long(254), ..configmap() }, Some("default"), "x")),
        answer(cache::list_objects(&configmap(), None, Some(&long(4097)))),
        answer(client::apply(&long((3 << 20) + 1), false)),
        answer(client::patch(&configmap(), Some("default"), "x", client::PatchType::Merge, &long((3 << 20) + 1))),
        answer(client::delete(&configmap(), Some("default"), &long(254))),
        answer(events::publish(&event(long(8 << 20), "Test", "note".into()))),
        answer(events::publish(&event("x".into(), "", "note".into()))),
        answer(events::publish(&event("x".into(), &long(129), "note".into()))),
        answer(events::publish(&event("x".into(), "Test", long(1025)))),
    ]
}

/// Recursion the optimizer can neither turn into a loop (the result is rotated before it is
/// combined) nor move onto the shadow stack in linear memory (only scalars): it exhausts the
/// wasm call stack, the host's limit.
fn recurse(depth: u64) -> u64 {
    if depth == 0 { 0 } else { recurse(depth - 1).rotate_left(7) ^ depth }
}

kubewasm_sdk::export_controller!(Faulty);
