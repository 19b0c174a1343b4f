//! The end-to-end suite's plugin. Its primary is a core/v1 kind (ConfigMap by default) selected
//! by a label; each reconcile turns the primary's `e2e.kubewasm.io/input` annotation into an
//! output (an owned ConfigMap `<primary>.<plugin>`, or an annotation on the primary itself),
//! stamped with the plugin's variant and the host it ran in. Settings (`NAME.toml`) choose the
//! name, host identity, primary kind, selector, mode, finalizer, concurrency, a mapped watch (and
//! how slow its `map-related` is, whether outputs report the watched objects) and how often each
//! reconcile lists every ConfigMap, so one build serves every test.
//!
//! The *variant* is not a setting: it is the 16-byte marker [`VARIANT`] in the component's data,
//! which the tests patch in the binary to make new versions of the plugin from one build (same
//! size, different digest, different behaviour). Variants `trp` and `bad` make `describe` trap or
//! return an invalid manifest.

use std::collections::BTreeMap;
use std::time::Duration;

use kubewasm_sdk::prelude::*;
use kubewasm_sdk::serde_json::{self, json};

/// `kubewasm-e2e:` and a three-character variant; the tests replace the last three bytes.
static VARIANT: [u8; 16] = *b"kubewasm-e2e:v01";

const INPUT: &str = "e2e.kubewasm.io/input";
const OUTPUT: &str = "e2e.kubewasm.io/output";
const SLEEP_MS: &str = "e2e.kubewasm.io/sleep-ms";
const FAIL: &str = "e2e.kubewasm.io/fail";
const RELEASE: &str = "e2e.kubewasm.io/release";
/// Names a plugin that traps (panics) when it reconciles (or maps) the object.
const TRAP: &str = "e2e.kubewasm.io/trap";
/// Names a variant that traps when it reconciles the object: a new version that breaks on
/// objects the one before handled.
const TRAP_VARIANT: &str = "e2e.kubewasm.io/trap-variant";
/// Names a plugin that computes forever when it reconciles the object (until its deadline).
const SPIN: &str = "e2e.kubewasm.io/spin";
/// Millions of rounds of arithmetic to do before reconciling (about 1 ms of CPU per million).
const WORK: &str = "e2e.kubewasm.io/work-mi";
/// On a watched object: `map-related` sleeps this many milliseconds for it (instead of the
/// setting `map-sleep-ms`).
const MAP_SLEEP_MS: &str = "e2e.kubewasm.io/map-sleep-ms";
const DEFAULT_SELECTOR: &str = "e2e.kubewasm.io/primary";

fn variant() -> String {
    // Volatile: the marker must stay in the data segment, where the tests find it.
    // SAFETY: reading a plain static.
    let bytes = unsafe { std::ptr::read_volatile(&VARIANT) };
    String::from_utf8_lossy(&bytes[13..]).into_owned()
}

#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "kebab-case")]
struct Settings {
    /// Plugin name (default `e2e`).
    name: Option<String>,
    /// Identity stamped into outputs (which host process reconciled).
    host: Option<String>,
    /// core/v1 kind of the primary (default `ConfigMap`).
    kind: Option<String>,
    /// Primary label selector (default `e2e.kubewasm.io/primary`). Empty: no selector, and the
    /// plugin itself skips objects without that label.
    selector: Option<String>,
    /// `output` (default): apply the output ConfigMap; `update`: write the output annotation on
    /// the primary with an update carrying its resourceVersion (conflicts are possible);
    /// `rolebinding`: apply a RoleBinding `<primary>-edit` of the ClusterRole `edit` to the
    /// ServiceAccount the input names (it needs `bind` on `edit`, or to hold all of `edit`);
    /// `secret`: apply a Secret `<primary>.<plugin>` whose `data.k` (base64) and `stringData.s`
    /// hold `<input>:<variant>` (it needs grants on Secrets, see `extra`);
    /// `children`: say in a Normal Event `Children` (note `<input>: <names>`) which Secrets the
    /// primary controls (`list-controlled`; needs `owns`);
    /// `stamp`: update the primary's output annotation to the wall clock's seconds since the
    /// epoch, read the primary back and say what it read in a Normal Event `Stamped`;
    /// `update-watched`: with `map-label`, get each watched object naming the primary from the
    /// cache and update it with the output annotation `<variant>:<input>` (it needs `update` on
    /// the watched kind, see `extra`);
    /// `noop`: nothing.
    mode: Option<String>,
    /// A finalizer; `finalize` waits for the annotation `e2e.kubewasm.io/release=true`.
    finalizer: Option<String>,
    max_concurrency: Option<u32>,
    /// Record a Normal Event `Reconciled` (note: the input) on each primary it reconciles.
    events: bool,
    /// More grants, each `VERBS KIND [name=NAME] [ns=NAMESPACE]`, e.g. `get,list Secret.v1` or
    /// `patch Lease.v1.coordination.k8s.io name=other`: a manifest asking for more than its
    /// identity holds.
    extra: Vec<String>,
    /// Watch ConfigMaps (or `watch-kind`) carrying this label (`map-related`): each maps to the
    /// primary its value names, in its namespace.
    map_label: Option<String>,
    /// core/v1 kind of the `map-label` watch (default `ConfigMap`).
    watch_kind: Option<String>,
    /// Sleep this long in `describe` (a plugin slow to start).
    describe_sleep_ms: Option<u64>,
    /// Sleep this long in each `map-related` call (unless the object's annotation
    /// `e2e.kubewasm.io/map-sleep-ms` says otherwise).
    map_sleep_ms: Option<u64>,
    /// With `map-label`: the output also says (`related`) which watched objects name the
    /// primary, and their inputs (`NAME=INPUT,...`, sorted), read from the cache, and
    /// (`related-data`) which of them it was handed with their `data` (`NAME,...`).
    related: bool,
    /// With `map-label`: read the watched kind as metadata only (`views.metadata-only`); the
    /// primary's kind must then be another (see `kind`, `watch-kind`).
    metadata_only: bool,
    /// List every ConfigMap of the primary's namespace this many times in each reconcile; the
    /// output says how many it found (`listed`).
    list_all: u32,
    /// Write the output as a Secret (`stringData`) and declare it owned (`owns Secret`): an
    /// owned watch of a kind other than the primary's.
    owns: bool,
    /// Log `e2e-trace start NS/NAME` first and `e2e-trace end NS/NAME` last in each reconcile,
    /// for the tests' checker that no two hosts reconcile one object at once.
    trace: bool,
    /// Also serve these member clusters: `all`, or a label selector over their labels; the
    /// output then says in which cluster it was made (`cluster`, empty for the host's own).
    serve_members: Option<String>,
    /// Read the primary's kind projected to these dotted fields (`projections`); the output
    /// then says what the plugin was handed of the primary (`handed`), of it read back from the
    /// cache (`read`) and of the output ConfigMap's first apply's answer (`answered`), each as
    /// its fields beyond the metadata, an object's with its keys (`data(a,b)`).
    reads_fields: Vec<String>,
}

struct E2e {
    name: String,
    host: String,
    primary: Gvk,
    selector: String,
    mode: String,
    finalizer: Option<String>,
    workers: u32,
    variant: String,
    events: bool,
    extra: Vec<String>,
    map_label: Option<String>,
    watched: Gvk,
    map_sleep_ms: u64,
    related: bool,
    metadata_only: bool,
    list_all: u32,
    owns: bool,
    trace: bool,
    serve_members: Option<Members>,
    reads_fields: Vec<String>,
}

/// An object's fields beyond its metadata, sorted, an object's with its keys: `data(a,b)`.
fn shape(object: &DynamicObject) -> String {
    let mut fields: Vec<String> = object
        .data
        .iter()
        .map(|(name, value)| match value.as_object() {
            Some(members) => {
                let mut keys: Vec<&str> = members.keys().map(String::as_str).collect();
                keys.sort_unstable();
                format!("{name}({})", keys.join(","))
            }
            None => name.clone(),
        })
        .collect();
    fields.sort();
    fields.join(" ")
}

fn annotation<'a>(object: &'a DynamicObject, key: &str) -> Option<&'a str> {
    object.annotation(key)
}

impl E2e {
    fn output_name(&self, primary: &DynamicObject) -> String {
        format!("{}.{}", primary.name(), self.name)
    }

    fn apply_configmap(
        &self,
        ctx: &Context,
        name: String,
        namespace: Option<&str>,
        owner: Option<&DynamicObject>,
        data: BTreeMap<&str, String>,
    ) -> Result<DynamicObject> {
        self.apply_output(ctx, "ConfigMap", "data", name, namespace, owner, data)
    }

    /// Applies a ConfigMap (`data`) or a Secret (`stringData`) named `name`.
    #[allow(clippy::too_many_arguments)]
    fn apply_output(
        &self,
        ctx: &Context,
        kind: &str,
        field: &str,
        name: String,
        namespace: Option<&str>,
        owner: Option<&DynamicObject>,
        data: BTreeMap<&str, String>,
    ) -> Result<DynamicObject> {
        let mut metadata = json!({"name": name, "namespace": namespace, "labels": {"e2e.kubewasm.io/plugin": self.name}});
        if let Some(owner) = owner {
            metadata["ownerReferences"] = json!([owner.controller_owner_ref()]);
        }
        let object: DynamicObject = serde_json::from_value(json!({"apiVersion": "v1", "kind": kind, "metadata": metadata, field: data}))?;
        ctx.apply(&object)
    }
}

impl Controller for E2e {
    type Primary = DynamicObject;
    type Settings = Settings;

    fn new(settings: Settings) -> Result<Self, String> {
        let variant = variant();
        if variant == "trp" {
            panic!("variant trp traps in describe");
        }
        if let Some(ms) = settings.describe_sleep_ms {
            std::thread::sleep(Duration::from_millis(ms));
        }
        Ok(E2e {
            name: settings.name.unwrap_or_else(|| "e2e".into()),
            host: settings.host.unwrap_or_default(),
            primary: Gvk::new("", "v1", settings.kind.as_deref().unwrap_or("ConfigMap")),
            selector: settings.selector.unwrap_or_else(|| DEFAULT_SELECTOR.into()),
            mode: settings.mode.unwrap_or_else(|| "output".into()),
            finalizer: settings.finalizer,
            workers: settings.max_concurrency.unwrap_or(2),
            variant,
            events: settings.events,
            extra: settings.extra,
            map_label: settings.map_label,
            watched: Gvk::new("", "v1", settings.watch_kind.as_deref().unwrap_or("ConfigMap")),
            map_sleep_ms: settings.map_sleep_ms.unwrap_or(0),
            related: settings.related,
            metadata_only: settings.metadata_only,
            list_all: settings.list_all,
            owns: settings.owns,
            trace: settings.trace,
            serve_members: settings.serve_members.map(|m| if m == "all" { Members::All } else { Members::Matching(m) }),
            reads_fields: settings.reads_fields,
        })
    }

    fn manifest(&self) -> Manifest {
        let name = if self.variant == "bad" { "Not_A_DNS_Label" } else { &self.name };
        let configmap = Gvk::new("", "v1", "ConfigMap");
        let mut manifest = Manifest::new(name, &self.variant)
            .primary_gvk(&self.primary)
            .grant(&configmap, None, &[Verb::Create, Verb::Patch, Verb::Delete], &[])
            .grant(&self.primary, None, &[Verb::Update], &[])
            .max_concurrency(self.workers);
        if !self.selector.is_empty() {
            manifest = manifest.primary_selector(&self.selector);
        }
        if let Some(finalizer) = &self.finalizer {
            manifest = manifest.finalizer(finalizer);
        }
        if let Some(label) = &self.map_label {
            manifest = manifest.watches_gvk(&self.watched, Mapping::MapRelated, Some(label));
            if self.metadata_only {
                manifest = manifest.metadata_only_gvk(&self.watched);
            }
        }
        if let Some(members) = &self.serve_members {
            manifest = manifest.serve_members(members.clone());
        }
        if !self.reads_fields.is_empty() {
            let fields: Vec<&str> = self.reads_fields.iter().map(String::as_str).collect();
            manifest = manifest.reads_fields_gvk(&self.primary, &fields);
        }
        if self.owns {
            let secret = Gvk::new("", "v1", "Secret");
            manifest = manifest.owns_gvk(&secret).grant(&secret, None, &[Verb::Create, Verb::Patch, Verb::Delete], &[]);
        }
        for grant in &self.extra {
            let mut words = grant.split_whitespace();
            let verbs: Vec<&str> = words.next().unwrap_or_default().split(',').collect();
            let mut parts = words.next().unwrap_or_default().splitn(3, '.');
            let (kind, version, group) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
            let words: Vec<&str> = words.collect();
            let names: Vec<&str> = words.iter().filter_map(|w| w.strip_prefix("name=")).collect();
            let namespaces: Vec<&str> = words.iter().filter_map(|w| w.strip_prefix("ns=")).collect();
            manifest = manifest.rule(&Gvk::new(group, version, kind), None, &verbs, &namespaces, &names);
        }
        manifest
    }

    fn reconcile(&self, primary: DynamicObject, ctx: &Context) -> Result<Action> {
        if !self.trace {
            return self.reconcile_traced(primary, ctx);
        }
        let key = format!("{}/{}", primary.namespace().unwrap_or_default(), primary.name());
        ctx.info(&format!("e2e-trace start {key}"));
        let result = self.reconcile_traced(primary, ctx);
        ctx.info(&format!("e2e-trace end {key}"));
        result
    }

    fn map_related(&self, _resource: &Gvk, object: DynamicObject, _ctx: &Context) -> Result<Vec<ObjectKey>> {
        if annotation(&object, TRAP) == Some(self.name.as_str()) {
            panic!("{} asks {} to trap in map-related", object.name(), self.name);
        }
        let sleep = annotation(&object, MAP_SLEEP_MS).and_then(|v| v.parse().ok()).unwrap_or(self.map_sleep_ms);
        if sleep > 0 {
            std::thread::sleep(Duration::from_millis(sleep));
        }
        let parent = self.map_label.as_deref().and_then(|label| object.label(label));
        Ok(parent.map(|name| ObjectKey::new(object.namespace(), name)).into_iter().collect())
    }

    fn finalize(&self, primary: DynamicObject, ctx: &Context) -> Result<Action> {
        let released = annotation(&primary, RELEASE) == Some("true");
        let state = if released { "done" } else { "waiting" };
        let data = BTreeMap::from([("state", state.to_string()), ("variant", self.variant.clone()), ("host", self.host.clone())]);
        // Not owned by the primary: the record outlives it.
        self.apply_configmap(ctx, format!("{}.finalized", self.output_name(&primary)), primary.namespace(), None, data)?;
        if released { Ok(Action::Done) } else { Ok(Action::RequeueAfter(Duration::from_millis(500))) }
    }
}

impl E2e {
    fn reconcile_traced(&self, primary: DynamicObject, ctx: &Context) -> Result<Action> {
        // Without a selector the host hands over every object of the kind, outputs included.
        if self.selector.is_empty() && primary.label(DEFAULT_SELECTOR).is_none() {
            return Ok(Action::Done);
        }
        let input = annotation(&primary, INPUT).unwrap_or_default().to_string();
        if let Some(ms) = annotation(&primary, SLEEP_MS).and_then(|v| v.parse::<u64>().ok()) {
            ctx.info(&format!("reconcile of {} sleeps {ms} ms", primary.name()));
            std::thread::sleep(Duration::from_millis(ms));
            ctx.info(&format!("reconcile of {} woke up", primary.name()));
        }
        if let Some(millions) = annotation(&primary, WORK).and_then(|v| v.parse::<u64>().ok()) {
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            for _ in 0..millions * 1_000_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x = std::hint::black_box(x);
            }
        }
        if annotation(&primary, TRAP) == Some(self.name.as_str()) {
            panic!("{} asks {} to trap", primary.name(), self.name);
        }
        if annotation(&primary, TRAP_VARIANT) == Some(self.variant.as_str()) {
            panic!("{} asks variant {} to trap", primary.name(), self.variant);
        }
        if annotation(&primary, SPIN) == Some(self.name.as_str()) {
            let mut n = 0u64;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        if annotation(&primary, FAIL) == Some("true") {
            return Err(Error::other(format!("{} asks to fail", primary.name())));
        }
        let configmap = Gvk::new("", "v1", "ConfigMap");
        let mut listed = 0;
        for _ in 0..self.list_all {
            listed = ctx.list_dynamic(&configmap, primary.namespace(), None)?.len();
        }
        let related = match &self.map_label {
            Some(label) if self.related => {
                let selector = format!("{label}={}", primary.name());
                let watched = ctx.list_dynamic(&self.watched, primary.namespace(), Some(&selector))?;
                let mut inputs: Vec<String> = watched.iter().map(|w| format!("{}={}", w.name(), annotation(w, INPUT).unwrap_or_default())).collect();
                inputs.sort();
                let mut with_data: Vec<String> = watched.iter().filter(|w| w.field("data").is_some()).map(|w| w.name().to_string()).collect();
                with_data.sort();
                Some((inputs.join(","), with_data.join(",")))
            }
            _ => None,
        };
        match self.mode.as_str() {
            "noop" => {}
            "secret" => {
                use base64::Engine as _;
                let value = format!("{input}:{}", self.variant);
                let secret: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {
                        "name": self.output_name(&primary),
                        "namespace": primary.namespace(),
                        "labels": {"e2e.kubewasm.io/plugin": self.name},
                        "ownerReferences": [primary.controller_owner_ref()],
                    },
                    "type": "Opaque",
                    "data": {"k": base64::engine::general_purpose::STANDARD.encode(&value)},
                    "stringData": {"s": value},
                }))?;
                ctx.apply(&secret)?;
            }
            "rolebinding" => {
                // What a namespace-onboarding controller does: let the team edit its namespace.
                let binding: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": format!("{}-edit", primary.name()), "namespace": primary.namespace()},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                    "subjects": [{"kind": "ServiceAccount", "name": input, "namespace": primary.namespace()}],
                }))?;
                ctx.apply(&binding)?;
            }
            "children" => {
                // The Secrets the primary controls, from the host's controller index.
                let uid = primary.metadata.uid.clone().unwrap_or_default();
                let children = ctx.list_controlled_dynamic(&Gvk::new("", "v1", "Secret"), primary.namespace(), &uid)?;
                let names: Vec<&str> = children.iter().map(|c| c.name()).collect();
                ctx.event(&primary, EventType::Normal, "Children", "Reconcile", &format!("{input}: {}", names.join(",")))?;
            }
            "stamp" => {
                // The wall clock into the output annotation, then the primary read back from the
                // cache into an Event: what a table test's `now` and read-your-writes promise.
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
                let mut updated = primary.clone();
                updated.metadata.annotations.get_or_insert_with(Default::default).insert(OUTPUT.into(), now.to_string());
                ctx.update(&updated)?;
                let read = ctx.get_dynamic(&self.primary, primary.namespace(), primary.name())?.ok_or_else(|| Error::other("the primary is gone"))?;
                let note = format!(
                    "read back {} at resourceVersion {}",
                    annotation(&read, OUTPUT).unwrap_or_default(),
                    read.metadata.resource_version.clone().unwrap_or_default()
                );
                ctx.event(&primary, EventType::Normal, "Stamped", "Reconcile", &note)?;
            }
            "update-watched" => {
                let label = self.map_label.as_deref().ok_or_else(|| Error::other("update-watched needs map-label"))?;
                for watched in ctx.list_dynamic(&self.watched, primary.namespace(), Some(&format!("{label}={}", primary.name())))? {
                    let mut got =
                        ctx.get_dynamic(&self.watched, watched.namespace(), watched.name())?.ok_or_else(|| Error::other("the watched object is gone"))?;
                    got.metadata.annotations.get_or_insert_with(Default::default).insert(OUTPUT.into(), format!("{}:{input}", self.variant));
                    ctx.update(&got)?;
                }
            }
            "update" => {
                let want = format!("{}:{input}", self.variant);
                if annotation(&primary, OUTPUT) != Some(want.as_str()) {
                    let mut updated = primary.clone();
                    updated.metadata.annotations.get_or_insert_with(Default::default).insert(OUTPUT.into(), want);
                    ctx.update(&updated)?;
                }
            }
            _ => {
                let mut data = BTreeMap::from([
                    ("input", input.clone()),
                    ("variant", self.variant.clone()),
                    ("host", self.host.clone()),
                    ("generation", primary.generation().unwrap_or_default().to_string()),
                ]);
                if self.list_all > 0 {
                    data.insert("listed", listed.to_string());
                }
                if self.serve_members.is_some() {
                    data.insert("cluster", ctx.cluster().unwrap_or_default());
                }
                if let Some((related, with_data)) = related {
                    data.insert("related", related);
                    data.insert("related-data", with_data);
                }
                if !self.reads_fields.is_empty() {
                    data.insert("handed", shape(&primary));
                    let read = ctx.get_dynamic(&self.primary, primary.namespace(), primary.name())?.ok_or_else(|| Error::other("the primary is gone"))?;
                    data.insert("read", shape(&read));
                }
                if self.owns {
                    self.apply_output(ctx, "Secret", "stringData", self.output_name(&primary), primary.namespace(), Some(&primary), data)?;
                } else {
                    let answer = self.apply_configmap(ctx, self.output_name(&primary), primary.namespace(), Some(&primary), data.clone())?;
                    if !self.reads_fields.is_empty() {
                        data.insert("answered", shape(&answer));
                        self.apply_configmap(ctx, self.output_name(&primary), primary.namespace(), Some(&primary), data)?;
                    }
                }
            }
        }
        if self.events {
            ctx.event(&primary, EventType::Normal, "Reconciled", "Reconcile", &input)?;
        }
        ctx.debug(&format!("reconciled {} input={input} variant={} host={}", primary.name(), self.variant, self.host));
        Ok(Action::Done)
    }
}

kubewasm_sdk::export_controller!(E2e);
