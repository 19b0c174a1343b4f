//! The hostile-plugin suite's attacker. Its primary is ConfigMaps labelled
//! `hostile.kubewasm.io/target` (or the setting `selector`); every reconcile carries out the
//! attack its settings name, as hard as the host lets it:
//!
//! - `list-everything`: lists every ConfigMap in the cluster, again and again, for the whole call;
//! - `event-spam`: records hundreds of Events with random reasons about random object names;
//! - `log-flood`: writes a log record with 200 000 fields (setting `fields`), then records without
//!   pause;
//! - `map-flood`: (as a `map-related` watch of every ConfigMap) maps each to 100 000 new keys;
//! - `requeue-zero`: asks to be called again at once, forever;
//! - `busy-loop`: computes without end (until its deadline, up to the host's 300 s maximum) on
//!   every target at once (setting `max-concurrency`, up to 64);
//! - `hang`: sleeps in a host call (WASI poll) for an hour;
//! - `event-bomb`: publishes Events about an object with an 8 MiB name, in a loop, straight through
//!   the generated bindings (the SDK would refuse the name first), and fails with what the host
//!   answered;
//! - `describe-memory`: touches `describe-memory-mib` (default 3072) MiB of memory while it
//!   describes itself;
//! - `memory`: asks for 4 GiB per instance and 64 workers (refused at load by the budget);
//! - `lease`: declares `patch` on Leases (all, or those named by `lease-names`) and patches the
//!   host's own Lease (setting `lease`, `NAMESPACE/NAME`) to make itself the holder;
//! - `access-flood`: its `access` export declares `rules` rules (default 1000) on Secrets, each
//!   with the verbs of `verbs` (default all 14 RBAC verbs), `namespaces` namespaces and `names`
//!   object names (default 100 each): the audit's H1 shape, 14 million access reviews;
//! - `watch-flood`: declares `grants` list grants on Secrets (default 1), each limited to its own
//!   `namespaces` namespaces (default 5000), none of which exists: one watch per namespace;
//! - `apply-blind`: declares only `patch` on Secrets (no `create`, no read) and applies a Secret
//!   `blind` that does not exist, hoping RBAC lets its identity create it; logs the outcome;
//! - `get-loop`: declares only `get` on PodTemplates (so every read goes to the API server) and
//!   reads one, again and again, for `loop-ms` (default 3000) of every reconcile.
//! - `reach-out`: reaches only the member clusters labelled `env=dev`, and in every reconcile
//!   writes a ConfigMap `stolen` into each member cluster named by `clusters` (straight through
//!   the generated bindings: the SDK would check the names first), then into a cluster whose name
//!   is 8 MiB long; logs each outcome as `reach attack: CLUSTER: CODE: MESSAGE`.

use std::time::Duration;

use kubewasm_sdk::prelude::*;

#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "kebab-case")]
struct Settings {
    attack: String,
    selector: Option<String>,
    max_concurrency: Option<u32>,
    lease: Option<String>,
    /// Limits its Lease grant to these names (empty: every Lease).
    lease_names: Vec<String>,
    name: Option<String>,
    /// Fields of the `log-flood` attack's first record (default 200 000).
    fields: Option<usize>,
    /// The `access-flood` and `watch-flood` shapes.
    rules: Option<usize>,
    verbs: Option<Vec<String>>,
    grants: Option<usize>,
    namespaces: Option<usize>,
    names: Option<usize>,
    /// How long each `get-loop` reconcile reads, in milliseconds.
    loop_ms: Option<u64>,
    /// What `describe-memory` touches in `describe`.
    describe_memory_mib: Option<usize>,
    /// The clusters `reach-out` writes into.
    clusters: Vec<String>,
}

/// Every RBAC verb.
const VERBS: [&str; 14] =
    ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "bind", "escalate", "impersonate", "approve", "sign", "use"];

struct Hostile {
    attack: String,
    selector: String,
    workers: u32,
    lease: Option<String>,
    lease_names: Vec<String>,
    name: String,
    fields: usize,
    rules: usize,
    verbs: Vec<String>,
    grants: usize,
    namespaces: usize,
    names: usize,
    loop_ms: u64,
    /// The clusters `reach-out` writes into.
    clusters: Vec<String>,
}

/// A cheap pseudo-random sequence (the sandbox gives WASI random, but this is enough).
fn noise(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

fn configmap() -> Gvk {
    Gvk::new("", "v1", "ConfigMap")
}

fn lease() -> Gvk {
    Gvk::new("coordination.k8s.io", "v1", "Lease")
}

fn secret() -> Gvk {
    Gvk::new("", "v1", "Secret")
}

fn pod_template() -> Gvk {
    Gvk::new("", "v1", "PodTemplate")
}

/// `n` distinct names starting with `prefix`.
fn numbered(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

impl Controller for Hostile {
    type Primary = DynamicObject;
    type Settings = Settings;

    fn new(settings: Settings) -> std::result::Result<Self, String> {
        let attack = settings.attack;
        if attack == "describe-memory" {
            // One byte a page is enough to make every page resident.
            let mut memory = vec![0u8; settings.describe_memory_mib.unwrap_or(3072) << 20];
            for page in memory.chunks_mut(4096) {
                page[0] = 1;
            }
            std::hint::black_box(&memory);
        }
        Ok(Hostile {
            attack: attack.clone(),
            selector: settings.selector.unwrap_or_else(|| "hostile.kubewasm.io/target".into()),
            workers: settings.max_concurrency.unwrap_or(4),
            lease: settings.lease,
            lease_names: settings.lease_names,
            name: settings.name.unwrap_or_else(|| "hostile".into()),
            fields: settings.fields.unwrap_or(200_000),
            rules: settings.rules.unwrap_or(1000),
            verbs: settings.verbs.unwrap_or_else(|| VERBS.map(String::from).to_vec()),
            grants: settings.grants.unwrap_or(1),
            namespaces: settings.namespaces.unwrap_or(if attack == "watch-flood" { 5000 } else { 100 }),
            names: settings.names.unwrap_or(100),
            loop_ms: settings.loop_ms.unwrap_or(3000),
            clusters: settings.clusters,
        })
    }

    fn manifest(&self) -> Manifest {
        let mut manifest = Manifest::new(&self.name, "1.0.0")
            .primary_gvk(&configmap())
            .primary_selector(&self.selector)
            .max_concurrency(self.workers)
            // Everything a greedy plugin would ask for on ConfigMaps.
            .grant(&configmap(), None, &[Verb::Get, Verb::List, Verb::Watch, Verb::Patch], &[]);
        match self.attack.as_str() {
            "map-flood" => manifest = manifest.watches_gvk(&configmap(), Mapping::MapRelated, None),
            "lease" if self.lease_names.is_empty() => manifest = manifest.grant(&lease(), None, &[Verb::Get, Verb::Patch], &[]),
            "lease" => {
                let names: Vec<&str> = self.lease_names.iter().map(String::as_str).collect();
                manifest = manifest.grant_named(&lease(), &["get", "patch"], &[], &names);
            }
            "memory" => {
                manifest = manifest.max_concurrency(64).limits(kubewasm_sdk::Limits { deadline: None, memory_bytes: Some(4 << 30) });
            }
            "access-flood" => {
                let verbs: Vec<&str> = self.verbs.iter().map(String::as_str).collect();
                for rule in 0..self.rules {
                    let namespaces = numbered(&format!("flood-{rule}"), self.namespaces);
                    let namespaces: Vec<&str> = namespaces.iter().map(String::as_str).collect();
                    let names = numbered(&format!("secret-{rule}"), self.names);
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    manifest = manifest.rule(&secret(), None, &verbs, &namespaces, &names);
                }
            }
            "watch-flood" => {
                for grant in 0..self.grants {
                    let namespaces = numbered(&format!("nowhere-{grant}"), self.namespaces);
                    let namespaces: Vec<&str> = namespaces.iter().map(String::as_str).collect();
                    manifest = manifest.grant(&secret(), None, &[Verb::List, Verb::Watch], &namespaces);
                }
            }
            "get-loop" => manifest = manifest.grant(&pod_template(), None, &[Verb::Get], &[]),
            "apply-blind" => manifest = manifest.grant(&secret(), None, &[Verb::Patch], &[]),
            "reach-out" => {
                manifest = manifest.reach_members(Members::Matching("env=dev".into())).grant(&configmap(), None, &[Verb::Create, Verb::Patch], &[]);
            }
            _ => {}
        }
        manifest
    }

    fn reconcile(&self, primary: DynamicObject, ctx: &Context) -> Result<Action> {
        let mut seed = 0x9e37_79b9_7f4a_7c15 ^ primary.name().len() as u64;
        match self.attack.as_str() {
            "list-everything" => {
                // Until the deadline stops it, or the host refuses the list.
                loop {
                    let all = ctx.list_dynamic(&configmap(), None, None)?;
                    std::hint::black_box(all.len());
                }
            }
            "event-spam" => {
                for _ in 0..500 {
                    let n = noise(&mut seed);
                    let target = DynamicObject::new(&configmap(), primary.namespace(), &format!("random-{n:x}"));
                    let _ = ctx.event(&target, EventType::Warning, &format!("Spam{n:x}"), "Spam", "spam");
                }
                Ok(Action::RequeueAfter(Duration::from_secs(1)))
            }
            "log-flood" => {
                let key = "k".to_string();
                let value = "v".to_string();
                let fields: Vec<(&str, &str)> = (0..self.fields).map(|_| (key.as_str(), value.as_str())).collect();
                ctx.log(kubewasm_sdk::LogLevel::Info, &format!("{} fields", self.fields), &fields);
                for i in 0..100_000 {
                    ctx.info(&format!("flood {i}"));
                }
                Ok(Action::RequeueAfter(Duration::from_secs(1)))
            }
            "event-bomb" => {
                use kubewasm_sdk::bindings::kubewasm::controller::{events, types};
                let event = events::Event {
                    regarding: types::ObjectRef {
                        resource: types::Gvk { group: String::new(), version: "v1".into(), kind: "ConfigMap".into() },
                        namespace: primary.namespace().map(str::to_owned),
                        name: "a".repeat(8 << 20),
                    },
                    event_type: events::EventType::Warning,
                    reason: "Bomb".into(),
                    action: "Bomb".into(),
                    note: "bomb".into(),
                };
                let mut answer = None;
                for _ in 0..300 {
                    answer = events::publish(&event).err();
                }
                match answer {
                    Some(e) => Err(kubewasm_sdk::Error::new(e.code, e.message)),
                    None => Ok(Action::RequeueAfter(Duration::from_secs(1))),
                }
            }
            "requeue-zero" => Ok(Action::RequeueAfter(Duration::ZERO)),
            "busy-loop" => {
                let mut n = 0u64;
                loop {
                    n = std::hint::black_box(n.wrapping_add(seed));
                }
            }
            "lease" => {
                let (namespace, name) = self.lease.as_deref().and_then(|l| l.split_once('/')).unwrap_or_default();
                let body = kubewasm_sdk::serde_json::json!({"spec": {"holderIdentity": "hostile", "leaseDurationSeconds": 3600}});
                let result = ctx.patch(&lease(), Some(namespace), name, kubewasm_sdk::PatchType::Merge, &body);
                // The outcome, for the test to read: an error code, or "patched".
                let outcome = match result {
                    Ok(_) => "patched".to_string(),
                    Err(e) => format!("{:?}: {}", e.code, e.message),
                };
                ctx.warn(&format!("lease attack: {outcome}"));
                Ok(Action::Done)
            }
            "apply-blind" => {
                let mut blind = DynamicObject::new(&secret(), primary.namespace(), "blind");
                blind.data.insert("stringData".into(), kubewasm_sdk::serde_json::json!({"k": "v"}));
                let outcome = match ctx.apply(&blind) {
                    Ok(_) => "applied".to_string(),
                    Err(e) => format!("{:?}: {}", e.code, e.message),
                };
                ctx.warn(&format!("blind apply: {outcome}"));
                Ok(Action::Done)
            }
            "get-loop" => {
                let started = std::time::Instant::now();
                while started.elapsed() < Duration::from_millis(self.loop_ms) {
                    let _ = ctx.get_dynamic(&pod_template(), primary.namespace(), "absent");
                }
                Ok(Action::RequeueAfter(Duration::from_secs(1)))
            }
            "hang" => {
                std::thread::sleep(Duration::from_secs(3600));
                Ok(Action::Done)
            }
            "reach-out" => {
                use kubewasm_sdk::bindings::kubewasm::controller::fleet;
                let stolen = kubewasm_sdk::serde_json::json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "stolen", "namespace": primary.namespace()}, "data": {"k": "v"},
                })
                .to_string();
                let huge = "c".repeat(8 << 20);
                for cluster in self.clusters.iter().map(String::as_str).chain([huge.as_str()]) {
                    let outcome = match fleet::apply(Some(cluster), &stolen, true) {
                        Ok(_) => "applied".to_string(),
                        Err(e) => format!("{:?}: {}", e.code, e.message),
                    };
                    let shown = if cluster.len() > 253 { "<8 MiB name>" } else { cluster };
                    ctx.warn(&format!("reach attack: {shown}: {outcome}"));
                }
                Ok(Action::RequeueAfter(Duration::from_secs(1)))
            }
            _ => Ok(Action::Done),
        }
    }

    fn map_related(&self, _resource: &Gvk, object: DynamicObject, _ctx: &Context) -> Result<Vec<ObjectKey>> {
        // New names every time: a queue that kept them would grow without bound.
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok((0..100_000).map(|i| ObjectKey::new(object.namespace(), &format!("mapped-{call}-{i}"))).collect())
    }
}

kubewasm_sdk::export_controller!(Hostile);
