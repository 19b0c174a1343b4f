//! The slots' rules with a fake backend: no cluster, no WebAssembly, paused time. Admission,
//! swaps and what each version reserves, rollback, promotion, names and finalizers across slots,
//! readiness, and a slot that survives a failing step.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::backend::{Backend, Module, Running};
use super::rollout::{self, Policy};
use super::status::Transition;
use super::*;
use crate::controller::{Agreement, ControllerError, Health, ShadowReport};
use crate::identity::{AdmissionError, MissingRule};
use crate::manifest::{Manifest, RequestedLimits, Verb};
use crate::plugin::{Digest, LoadError, PluginOptions};
use crate::resource::Gvk;

const MIB: u64 = 1 << 20;

#[derive(Clone, Debug)]
struct FakePlugin {
    manifest: Manifest,
    digest: Digest,
    settings: String,
    options: PluginOptions,
    memory: u64,
}

impl Module for FakePlugin {
    fn manifest(&self) -> &Manifest {
        &self.manifest
    }
    fn digest(&self) -> Digest {
        self.digest
    }
    fn settings(&self) -> &str {
        &self.settings
    }
    fn options(&self) -> &PluginOptions {
        &self.options
    }
    fn memory_bytes(&self) -> u64 {
        self.memory
    }
}

/// Version `version` of plugin `name`: 10 MiB per instance (reserved for its first instance when it
/// is admitted).
fn plugin(name: &str, version: &str) -> FakePlugin {
    FakePlugin {
        manifest: Manifest {
            name: name.into(),
            version: version.into(),
            primary: Gvk::new("", "v1", "ConfigMap"),
            primary_selector: None,
            owns: vec![],
            watches: vec![],
            finalizer: None,
            resync: None,
            max_concurrency: 1,
            limits: RequestedLimits::default(),
            permissions: vec![],
            metadata_only: vec![],
            projections: vec![],
            composition: None,
            clusters: Default::default(),
            hooks: Default::default(),
        },
        digest: Digest::of(format!("{name} {version}").as_bytes()), // what `contents` writes
        settings: "{}".into(),
        options: PluginOptions::default(),
        memory: 10 * MIB,
    }
}

/// What a plugin's file holds: what its digest is of.
fn contents(plugin: &FakePlugin) -> String {
    format!("{} {}", plugin.manifest.name, plugin.manifest.version)
}

struct FakeController {
    serving: Mutex<FakePlugin>,
    backend: Arc<State>,
    stop: CancellationToken,
    shadow: Mutex<Option<ShadowReport>>,
}

#[async_trait::async_trait]
impl Running<FakePlugin> for FakeController {
    async fn first_sync(&self) -> Result<(), ControllerError> {
        if self.backend.sync_fails.load(Ordering::SeqCst) {
            return Err(ControllerError::SyncTimeout(Duration::from_secs(60), "ConfigMap.v1".into()));
        }
        Ok(())
    }
    fn is_synced(&self) -> bool {
        true
    }
    fn serving(&self) -> FakePlugin {
        self.serving.lock().clone()
    }
    fn health(&self) -> Health {
        self.backend.health.lock().get(&self.serving.lock().digest).copied().unwrap_or_default()
    }
    async fn swap(&self, plugin: FakePlugin) -> Result<(), ControllerError> {
        if self.backend.swap_fails.load(Ordering::SeqCst) {
            return Err(ControllerError::SyncTimeout(Duration::from_secs(60), "Foo.v1.example.com".into()));
        }
        self.backend.swaps.lock().push(plugin.manifest.version.clone());
        *self.serving.lock() = plugin;
        Ok(())
    }
    fn finalizers(&self) -> Vec<String> {
        self.serving.lock().manifest.finalizer.iter().cloned().collect()
    }
    async fn shadow(&self, plugin: FakePlugin) -> Result<(), ControllerError> {
        *self.shadow.lock() = Some(ShadowReport { version: plugin.manifest.version.clone(), digest: plugin.digest.to_string(), ..Default::default() });
        Ok(())
    }
    fn end_shadow(&self) -> Option<ShadowReport> {
        self.shadow.lock().take()
    }
    fn shadow_report(&self) -> Option<ShadowReport> {
        self.shadow.lock().clone()
    }
    async fn stopped(&self) {
        self.stop.cancelled().await
    }
    fn leftover_finalizers(&self) -> Option<String> {
        None
    }
    fn list(&self, file: &Path, listing: &mut BTreeMap<String, String>) {
        let plugin = self.serving.lock();
        listing.insert(plugin.manifest.name.clone(), format!("version={} file={}", plugin.manifest.version, file.display()));
    }
}

/// What the fake backend does and saw.
#[derive(Default)]
struct State {
    /// What loading each file gives.
    files: Mutex<HashMap<PathBuf, FakePlugin>>,
    /// Files whose load panics (a host bug).
    panics: Mutex<HashSet<PathBuf>>,
    /// Plugins whose identity RBAC refuses.
    forbidden: Mutex<HashSet<String>>,
    /// Starts that fail before one succeeds (a CRD not installed yet); `u32::MAX`: never.
    start_failures: AtomicU32,
    sync_fails: AtomicBool,
    swap_fails: AtomicBool,
    standby: AtomicBool,
    health: Mutex<HashMap<Digest, Health>>,
    swaps: Mutex<Vec<String>>,
    reports: Mutex<Vec<(String, Transition, String)>>,
}

struct FakeBackend {
    state: Arc<State>,
    budget: MemoryBudget,
    policy: Policy,
}

#[async_trait::async_trait]
impl Backend for FakeBackend {
    type Plugin = FakePlugin;
    type Controller = FakeController;

    async fn load(&self, path: &Path) -> Result<FakePlugin, LoadError> {
        if self.state.panics.lock().contains(path) {
            panic!("a bug while loading {}", path.display());
        }
        self.state.files.lock().get(path).cloned().ok_or(LoadError::NotWebAssembly)
    }
    async fn admit(&self, manifest: &Manifest, _: &PluginOptions) -> Result<(), AdmissionError> {
        if !self.state.forbidden.lock().contains(&manifest.name) {
            return Ok(());
        }
        let missing = MissingRule { group: "".into(), resource: "configmaps".into(), verb: Verb::Patch, namespace: None, name: None, why: "test".into() };
        Err(AdmissionError::Missing { plugin: manifest.name.clone(), user: format!("kubewasm-plugin-{}", manifest.name), missing: vec![missing] })
    }
    async fn start(&self, plugin: FakePlugin, stop: CancellationToken) -> Result<Arc<FakeController>, ControllerError> {
        let left = self.state.start_failures.load(Ordering::SeqCst);
        if left > 0 {
            if left != u32::MAX {
                self.state.start_failures.store(left - 1, Ordering::SeqCst);
            }
            return Err(ControllerError::SyncTimeout(Duration::ZERO, "Foo.v1.example.com is not served".into()));
        }
        Ok(Arc::new(FakeController { serving: Mutex::new(plugin), backend: self.state.clone(), stop, shadow: Mutex::default() }))
    }
    fn enables(&self, name: &str) -> bool {
        name != "disabled"
    }
    fn budget(&self) -> &MemoryBudget {
        &self.budget
    }
    fn rollout(&self) -> Policy {
        self.policy
    }
    fn leading(&self) -> bool {
        !self.state.standby.load(Ordering::SeqCst)
    }
    async fn report(&self, plugin: &str, transition: Transition, note: String) {
        self.state.reports.lock().push((plugin.into(), transition, note));
    }
    async fn publish(&self) {}
    async fn retry_later(&self, _: &Path) -> Option<Duration> {
        None
    }
}

struct Harness {
    supervisor: Arc<Supervisor<FakeBackend>>,
    state: Arc<State>,
    budget: MemoryBudget,
    dir: tempfile::TempDir,
}

impl Harness {
    fn new(budget_mib: u64, policy: Policy) -> Self {
        let state = Arc::new(State::default());
        let budget = MemoryBudget::new(budget_mib * MIB, crate::budget::Share::WHOLE, Default::default());
        let backend = Arc::new(FakeBackend { state: state.clone(), budget: budget.clone(), policy });
        let supervisor = Supervisor::with_backend(backend, None, Arc::default(), Duration::from_secs(60), CancellationToken::new());
        supervisor.scanned.store(true, Ordering::SeqCst);
        Harness { supervisor, state, budget, dir: tempfile::tempdir().unwrap() }
    }

    /// A file that loads as `plugin`.
    fn file(&self, name: &str, plugin: &FakePlugin) -> PathBuf {
        let path = self.dir.path().join(format!("{name}.wasm"));
        std::fs::write(&path, contents(plugin)).unwrap();
        self.state.files.lock().insert(path.clone(), plugin.clone());
        path
    }

    async fn apply(&self, path: &Path, name: &str) -> Result<bool, Rejection> {
        let result = self.supervisor.apply(path, name).await;
        // Let a start finish.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        result
    }

    fn running(&self, name: &str) -> Option<String> {
        match self.supervisor.state(name) {
            PluginState::Running { version, .. } => Some(version),
            _ => None,
        }
    }

    fn last_report(&self) -> (String, Transition, String) {
        self.state.reports.lock().last().cloned().expect("a report")
    }
}

fn healthy(objects: usize) -> Health {
    Health { reconciles: 1000, failing: 0, objects }
}

#[tokio::test(start_paused = true)]
async fn a_reload_reserves_beside_the_old_version_which_is_given_back_after_the_window() {
    let h = Harness::new(1000, Policy::default());
    let v1 = plugin("a", "1");
    let path = h.file("a", &v1);
    assert_eq!(h.apply(&path, "a").await, Ok(true));
    assert_eq!(h.running("a").as_deref(), Some("1"));
    assert_eq!(h.budget.reserved(), 10 * MIB);
    let v2 = plugin("a", "2");
    h.state.files.lock().insert(path.clone(), v2);
    assert_eq!(h.apply(&path, "a").await, Ok(true));
    assert_eq!(h.running("a").as_deref(), Some("2"));
    assert_eq!(h.last_report().1, Transition::Reloaded);
    assert_eq!(h.budget.reserved(), 20 * MIB, "the version on probation keeps its reservation, so a rollback always fits");
    tokio::time::sleep(rollout::DEFAULT_WINDOW + Duration::from_secs(5)).await;
    assert_eq!(h.budget.reserved(), 10 * MIB, "the window is over: only the new version's");
}

#[tokio::test(start_paused = true)]
async fn refusals_keep_the_old_version_serving_within_its_own_reservation() {
    let h = Harness::new(50, Policy { threshold: 0.0, ..Policy::default() });
    let path = h.file("a", &plugin("a", "1"));
    h.apply(&path, "a").await.unwrap();

    // RBAC refuses the new version's identity.
    h.state.forbidden.lock().insert("a".into());
    h.state.files.lock().insert(path.clone(), plugin("a", "2"));
    let refused = h.apply(&path, "a").await.unwrap_err();
    assert_eq!((refused.reason, refused.retry), (RejectReason::Forbidden, true), "{refused:?}");
    h.state.forbidden.lock().clear();

    // More than the budget has free beside the version serving.
    let mut big = plugin("a", "3");
    big.memory = 45 * MIB;
    h.state.files.lock().insert(path.clone(), big);
    let refused = h.apply(&path, "a").await.unwrap_err();
    assert_eq!(refused.reason, RejectReason::OverBudget, "{refused:?}");
    assert!(refused.why.contains("--plugin-memory-budget"), "{}", refused.why);

    // A swap that fails to sync.
    h.state.swap_fails.store(true, Ordering::SeqCst);
    h.state.files.lock().insert(path.clone(), plugin("a", "4"));
    let refused = h.apply(&path, "a").await.unwrap_err();
    assert_eq!((refused.reason, refused.retry), (RejectReason::SyncFailed, true));

    assert_eq!(h.running("a").as_deref(), Some("1"));
    assert_eq!(h.budget.reserved(), 10 * MIB, "nothing re-reserved by hand, nothing leaked");
    assert!(h.state.swaps.lock().is_empty());
    assert_eq!(h.last_report().1, Transition::Rejected);

    // The module must declare the name its source expects.
    h.state.swap_fails.store(false, Ordering::SeqCst);
    h.state.files.lock().insert(path.clone(), plugin("b", "1"));
    assert_eq!(h.apply(&path, "a").await.unwrap_err().reason, RejectReason::NameMismatch);
}

#[tokio::test(start_paused = true)]
async fn a_clearly_worse_version_is_rolled_back_and_refused_until_it_changes() {
    let h = Harness::new(1000, Policy::default());
    let (v1, v2) = (plugin("a", "1"), plugin("a", "2"));
    h.state.health.lock().insert(v1.digest, healthy(10));
    h.state.health.lock().insert(v2.digest, Health { reconciles: 40, failing: 8, objects: 10 });
    let path = h.file("a", &v1);
    h.apply(&path, "a").await.unwrap();
    h.state.files.lock().insert(path.clone(), v2.clone());
    h.apply(&path, "a").await.unwrap();
    assert_eq!(h.budget.reserved(), 20 * MIB);

    tokio::time::sleep(rollout::CHECK_EVERY * 3).await;
    assert_eq!(h.running("a").as_deref(), Some("1"), "rolled back");
    let (_, transition, note) = h.last_report();
    assert_eq!(transition, Transition::RolledBack, "{note}");
    assert!(note.contains("failed on 8 of 10 objects"), "{note}");
    assert_eq!(h.budget.reserved(), 10 * MIB, "the bad version's reservation went with it");
    assert_eq!(h.supervisor.rolled_back(&path), Some(v2.digest.to_string()));

    // The same content again is refused; changed content loads.
    let refused = h.apply(&path, "a").await.unwrap_err();
    assert_eq!(refused.reason, RejectReason::RolledBack);
    let mut fixed = v2.clone();
    fixed.settings = r#"{"fixed": true}"#.into();
    h.state.health.lock().insert(v2.digest, healthy(10));
    h.state.files.lock().insert(path.clone(), fixed);
    h.apply(&path, "a").await.unwrap();
    assert_eq!(h.running("a").as_deref(), Some("2"));
    assert_eq!(h.supervisor.rolled_back(&path), None);
}

#[tokio::test(start_paused = true)]
async fn a_standby_judges_a_new_version_only_once_it_leads() {
    let h = Harness::new(1000, Policy::default());
    let (v1, v2) = (plugin("a", "1"), plugin("a", "2"));
    h.state.health.lock().insert(v1.digest, healthy(10));
    h.state.health.lock().insert(v2.digest, healthy(10));
    h.state.standby.store(true, Ordering::SeqCst);
    let path = h.file("a", &v1);
    h.apply(&path, "a").await.unwrap();
    h.state.files.lock().insert(path.clone(), v2.clone());
    h.apply(&path, "a").await.unwrap();
    tokio::time::sleep(rollout::DEFAULT_WINDOW * 2).await;
    assert_eq!(h.budget.reserved(), 20 * MIB, "still on probation: a standby reconciles nothing to judge by");
    // It leads, and the new version turns bad.
    h.state.standby.store(false, Ordering::SeqCst);
    h.state.health.lock().insert(v2.digest, Health { reconciles: 40, failing: 9, objects: 10 });
    tokio::time::sleep(rollout::CHECK_EVERY * 3).await;
    assert_eq!(h.running("a").as_deref(), Some("1"));
}

#[tokio::test(start_paused = true)]
async fn a_candidate_that_agrees_is_promoted_by_renaming_and_its_reload_ends_the_shadow_run() {
    let h = Harness::new(1000, Policy { promote_after: 3, ..Policy::default() });
    let (v1, v2) = (plugin("a", "1"), plugin("a", "2"));
    let live = h.file("a", &v1);
    h.supervisor.load(&live, None, true, false, None).await.unwrap();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let candidate = h.file("a.next", &v2);
    assert_eq!(h.supervisor.load(&candidate, None, true, false, None).await, Ok(Accepted::Runs(v2.digest)));
    assert_eq!(h.last_report().1, Transition::Candidate);
    assert_eq!(h.budget.reserved(), 20 * MIB, "the live version's and the candidate's");
    assert_eq!(h.supervisor.promote_after("a"), 3);

    // Not enough agreement yet: nothing moves.
    tokio::time::sleep(rollout::CHECK_EVERY * 3).await;
    assert!(candidate.exists());
    // Agreed three times: the candidate's file is renamed over the live one.
    let controller = h.supervisor.find("a", |v| v.phase.controller().cloned()).flatten().unwrap();
    controller.shadow.lock().as_mut().unwrap().counts.insert(Agreement::Same, 3);
    tokio::time::sleep(rollout::CHECK_EVERY * 3).await;
    assert!(!candidate.exists(), "renamed over the live file");
    assert_eq!(std::fs::read_to_string(&live).unwrap(), contents(&v2));

    // The directory's watcher would see both changes; the candidate's removal is not an end of
    // its shadow run, the live file's reload is its promotion.
    h.state.files.lock().insert(live.clone(), v2.clone());
    h.supervisor.remove(&candidate).await;
    assert_eq!(h.last_report().1, Transition::Candidate, "no CandidateRemoved for a promotion");
    h.supervisor.load(&live, None, true, false, None).await.unwrap();
    let (_, transition, note) = h.last_report();
    assert_eq!(transition, Transition::Promoted, "{note}");
    assert_eq!(h.running("a").as_deref(), Some("2"));
    assert!(controller.shadow_report().is_none(), "the shadow run ended");
    assert_eq!(h.budget.reserved(), 20 * MIB, "the promoted version's, and the previous one's on probation; no candidate's");
}

#[tokio::test(start_paused = true)]
async fn a_candidate_needs_its_live_version_running_and_going_gives_its_reservation_back() {
    let h = Harness::new(1000, Policy::default());
    let candidate = h.file("a.next", &plugin("a", "2"));
    let refused = h.supervisor.load(&candidate, None, true, false, None).await.unwrap_err();
    assert_eq!((refused.reason, refused.retry), (RejectReason::NotRunning, true));
    let live = h.file("a", &plugin("a", "1"));
    h.supervisor.load(&live, None, true, false, None).await.unwrap();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    h.supervisor.load(&candidate, None, true, false, None).await.unwrap();
    assert_eq!(h.budget.reserved(), 20 * MIB);
    std::fs::remove_file(&candidate).unwrap();
    h.supervisor.remove(&candidate).await;
    assert_eq!(h.last_report().1, Transition::CandidateRemoved);
    assert_eq!(h.budget.reserved(), 10 * MIB);
    h.supervisor.remove(&live).await;
    assert_eq!(h.last_report().1, Transition::Unloaded);
    assert_eq!(h.budget.reserved(), 0);
    assert_eq!(h.supervisor.state("a"), PluginState::Stopped { error: None });
}

#[tokio::test(start_paused = true)]
async fn names_and_finalizers_belong_to_one_plugin_across_slots() {
    let h = Harness::new(1000, Policy::default());
    let mut a = plugin("a", "1");
    a.manifest.finalizer = Some("example.com/cleanup".into());
    let first = h.file("a", &a);
    h.apply(&first, "a").await.unwrap();
    let second = h.file("copy", &plugin("a", "1"));
    let taken = h.supervisor.load(&second, None, true, false, None).await.unwrap_err();
    assert_eq!((taken.reason, taken.retry), (RejectReason::NameTaken, true), "{taken:?}");
    let mut b = plugin("b", "1");
    b.manifest.finalizer = Some("example.com/cleanup".into());
    let third = h.file("b", &b);
    let taken = h.apply(&third, "b").await.unwrap_err();
    assert!(taken.why.contains("finalizer"), "{}", taken.why);
    // Once `a` goes, both are free.
    h.supervisor.remove(&first).await;
    assert_eq!(h.apply(&third, "b").await, Ok(true));
    assert_eq!(h.supervisor.load(&second, None, true, false, None).await, Ok(Accepted::Runs(plugin("a", "1").digest)));
}

#[tokio::test(start_paused = true)]
async fn a_plugin_waiting_for_its_resource_does_not_hold_readiness_but_is_listed() {
    let h = Harness::new(1000, Policy::default());
    h.state.start_failures.store(u32::MAX, Ordering::SeqCst);
    let path = h.file("crd", &plugin("crd", "1"));
    assert_eq!(h.apply(&path, "crd").await, Ok(true));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(h.supervisor.state("crd"), PluginState::Starting);
    assert_eq!(h.supervisor.readiness(), Ok(()), "one team's missing CRD keeps no replica NotReady");
    assert!(h.supervisor.listing()["crd"].starts_with("state=starting"), "{:?}", h.supervisor.listing());
    // Its CRD installed: it runs.
    h.state.start_failures.store(0, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(h.running("crd").as_deref(), Some("1"));
    assert!(h.supervisor.listing()["crd"].starts_with("version=1"));
}

#[tokio::test(start_paused = true)]
async fn a_first_sync_that_fails_gives_the_name_and_the_memory_back() {
    let h = Harness::new(1000, Policy::default());
    h.state.sync_fails.store(true, Ordering::SeqCst);
    let path = h.file("a", &plugin("a", "1"));
    h.apply(&path, "a").await.unwrap();
    let (_, transition, note) = h.last_report();
    assert_eq!(transition, Transition::Rejected, "{note}");
    assert!(note.contains("did not sync"), "{note}");
    assert!(matches!(h.supervisor.state("a"), PluginState::Stopped { error: Some(_) }));
    assert_eq!(h.budget.reserved(), 0);
    h.state.sync_fails.store(false, Ordering::SeqCst);
    let other = h.file("other", &plugin("a", "1"));
    assert_eq!(h.supervisor.load(&other, None, true, false, None).await, Ok(Accepted::Runs(plugin("a", "1").digest)), "the name is free again");
}

#[tokio::test(start_paused = true)]
async fn a_step_that_fails_does_not_take_the_slot_with_it() {
    let h = Harness::new(1000, Policy::default());
    let path = h.file("a", &plugin("a", "1"));
    h.state.panics.lock().insert(path.clone());
    let lost = h.apply(&path, "a").await.unwrap_err();
    assert!(lost.why.contains("see the host log"), "{}", lost.why);
    h.state.panics.lock().clear();
    assert_eq!(h.apply(&path, "a").await, Ok(true));
    assert_eq!(h.running("a").as_deref(), Some("1"));
}

#[tokio::test(start_paused = true)]
async fn a_disabled_plugin_takes_nothing() {
    let h = Harness::new(1000, Policy::default());
    let path = h.file("disabled", &plugin("disabled", "1"));
    assert_eq!(h.apply(&path, "disabled").await, Ok(false));
    assert_eq!(h.budget.reserved(), 0);
}

#[tokio::test(start_paused = true)]
async fn two_changes_of_one_file_queued_behind_a_load_reload_it_once() {
    let h = Harness::new(1000, Policy::default());
    let path = h.file("a", &plugin("a", "1"));
    let content = files::read_content(&path).await.unwrap();
    h.supervisor.load(&path, None, true, false, Some(content.clone())).await.unwrap();
    h.file("a", &plugin("a", "2"));
    let content = files::read_content(&path).await.unwrap();
    let (first, second) =
        tokio::join!(h.supervisor.load(&path, None, true, false, Some(content.clone())), h.supervisor.load(&path, None, true, false, Some(content.clone())));
    assert_eq!(first, second);
    let transitions: Vec<Transition> = h.state.reports.lock().iter().map(|r| r.1).collect();
    assert_eq!(transitions, [Transition::Loaded, Transition::Reloaded], "the second is what already runs");
}

#[test]
fn a_half_written_file_looks_incomplete_whichever_process_compiled_it() {
    use crate::plugin::LoadError;
    use crate::plugin::compiler::CompileError;
    let truncated = "failed to parse WebAssembly module: wasm component contains an invalid module section: section range 2777..874704 is out of bounds";
    assert!(super::slot::looks_incomplete(&LoadError::Compile(CompileError::Failed(truncated.into()))));
    assert!(super::slot::looks_incomplete(&LoadError::Runtime(crate::runtime::RuntimeError::Compile(truncated.into()))));
    assert!(!super::slot::looks_incomplete(&LoadError::Compile(CompileError::Failed("type mismatch: expected i32".into()))));
    assert!(!super::slot::looks_incomplete(&LoadError::Compile(CompileError::Memory(1 << 30))));
}
