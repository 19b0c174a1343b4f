//! The plugins' controllers: starts a controller for each `NAME.wasm` of the plugin directory,
//! and — with hot reload on — swaps, starts and stops them as files are replaced, added and
//! removed, without restarting the host or losing an event. Other sources of plugins (Plugin
//! resources) hand over files with [`Supervisor::apply`] and [`Supervisor::remove`] and follow
//! them with [`Supervisor::state`]; the same rules hold for them.
//!
//! [`files`] says what changed in the directory; [`registry`] keeps the plugins by name
//! (starting or running); [`status`] tells about them. Each file is looked at by its own task,
//! one at a time per file and without any lock held across a load or a sync, so a slow plugin
//! never holds up the others. A new version is compiled and described off the reconcile path,
//! admitted (its identity's RBAC, the memory budget, a name and finalizer of its own), then
//! swapped in ([`Controller::swap`], bounded by the sync timeout); a refused one is rejected
//! while the old version keeps serving, and refusals that may pass (RBAC applied later, memory
//! freed, a name given up) are looked at again after a growing delay. A version swapped in is
//! watched for a while, the one it replaced kept at hand: if it fails on clearly more objects
//! ([`rollout`]), the previous version is swapped back, and the rolled-back content is not loaded
//! again from that file until it changes. A candidate file (`NAME.next.wasm`) is admitted the
//! same way and run in the shadow of its plugin (`Controller::shadow_with`); it is promoted by
//! renaming it over the live file — by hand, or here once it has agreed long enough — and the
//! live file's reload does the rest. Every load, reload, rejection, rollback, shadow run,
//! promotion and unload is logged, counted and recorded as an Event on the status ConfigMap.

pub mod files;
pub mod registry;
pub mod rollout;
pub mod status;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use files::{Change, Files, INCOMPLETE_GRACE, read_content, stem};
pub use files::{ControllerFilter, plugin_files};
use registry::{Registry, Slot};
use status::{Outcome, StatusPublisher};

use crate::controller::{Agreement, Controller, ControllerError, Environment, Health, Version};
use crate::events::ObjectEvent;
use crate::plugin::{Digest, LoadError, LoadedPlugin, Loader, PluginOptions, candidate_for};
use crate::runtime::MemoryBudget;

pub use files::DirError;
pub use status::StatusObject;

/// How often the status listing is compared with what runs, for changes no load makes.
const STATUS_REFRESH: Duration = Duration::from_secs(5);
/// Quarantined objects named in a plugin's status entry (all are counted).
const QUARANTINE_LISTED: usize = 10;
/// How often a version in its rollback window is judged.
const ROLLBACK_CHECK: Duration = Duration::from_secs(1);

/// Why a file does not run.
#[derive(Debug, Clone)]
pub struct Rejection {
    /// The plugin (or, unknown, the file's stem).
    pub plugin: String,
    /// What refused it, as a condition reason: `Rejected` (the file), `NameMismatch`,
    /// `NameTaken`, `Forbidden` (RBAC), `OverBudget` (memory), `SyncFailed` or `RolledBack` (the
    /// content was rolled back and has not changed since).
    pub reason: &'static str,
    pub why: String,
    /// Whether it may pass without the file changing: look again later.
    pub retry: bool,
}

/// Where a plugin stands, for a source that handed it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginState {
    /// Serving with synced caches.
    Running { version: String, digest: String },
    /// Waiting for a resource to be served or for its caches to sync.
    Starting,
    /// Not running; why, if it was refused or failed to start.
    Stopped { error: Option<String> },
}

pub struct Supervisor {
    env: Arc<Environment>,
    loader: Loader,
    filter: ControllerFilter,
    /// The plugin directory, if plugins come from one.
    dir: Option<PathBuf>,
    status: Arc<StatusPublisher>,
    budget: MemoryBudget,
    shutdown: CancellationToken,
    files: tokio::sync::Mutex<Files>,
    registry: Arc<Registry>,
    /// Plugins removed while objects still carry their finalizer: their status entries.
    removed: Arc<Mutex<BTreeMap<String, String>>>,
    /// One look at a file at a time.
    examining: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
    /// Files read and loaded at once, one per core: fifty plugins starting together would
    /// otherwise each hold their whole module in memory while they queue for the compiler.
    loading: tokio::sync::Semaphore,
    /// Set once the first scan of the directory has loaded (or rejected) every file in it.
    scanned: AtomicBool,
    /// The last refusal of each plugin not running, for [`Supervisor::state`].
    refused: Arc<Mutex<HashMap<String, String>>>,
    rollback: rollout::Policy,
    /// What was rolled back from each file: refused until the file changes.
    rolled_back: Mutex<HashMap<PathBuf, RolledBack>>,
}

/// Content of a file that was rolled back: its module, settings and options.
#[derive(PartialEq)]
struct RolledBack {
    digest: Digest,
    settings: String,
    options: PluginOptions,
}

impl RolledBack {
    fn of(plugin: &LoadedPlugin) -> Self {
        RolledBack { digest: plugin.digest, settings: plugin.settings.clone(), options: plugin.options.clone() }
    }
}

/// A version just swapped in, on watch, and what to swap back to.
struct Promotion {
    name: String,
    path: PathBuf,
    /// The version judged; gone (or another one serving) ends the watch.
    version: std::sync::Weak<Version>,
    previous: LoadedPlugin,
    /// How the previous version did over its life.
    baseline: Health,
    policy: rollout::Policy,
}

impl Supervisor {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        env: Arc<Environment>,
        loader: Loader,
        filter: ControllerFilter,
        dir: Option<PathBuf>,
        status: Arc<StatusPublisher>,
        budget: MemoryBudget,
        rollback: rollout::Policy,
        shutdown: CancellationToken,
    ) -> Arc<Self> {
        Arc::new(Supervisor {
            env,
            loader,
            filter,
            dir,
            status,
            budget,
            shutdown,
            files: Default::default(),
            registry: Default::default(),
            removed: Default::default(),
            examining: Default::default(),
            loading: tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(2, usize::from)),
            scanned: Default::default(),
            refused: Default::default(),
            rollback,
            rolled_back: Default::default(),
        })
    }

    /// `Ok` when every plugin runs with synced caches; else which do not.
    pub fn readiness(&self) -> Result<(), String> {
        if !self.scanned.load(Ordering::SeqCst) {
            return Err("not ready: loading the plugin directory".into());
        }
        let waiting = self.registry.waiting();
        if waiting.is_empty() { Ok(()) } else { Err(format!("not ready: {}", waiting.join(", "))) }
    }

    pub fn controllers(&self) -> Vec<Arc<Controller>> {
        self.registry.running().into_iter().map(|(c, _)| c).collect()
    }

    /// Loads the directory, then (with `watch`) follows it until shutdown; keeps the status
    /// listing current meanwhile.
    pub async fn run(self: Arc<Self>, watch: bool) -> Result<(), DirError> {
        tokio::spawn(self.clone().refresh_status());
        let Some(dir) = self.dir.clone() else {
            self.scanned.store(true, Ordering::SeqCst);
            return Ok(());
        };
        plugin_files(&dir)?;
        let first = self.clone().scan(&dir, &HashSet::new(), true).await;
        for task in first {
            let _ = task.await;
        }
        self.scanned.store(true, Ordering::SeqCst);
        if self.registry.is_empty() {
            tracing::warn!(dir = %dir.display(), "no plugin is running");
        }
        let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel();
        let watcher = watch.then(|| {
            use notify::Watcher;
            let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if let Ok(event) = event
                    && files::changes_something(&event)
                {
                    let _ = events_tx.send(event);
                }
            });
            if let Ok(w) = watcher.as_mut()
                && let Err(e) = w.watch(&dir, notify::RecursiveMode::NonRecursive)
            {
                tracing::warn!(dir = %dir.display(), "cannot watch the plugin directory, polling: {e}");
            }
            tracing::info!(dir = %dir.display(), "watching for plugin changes");
            watcher
        });
        let supervisor = self.clone();
        // Without hot reload the directory is still looked at again for retries (RBAC applied
        // later, say), but changed files are not reloaded.
        tokio::spawn(async move {
            let _watcher = watcher;
            loop {
                let mut complete = HashSet::new();
                tokio::select! {
                    _ = supervisor.shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                    Some(event) = events.recv() => {
                        files::done_writing(&event, &mut complete);
                        // Take whatever else arrived with it, then scan once.
                        while let Ok(event) = events.try_recv() {
                            files::done_writing(&event, &mut complete);
                        }
                    }
                }
                if watch {
                    supervisor.clone().scan(&dir, &complete, false).await;
                } else {
                    supervisor.clone().retry_only(&dir).await;
                }
            }
        });
        Ok(())
    }

    /// Compares the directory with what runs and starts a task for each difference.
    async fn scan(self: Arc<Self>, dir: &Path, complete: &HashSet<PathBuf>, startup: bool) -> Vec<tokio::task::JoinHandle<()>> {
        let changes = match self.files.lock().await.scan(dir, complete, startup).await {
            Ok(changes) => changes,
            Err(e) => {
                tracing::warn!("{e}");
                return Vec::new();
            }
        };
        let mut tasks = Vec::new();
        for change in changes {
            match change {
                Change::Ready(path) => tasks.push(tokio::spawn(self.clone().examine(path))),
                Change::Renamed { from, to } => {
                    if let Some(name) = self.registry.rename(&from, &to) {
                        tracing::info!(plugin = %name, from = %from.display(), to = %to.display(), "renamed: same content, nothing to reload");
                    }
                }
                Change::Removed(path) => tasks.push(tokio::spawn(self.clone().unload(path))),
            }
        }
        tasks
    }

    /// Without hot reload: only the files due for a retry.
    async fn retry_only(self: Arc<Self>, dir: &Path) {
        let changes = self.files.lock().await.scan(dir, &HashSet::new(), false).await.unwrap_or_default();
        for change in changes {
            if let Change::Ready(path) = change
                && self.files.lock().await.loaded(&path).is_none()
            {
                tokio::spawn(self.clone().examine(path));
            }
        }
    }

    fn examining(&self, path: &Path) -> Arc<tokio::sync::Mutex<()>> {
        self.examining.lock().entry(path.to_path_buf()).or_default().clone()
    }

    /// Looks at one settled file: loads it and installs it, or rejects it.
    async fn examine(self: Arc<Self>, path: PathBuf) {
        let guard = self.examining(&path);
        let _one_at_a_time = guard.lock().await;
        let loading = self.loading.acquire().await.expect("never closed");
        let content = match read_content(&path).await {
            Ok(content) => content,
            Err(e) => {
                tracing::debug!(file = %path.display(), "cannot read yet: {e}");
                return;
            }
        };
        if self.files.lock().await.loaded(&path) == Some(&content) {
            tracing::debug!(file = %path.display(), "rewritten with the same content: nothing to reload");
            return;
        }
        let started = Instant::now();
        let loaded = self.loader.load(&path).await;
        drop(loading);
        crate::plugin::release_freed_memory();
        let result = match loaded {
            Ok(plugin) => {
                // What was loaded, which a writer still at work may have changed since
                // `read_content` looked: remembering that read instead would load it again.
                let loaded = (plugin.digest, content.1);
                let installed = match candidate_for(&path) {
                    Some(live) => self.shadow(&path, &live, plugin, started, true).await,
                    None => self.install(&path, plugin, None, started).await,
                };
                installed.map(|running| running.then_some(loaded))
            }
            Err(e) if looks_incomplete(&e) && self.files.lock().await.since(&path).is_some_and(|since| since.elapsed() < INCOMPLETE_GRACE) => {
                tracing::debug!(file = %path.display(), "not a complete component yet, waiting: {e}");
                self.files.lock().await.unhandle(&path);
                return;
            }
            Err(e) => Err(Rejection { plugin: stem(&path), reason: "Rejected", why: load_error(&path, &e), retry: false }),
        };
        let mut files = self.files.lock().await;
        match result {
            Ok(loaded) => files.set_loaded(&path, loaded),
            Err(rejection) => {
                let again = if rejection.retry { files.retry_later(&path) } else { None };
                drop(files);
                let mut note = format!("rejected {}: {} ({} ms)", path.display(), rejection.why, started.elapsed().as_millis());
                if let Some(after) = again {
                    note.push_str(&format!("; trying again in {after:?}"));
                }
                self.report(&rejection.plugin, Outcome::Rejected, note).await;
            }
        }
    }

    /// Loads a file handed over by another source and admits, starts or swaps it, as for a file
    /// of the directory; the plugin must declare `name`. `Ok(true)` when it runs or starts,
    /// `Ok(false)` when `--controllers` disables it. A refusal is reported like any other and the
    /// version running before keeps serving; nothing retries it here — the source decides when
    /// to hand it over again.
    pub async fn apply(self: &Arc<Self>, path: &Path, name: &str) -> Result<bool, Rejection> {
        let guard = self.examining(path);
        let _one_at_a_time = guard.lock().await;
        let started = Instant::now();
        let loaded = {
            let _loading = self.loading.acquire().await.expect("never closed");
            self.loader.load(path).await
        };
        crate::plugin::release_freed_memory();
        let result = match (loaded, candidate_for(path)) {
            // A candidate handed over is promoted by its source, not by renaming its file.
            (Ok(plugin), Some(live)) => self.shadow(path, &live, plugin, started, false).await,
            (Ok(plugin), None) => self.install(path, plugin, Some(name), started).await,
            (Err(e), _) => Err(Rejection { plugin: name.into(), reason: "Rejected", why: load_error(path, &e), retry: false }),
        };
        if let Err(rejection) = &result {
            let note = format!("rejected {}: {} ({} ms)", path.display(), rejection.why, started.elapsed().as_millis());
            self.report(name, Outcome::Rejected, note).await;
        }
        result
    }

    /// Stops the plugin a source handed over at `path`, as if its file were removed.
    pub async fn remove(self: &Arc<Self>, path: &Path) {
        self.clone().unload(path.to_path_buf()).await;
    }

    /// Where the plugin `name` stands.
    pub fn state(&self, name: &str) -> PluginState {
        match self.registry.controller(name) {
            Some(controller) if controller.is_synced() => {
                let version = controller.version();
                PluginState::Running { version: version.manifest.version.clone(), digest: format!("sha256:{}", version.plugin.digest) }
            }
            Some(_) => PluginState::Starting,
            None if self.registry.waiting().iter().any(|w| w == name) => PluginState::Starting,
            None => PluginState::Stopped { error: self.refused.lock().get(name).cloned() },
        }
    }

    /// The digest of what was rolled back from `path`, while that content is refused.
    pub fn rolled_back(&self, path: &Path) -> Option<String> {
        self.rolled_back.lock().get(path).map(|r| r.digest.to_string())
    }

    /// How the shadow run of the plugin `name`'s candidate compares so far, if one runs.
    pub fn shadow_report(&self, name: &str) -> Option<crate::controller::ShadowReport> {
        self.registry.controller(name)?.shadow_report()
    }

    /// The agreeing reconciles that make the plugin `name`'s candidate promotable (its options,
    /// else `--promote-after`); 0 when none runs or never.
    pub fn promote_after(&self, name: &str) -> u64 {
        let candidate = self.registry.controller(name).and_then(|c| c.candidate());
        candidate.map_or(0, |c| self.rollback.for_plugin(&c.plugin.options).promote_after)
    }

    /// Admits and starts, swaps or restarts the controller for a loaded plugin. `Ok(true)` when
    /// it runs (or is starting), `Ok(false)` when it is disabled. With `expected`, the plugin
    /// must declare that name.
    async fn install(self: &Arc<Self>, path: &Path, plugin: LoadedPlugin, expected: Option<&str>, started: Instant) -> Result<bool, Rejection> {
        let manifest = plugin.described.manifest.clone();
        let name = manifest.name.clone();
        let reject = |reason: &'static str, why: String, retry: bool| Rejection { plugin: name.clone(), reason, why, retry };
        if let Some(expected) = expected.filter(|e| *e != name) {
            let why = format!("the module declares the plugin name {name:?}, not {expected:?}: name the Plugin after the plugin");
            return Err(Rejection { plugin: expected.into(), reason: "NameMismatch", why, retry: false });
        }
        if self.rolled_back.lock().get(path).is_some_and(|r| *r == RolledBack::of(&plugin)) {
            let why = format!(
                "{name} {} (sha256:{}) was rolled back; it is not loaded again until the module or its settings change",
                manifest.version, plugin.digest
            );
            return Err(reject("RolledBack", why, false));
        }
        if !self.filter.enables(&name) {
            tracing::info!(plugin = %name, file = %path.display(), "disabled by --controllers");
            return Ok(false);
        }
        self.registry.check(&name, path, manifest.finalizer.as_deref()).map_err(|e| reject("NameTaken", e.to_string(), true))?;
        self.env.identities.admit(&manifest).await.map_err(|e| reject("Forbidden", e.to_string(), true))?;
        let workers = plugin.options.max_concurrency.unwrap_or(manifest.max_concurrency);
        self.budget.reserve(&name, plugin.described.limits.memory_bytes, workers).map_err(|e| reject("OverBudget", e.to_string(), true))?;
        // The file may have held another plugin before: that one goes.
        if let Some(old) = self.registry.name_at(path).filter(|n| *n != name) {
            self.stop(&old).await;
        }
        let (version, digest) = (manifest.version.clone(), plugin.digest);
        match self.registry.controller(&name) {
            Some(controller) if controller.version().manifest.primary == manifest.primary => {
                let before = controller.version();
                let baseline = before.health();
                match controller.swap(plugin).await {
                    Ok(swapped) => {
                        self.rolled_back.lock().remove(path);
                        // The candidate that ran in the shadow is live now: its run is over.
                        let promoted = controller.candidate().is_some_and(|c| c.plugin.digest == digest);
                        let report = if promoted { controller.end_shadow() } else { None };
                        if promoted {
                            self.budget.release(&candidate_budget(&name));
                        }
                        let (outcome, verb) = if promoted { (Outcome::Promoted, "promoted") } else { (Outcome::Reloaded, "reloaded") };
                        let mut note = format!("{verb} {name} {version} (sha256:{digest}) in {} ms", started.elapsed().as_millis());
                        if let Some(report) = report {
                            note.push_str(&format!(" after a shadow run of {}", report.summary()));
                        }
                        self.report(&name, outcome, note).await;
                        let policy = self.rollback.for_plugin(&swapped.plugin.options);
                        if !policy.is_off() {
                            let promotion = Promotion {
                                name: name.clone(),
                                path: path.to_path_buf(),
                                version: Arc::downgrade(&swapped),
                                previous: before.plugin.clone(),
                                baseline,
                                policy,
                            };
                            tokio::spawn(self.clone().watch(promotion));
                        }
                        Ok(true)
                    }
                    Err(e) => {
                        // The old version keeps serving with what it had reserved.
                        let workers = before.plugin.options.max_concurrency.unwrap_or(before.manifest.max_concurrency);
                        let _ = self.budget.reserve(&name, before.plugin.described.limits.memory_bytes, workers);
                        let sync = matches!(e, ControllerError::SyncTimeout(..));
                        Err(reject(if sync { "SyncFailed" } else { "Rejected" }, e.to_string(), sync))
                    }
                }
            }
            _ => {
                // Not running, starting, or running with another primary resource (a new queue):
                // this version takes the name, whatever held it stops, then this version starts.
                self.start(path, plugin).await.map_err(|e| reject("NameTaken", e.to_string(), true))?;
                self.rolled_back.lock().remove(path);
                let note = format!("loaded {name} {version} (sha256:{digest}) in {} ms", started.elapsed().as_millis());
                self.report(&name, Outcome::Loaded, note).await;
                Ok(true)
            }
        }
    }

    /// Runs a candidate file (`NAME.next.wasm`) in the shadow of the live plugin of `live`,
    /// admitted as a new version would be (its identity's RBAC, the memory budget — one worker's
    /// worth); a candidate before it ends. `Ok(true)` when it runs.
    async fn shadow(self: &Arc<Self>, path: &Path, live: &Path, plugin: LoadedPlugin, started: Instant, promote_files: bool) -> Result<bool, Rejection> {
        let manifest = plugin.described.manifest.clone();
        let name = manifest.name.clone();
        let reject = |reason: &'static str, why: String, retry: bool| Rejection { plugin: name.clone(), reason, why, retry };
        let running = self.registry.name_at(live).and_then(|n| self.registry.controller(&n).filter(|c| c.is_synced()));
        let Some(controller) = running else {
            return Err(reject("NotRunning", format!("{} is a candidate for {}, which does not run (yet)", path.display(), live.display()), true));
        };
        if controller.name() != name {
            let why = format!("the candidate declares the plugin name {name:?}, but {} runs {:?}", live.display(), controller.name());
            return Err(reject("NameMismatch", why, false));
        }
        if controller.version().manifest.primary != manifest.primary {
            let why = format!(
                "the candidate's primary is {}, the live version's {}: a new primary is a new controller, load it as one",
                manifest.primary,
                controller.version().manifest.primary
            );
            return Err(reject("Rejected", why, false));
        }
        self.env.identities.admit(&manifest).await.map_err(|e| reject("Forbidden", e.to_string(), true))?;
        self.budget.reserve(&candidate_budget(&name), plugin.described.limits.memory_bytes, 1).map_err(|e| reject("OverBudget", e.to_string(), true))?;
        let (version, digest) = (manifest.version.clone(), plugin.digest);
        let policy = self.rollback.for_plugin(&plugin.options);
        match controller.shadow_with(plugin).await {
            Ok(candidate) => {
                let live_version = controller.version().manifest.version.clone();
                let mut note = format!(
                    "shadowing {name} {live_version} with the candidate {version} (sha256:{digest}) from {} in {} ms",
                    path.display(),
                    started.elapsed().as_millis()
                );
                if policy.promote_after > 0 {
                    note.push_str(&format!("; promoted once it agrees on {} reconciles", policy.promote_after));
                }
                self.report(&name, Outcome::Candidate, note).await;
                if policy.promote_after > 0 && promote_files {
                    tokio::spawn(self.clone().promote_when_agreed(controller, Arc::downgrade(&candidate), live.to_path_buf(), policy.promote_after));
                }
                Ok(true)
            }
            Err(e) => {
                self.budget.release(&candidate_budget(&name));
                let sync = matches!(e, ControllerError::SyncTimeout(..));
                Err(reject(if sync { "SyncFailed" } else { "Rejected" }, e.to_string(), sync))
            }
        }
    }

    /// A candidate file went: its shadow run ends — unless it was renamed over the live file
    /// (promoted), which the live file's reload takes care of.
    async fn candidate_gone(&self, path: &Path, live: &Path) {
        let Some(controller) = self.registry.name_at(live).and_then(|n| self.registry.controller(&n)) else {
            return;
        };
        let promoted = match (controller.candidate(), read_content(live).await) {
            (Some(candidate), Ok((digest, _))) => candidate.plugin.digest == digest,
            _ => false,
        };
        if promoted {
            tracing::debug!(plugin = %controller.name(), "the candidate was renamed over {}: its reload ends the shadow run", live.display());
            return;
        }
        let Some(report) = controller.end_shadow() else {
            return;
        };
        let why = format!("{} was removed", path.display());
        let name = controller.name().to_string();
        self.budget.release(&candidate_budget(&name));
        let note = format!("ended the shadow run of {name}'s candidate {} (sha256:{}): {why}; it compared {}", report.version, report.digest, report.summary());
        self.report(&name, Outcome::CandidateRemoved, note).await;
    }

    /// Promotes the candidate once it has agreed `after` times and never otherwise, by renaming
    /// its file over the live one (the directory's watcher then loads it as a new version, and
    /// the rollback window watches it). Ends when the candidate is replaced or gone, or cannot
    /// ever qualify.
    async fn promote_when_agreed(self: Arc<Self>, controller: Arc<Controller>, candidate: std::sync::Weak<Version>, live: PathBuf, after: u64) {
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(ROLLBACK_CHECK) => {}
            }
            let current = controller.candidate();
            if !current.is_some_and(|c| std::ptr::eq(Arc::as_ptr(&c), candidate.as_ptr())) {
                return;
            }
            let Some(report) = controller.shadow_report() else {
                return;
            };
            if !report.agreed(after) {
                if [Agreement::Differs, Agreement::Error, Agreement::Fault].iter().any(|a| report.count(*a) > 0) {
                    tracing::info!(plugin = %controller.name(), "the candidate did not agree with the live version: it is left for `kubewasm rollout promote`");
                    return;
                }
                continue;
            }
            let name = controller.name().to_string();
            match crate::plugin::promote(&live) {
                Ok(()) => {
                    tracing::info!(plugin = %name, "the candidate agreed on {} reconciles: promoting it", report.count(Agreement::Same))
                }
                Err(e) => {
                    let note = format!(
                        "cannot promote {name}'s candidate {} (it agreed on {} reconciles): {e}; promote it by hand",
                        report.version,
                        report.count(Agreement::Same)
                    );
                    self.report(&name, Outcome::Rejected, note).await;
                }
            }
            return;
        }
    }

    /// Judges a version just swapped in until its window ends, and swaps the previous version
    /// back if it is clearly worse. Ends early when another version replaces it or the plugin
    /// stops. The window counts time spent leading only: a standby reconciles nothing, so it
    /// keeps the previous version at hand and judges the new one once it takes over.
    async fn watch(self: Arc<Self>, promotion: Promotion) {
        let mut judged_for = Duration::ZERO;
        let mut tick = Instant::now();
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(ROLLBACK_CHECK) => {}
            }
            let now = Instant::now();
            if self.env.leadership().is_leader() {
                judged_for += now - tick;
            }
            tick = now;
            let Some(current) = self.judged(&promotion) else { return };
            let health = current.health();
            drop(current);
            match promotion.policy.judge(&promotion.baseline, &health, judged_for) {
                rollout::Verdict::Watch => {}
                rollout::Verdict::Keep => {
                    tracing::debug!(plugin = %promotion.name, "rollback window over: the new version stays");
                    return;
                }
                rollout::Verdict::RollBack { before, after } => {
                    let why = format!(
                        "it failed on {} of {} objects ({:.0}%) after {} reconciles, the version before on {:.0}%",
                        health.failing,
                        health.objects,
                        after * 100.0,
                        health.reconciles,
                        before * 100.0
                    );
                    self.roll_back(promotion, why).await;
                    return;
                }
            }
        }
    }

    /// The version on watch, if it still serves.
    fn judged(&self, promotion: &Promotion) -> Option<Arc<Version>> {
        let current = self.registry.controller(&promotion.name)?.version();
        std::ptr::eq(Arc::as_ptr(&current), promotion.version.as_ptr()).then_some(current)
    }

    /// Swaps the previous version back in place of the one on watch, and marks what was rolled
    /// back so that the file is not loaded again until it changes.
    async fn roll_back(self: &Arc<Self>, promotion: Promotion, why: String) {
        let guard = self.examining(&promotion.path);
        let _one_at_a_time = guard.lock().await;
        let started = Instant::now();
        // Replaced while waiting for the file: that version has a window of its own.
        let (Some(bad), Some(controller)) = (self.judged(&promotion), self.registry.controller(&promotion.name)) else { return };
        let (name, previous) = (&promotion.name, promotion.previous);
        let (from, to) = (
            format!("{} (sha256:{})", bad.manifest.version, bad.plugin.digest),
            format!("{} (sha256:{})", previous.described.manifest.version, previous.digest),
        );
        let mark = RolledBack::of(&bad.plugin);
        drop(bad);
        let workers = previous.options.max_concurrency.unwrap_or(previous.described.manifest.max_concurrency);
        let memory = previous.described.limits.memory_bytes;
        match controller.swap(previous).await {
            Ok(_) => {
                // What it had reserved before the reload; it ran within it then.
                let _ = self.budget.reserve(name, memory, workers);
                self.rolled_back.lock().insert(promotion.path.clone(), mark);
                let note = format!(
                    "rolled back {name} {from} to {to} in {} ms: {why}; {} is not loaded again until it changes",
                    started.elapsed().as_millis(),
                    promotion.path.display()
                );
                self.report(name, Outcome::RolledBack, note).await;
            }
            Err(e) => tracing::warn!(plugin = %name, "cannot roll {from} back to {to}, it keeps serving: {e}"),
        }
    }

    /// Starts a controller in the background: retrying while a resource it needs is not served
    /// yet (its CRD may be installed later), then waiting for its caches to sync, within the
    /// sync timeout (else it is stopped and rejected, and looked at again later).
    async fn start(self: &Arc<Self>, path: &Path, plugin: LoadedPlugin) -> Result<(), registry::ClaimError> {
        let name = plugin.described.manifest.name.clone();
        let stop = self.shutdown.child_token();
        let generation = self.registry.generation();
        let finalizer = plugin.described.manifest.finalizer.clone();
        let slot = Slot::Starting { path: path.to_path_buf(), finalizer: finalizer.clone(), stop: stop.clone(), generation };
        // Held while what was there stops: no other file can take the name meanwhile.
        if let Some(previous) = self.registry.claim(&name, finalizer.as_deref(), slot)? {
            previous.stop().await;
        }
        self.removed.lock().remove(&name);
        let (env, registry, status, budget, refused) =
            (self.env.clone(), self.registry.clone(), self.status.clone(), self.budget.clone(), self.refused.clone());
        let path = path.to_path_buf();
        let supervisor_listing = self.listing_source();
        let supervisor = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut delay = Duration::from_secs(1);
            let controller = loop {
                match Controller::start(env.clone(), plugin.clone(), stop.child_token()).await {
                    Ok(controller) => break controller,
                    Err(e) => tracing::warn!(plugin = %name, "cannot start yet, retrying in {delay:?}: {e}"),
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(delay) => delay = (delay * 2).min(Duration::from_secs(30)),
                }
            };
            let synced = tokio::select! {
                _ = stop.cancelled() => return,
                synced = controller.first_sync() => synced,
            };
            if let Err(e) = synced {
                stop.cancel();
                controller.stopped().await;
                if registry.take(&name, Some(generation)).is_some() {
                    budget.release(&name);
                    let retry = match supervisor.upgrade() {
                        Some(supervisor) => supervisor.files.lock().await.retry_later(&path),
                        None => None,
                    };
                    let mut note = format!("rejected {}: {e}", path.display());
                    if let Some(after) = retry {
                        note.push_str(&format!("; trying again in {after:?}"));
                    }
                    refused.lock().insert(name.clone(), note.clone());
                    let uid = status.publish(supervisor_listing).await.unwrap_or(None);
                    status.record(&name, Outcome::Rejected, &note, uid);
                }
                return;
            }
            if registry.started(&name, generation, controller) {
                // It runs now: list it.
                if let Err(e) = status.publish(supervisor_listing).await {
                    tracing::warn!("cannot update the status ConfigMap: {e}");
                }
            }
        });
        Ok(())
    }

    /// Rewrites the status listing when what it shows changed without a load or an unload
    /// (objects quarantined or released), until shutdown.
    async fn refresh_status(self: Arc<Self>) {
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(STATUS_REFRESH) => {}
            }
            if let Err(e) = self.status.refresh(self.listing_source()).await {
                tracing::warn!("cannot update the status ConfigMap: {e}");
            }
        }
    }

    /// A snapshot source of the status listing, for tasks.
    fn listing_source(&self) -> impl FnOnce() -> BTreeMap<String, String> + Send + 'static {
        let registry = self.registry.clone();
        let removed = self.removed.clone();
        move || listing(&registry, &removed)
    }

    /// Stops a plugin gracefully, whatever state it is in: running reconciles finish; its queue
    /// goes, and informers no other plugin needs are released.
    async fn stop(&self, name: &str) {
        self.stop_slot(name).await;
        self.budget.release(name);
        self.budget.release(&candidate_budget(name));
    }

    async fn stop_slot(&self, name: &str) {
        if let Some(slot) = self.registry.take(name, None) {
            slot.stop().await;
        }
    }

    async fn unload(self: Arc<Self>, path: PathBuf) {
        let guard = self.examining(&path);
        let _one_at_a_time = guard.lock().await;
        let started = Instant::now();
        if let Some(live) = candidate_for(&path) {
            self.candidate_gone(&path, &live).await;
            return;
        }
        self.rolled_back.lock().remove(&path);
        let Some(name) = self.registry.name_at(&path) else { return };
        if let Some(controller) = self.registry.controller(&name) {
            self.report_leftover_finalizers(&name, &controller);
        }
        self.stop(&name).await;
        let note = format!("unloaded {name}: {} was removed ({} ms)", path.display(), started.elapsed().as_millis());
        self.report(&name, Outcome::Unloaded, note).await;
    }

    /// A plugin going away whose finalizer objects still carry: they would stay Terminating
    /// with no sign. Each gets a Warning Event, and the status ConfigMap keeps the plugin's
    /// finalizer so that `kubewasm finalizers release NAME` can take it off.
    fn report_leftover_finalizers(&self, name: &str, controller: &Controller) {
        let version = controller.version();
        let finalizers: Vec<&String> = version.manifest.finalizer.iter().chain(&version.previous_finalizers).collect();
        if finalizers.is_empty() {
            return;
        }
        let carrying: Vec<_> =
            version.primary_objects().into_iter().filter(|(_, json)| crate::controller::finalizers_of(json).iter().any(|f| finalizers.contains(&f))).collect();
        if carrying.is_empty() {
            return;
        }
        let finalizer = finalizers[0];
        tracing::warn!(plugin = name, finalizer = %finalizer, objects = carrying.len(), "removed while objects still carry its finalizer: release them with `kubewasm finalizers release {name}`");
        for (key, json) in &carrying {
            controller.events().publish(ObjectEvent {
                regarding: version.manifest.primary.clone(),
                key: key.clone(),
                uid: crate::resource::uid_of(json),
                warning: true,
                reason: "FinalizerLeftBehind".into(),
                action: "Unload".into(),
                note: format!(
                    "plugin {name} was removed; its finalizer {finalizer} keeps this object from being deleted. Run `kubewasm finalizers release {name}` to remove it"
                ),
            });
        }
        self.removed.lock().insert(name.to_string(), status::removed_entry(finalizer, &version.manifest.primary, carrying.len()));
    }

    /// Logs, counts and reports one load, reload, rejection, rollback or unload (status
    /// ConfigMap first, so the Event can name the ConfigMap's uid).
    async fn report(&self, plugin: &str, outcome: Outcome, note: String) {
        match outcome {
            Outcome::Rejected => self.refused.lock().insert(plugin.to_string(), note.clone()),
            _ => self.refused.lock().remove(plugin),
        };
        let uid = match self.status.publish(self.listing_source()).await {
            Ok(uid) => uid,
            Err(e) => {
                tracing::warn!(configmap = %format!("{}/{}", self.status.object().namespace, self.status.object().name), "cannot update the status ConfigMap: {e}");
                None
            }
        };
        self.status.record(plugin, outcome, &note, uid);
    }

    /// Stops every controller (graceful).
    pub async fn stopped(&self) {
        for (controller, _) in self.registry.running() {
            controller.stopped().await;
        }
    }
}

/// What the status ConfigMap lists: each running plugin, and plugins removed while objects
/// still carry their finalizer.
fn listing(registry: &Registry, removed: &Mutex<BTreeMap<String, String>>) -> BTreeMap<String, String> {
    let mut listing = removed.lock().clone();
    for (controller, path) in registry.running() {
        let v = controller.version();
        let mut entry = status::running_entry(&v.manifest.version, &v.plugin.digest.to_string(), &path.display().to_string(), v.manifest.finalizer.as_deref());
        entry.extend(status::quarantine_fields(&controller.quarantined(QUARANTINE_LISTED)));
        if let Some(report) = controller.shadow_report() {
            entry.push_str(&status::shadow_fields(&report));
            listing.insert(status::rollout_key(controller.name()), status::rollout_report(controller.name(), &v.manifest.version, &report));
        }
        listing.insert(controller.name().to_string(), entry);
    }
    listing
}

/// What a plugin's candidate reserves of the memory budget under.
fn candidate_budget(name: &str) -> String {
    format!("{name}.next")
}

/// A one-line reason a file could not be loaded, naming the file at fault: a bad `NAME.toml`
/// is reported as the `.toml`, not the `.wasm`.
fn load_error(path: &Path, error: &LoadError) -> String {
    match error {
        LoadError::Settings { .. } | LoadError::Options(_) => format!("{} (settings of {})", error, path.display()),
        _ => error.to_string(),
    }
}

/// A load error that a file still being written produces.
fn looks_incomplete(error: &LoadError) -> bool {
    match error {
        LoadError::Truncated(_) | LoadError::NotWebAssembly => true,
        LoadError::Runtime(crate::runtime::RuntimeError::Compile(message)) => message.contains("unexpected end") || message.contains("out of bounds"),
        _ => false,
    }
}
