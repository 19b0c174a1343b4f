//! The plugins' controllers: one [`slot::PluginSlot`] per plugin file — `NAME.wasm` of the plugin
//! directory, or the file a Plugin resource's module was written to ([`Supervisor::apply`],
//! [`Supervisor::remove`], followed with [`Supervisor::state`]) — which starts, hot-swaps and
//! stops that plugin's controller, without restarting the host or losing an event. The
//! supervisor itself only routes: "file X changed" and "file X went" go to X's slot (a candidate
//! `NAME.next.wasm` to the slot of `NAME.wasm`); what a plugin holds is its slot's alone.
//!
//! [`files`] says what changed in the directory; [`claims`] keeps names and finalizers unique
//! across slots; [`rollout`] judges a version just swapped in and a candidate in its shadow;
//! [`backend`] is what a slot works through (the loader, admission, controllers), a trait so
//! that slots are tested without a cluster; [`status`] tells about it all: every load, reload,
//! rejection, rollback, shadow run, promotion and unload is logged, counted and recorded as an
//! Event on the status ConfigMap, which lists what runs.

pub mod backend;
pub mod claims;
pub mod files;
pub mod rollout;
pub mod slot;
pub mod status;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use backend::{Backend, HostBackend, Module, Running};
use claims::Claims;
use files::{Change, Files, INCOMPLETE_GRACE, read_content};
pub use files::{ControllerFilter, plugin_files};
use slot::{Accepted, Command, Load, Phase, PluginSlot, SlotHandle};
use status::StatusPublisher;

use crate::budget::MemoryBudget;
use crate::controller::{Environment, ShadowReport};
use crate::plugin::{Loader, candidate_for};
use crate::webhook::Hooked;

pub use files::DirError;
pub use status::StatusObject;

/// How often the status listing is compared with what runs, for changes no load makes.
const STATUS_REFRESH: Duration = Duration::from_secs(5);
/// Quarantined objects named in a plugin's status entry (all are counted).
const QUARANTINE_LISTED: usize = 10;

/// Why a version was refused: the `Ready` condition's reason of a Plugin, the Event's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectReason {
    /// The file itself: not a component, a bad manifest, bad settings, a failed swap.
    Rejected,
    /// The module declares another name than its source expects.
    NameMismatch,
    /// Another file holds the name, or another plugin the finalizer.
    NameTaken,
    /// RBAC does not grant the plugin's identity what its manifest declares.
    Forbidden,
    /// The API server could not say what the plugin's identity may do.
    AdmissionFailed,
    /// Not enough of the plugin memory budget is free.
    OverBudget,
    /// Its caches did not sync within the sync timeout.
    SyncFailed,
    /// This content was rolled back and has not changed since.
    RolledBack,
    /// A candidate for a plugin that does not run.
    NotRunning,
}

impl RejectReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::Rejected => "Rejected",
            RejectReason::NameMismatch => "NameMismatch",
            RejectReason::NameTaken => "NameTaken",
            RejectReason::Forbidden => "Forbidden",
            RejectReason::AdmissionFailed => "AdmissionFailed",
            RejectReason::OverBudget => "OverBudget",
            RejectReason::SyncFailed => "SyncFailed",
            RejectReason::RolledBack => "RolledBack",
            RejectReason::NotRunning => "NotRunning",
        }
    }
}

/// Why a file does not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The plugin (or, unknown, the file's stem).
    pub plugin: String,
    pub reason: RejectReason,
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

pub struct Supervisor<B: Backend = HostBackend> {
    backend: Arc<B>,
    claims: Arc<Claims>,
    /// The slots by live file.
    slots: Mutex<BTreeMap<PathBuf, SlotHandle<B>>>,
    /// The plugin directory, if plugins come from one, and what is known of its files.
    dir: Option<PathBuf>,
    files: Arc<tokio::sync::Mutex<Files>>,
    /// Set once the first scan of the directory has loaded (or rejected) every file in it.
    scanned: AtomicBool,
    /// How long a plugin's first sync may hold up readiness.
    sync_timeout: Duration,
    shutdown: CancellationToken,
}

impl Supervisor<HostBackend> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        env: Arc<Environment>,
        loader: Loader,
        filter: ControllerFilter,
        dir: Option<PathBuf>,
        status: Arc<StatusPublisher>,
        budget: MemoryBudget,
        rollout: rollout::Policy,
        hooked: Hooked,
        shutdown: CancellationToken,
    ) -> Arc<Self> {
        let files: Arc<tokio::sync::Mutex<Files>> = Arc::default();
        let sync_timeout = env.sync_timeout;
        let backend = Arc::new(HostBackend {
            env,
            loader,
            filter,
            budget,
            rollout,
            status: status.clone(),
            files: files.clone(),
            supervisor: Default::default(),
            hooked,
        });
        let supervisor = Supervisor::with_backend(backend.clone(), dir, files, sync_timeout, shutdown);
        let _ = backend.supervisor.set(Arc::downgrade(&supervisor));
        tokio::spawn(supervisor.clone().refresh_status(status));
        supervisor
    }

    /// Rewrites the status listing when what it shows changed without a load or an unload
    /// (objects quarantined or released), until shutdown.
    async fn refresh_status(self: Arc<Self>, status: Arc<StatusPublisher>) {
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(STATUS_REFRESH) => {}
            }
            let supervisor = self.clone();
            if let Err(e) = status.refresh(move || supervisor.listing()).await {
                tracing::warn!("cannot update the status ConfigMap: {e}");
            }
        }
    }
}

impl<B: Backend> Supervisor<B> {
    fn with_backend(
        backend: Arc<B>,
        dir: Option<PathBuf>,
        files: Arc<tokio::sync::Mutex<Files>>,
        sync_timeout: Duration,
        shutdown: CancellationToken,
    ) -> Arc<Self> {
        Arc::new(Supervisor { backend, claims: Arc::default(), slots: Default::default(), dir, files, scanned: AtomicBool::new(false), sync_timeout, shutdown })
    }

    /// `Ok` once the plugin directory has been loaded and no plugin is syncing its caches for the
    /// first time (within the sync timeout). A plugin waiting for a resource that is not served
    /// (a CRD not installed yet) does not hold the host back: the status listing names it.
    pub fn readiness(&self) -> Result<(), String> {
        if !self.scanned.load(Ordering::SeqCst) {
            return Err("not ready: loading the plugin directory".into());
        }
        let syncing: Vec<String> = self
            .views(|view| match &view.phase {
                Phase::Starting { since, waiting } if waiting.lock().is_none() && since.elapsed() < self.sync_timeout => view.name.clone(),
                _ => None,
            })
            .into_iter()
            .flatten()
            .collect();
        if syncing.is_empty() { Ok(()) } else { Err(format!("not ready: {}", syncing.join(", "))) }
    }

    /// Loads the directory, then (with `watch`) follows it until shutdown.
    pub async fn run(self: Arc<Self>, watch: bool) -> Result<(), DirError> {
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
        if self.views(|view| view.phase.controller().is_some() || matches!(view.phase, Phase::Starting { .. })).iter().all(|running| !running) {
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

    /// Compares the directory with what runs and hands each difference to its slot.
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
                Change::Renamed { from, to } => self.moved(&from, &to),
                Change::Removed(path) => {
                    let supervisor = self.clone();
                    tasks.push(tokio::spawn(async move { supervisor.remove(&path).await }));
                }
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

    /// Hands one settled file of the directory to its slot, and remembers what it loaded.
    async fn examine(self: Arc<Self>, path: PathBuf) {
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
        let grace = self.files.lock().await.since(&path).is_some_and(|since| since.elapsed() < INCOMPLETE_GRACE);
        let result = self.load(&path, None, true, grace, Some(content.clone())).await;
        let mut files = self.files.lock().await;
        match result {
            // What was loaded, which a writer still at work may have changed since
            // `read_content` looked: remembering that read instead would load it again.
            Ok(Accepted::Runs(digest)) => files.set_loaded(&path, Some((digest, content.1))),
            Ok(Accepted::Disabled) => files.set_loaded(&path, None),
            Ok(Accepted::Incomplete) => files.unhandle(&path),
            // The slot reported it, and asked for a retry if it may pass.
            Err(_) => {}
        }
    }

    /// The slot of the live file `live`, made if there is none.
    fn slot(&self, live: &Path) -> SlotHandle<B> {
        let mut slots = self.slots.lock();
        slots
            .entry(live.to_path_buf())
            .or_insert_with(|| PluginSlot::spawn(self.backend.clone(), self.claims.clone(), live.to_path_buf(), self.shutdown.clone()))
            .clone()
    }

    /// Has the slot of `path` (the live file's, for a candidate) load it.
    async fn load(
        &self,
        path: &Path,
        expected: Option<&str>,
        promote_files: bool,
        grace: bool,
        content: Option<files::Content>,
    ) -> Result<Accepted, Rejection> {
        let live = candidate_for(path).unwrap_or_else(|| path.to_path_buf());
        let (reply, answer) = oneshot::channel();
        let load = Load { path: path.to_path_buf(), expected: expected.map(String::from), promote_files, grace, content, reply };
        let slot = self.slot(&live);
        let lost = || Rejection {
            plugin: expected.map(String::from).unwrap_or_else(|| files::stem(path)),
            reason: RejectReason::Rejected,
            why: "the host stopped, or failed while loading it (see the host log)".into(),
            retry: true,
        };
        if slot.commands.send(Command::Load(load)).is_err() {
            return Err(lost());
        }
        answer.await.unwrap_or_else(|_| Err(lost()))
    }

    /// Loads a file handed over by another source and admits, starts or swaps it, as for a file
    /// of the directory; the plugin must declare `name`. `Ok(true)` when it runs or starts,
    /// `Ok(false)` when `--controllers` disables it. A refusal is reported like any other and the
    /// version running before keeps serving; nothing retries it here — the source decides when
    /// to hand it over again.
    pub async fn apply(&self, path: &Path, name: &str) -> Result<bool, Rejection> {
        match self.load(path, Some(name), false, false, None).await? {
            Accepted::Runs(_) => Ok(true),
            Accepted::Disabled => Ok(false),
            Accepted::Incomplete => unreachable!("no grace for a file handed over whole"),
        }
    }

    /// Stops the plugin of `path` (or ends the shadow run of a candidate), as when its file goes.
    pub async fn remove(&self, path: &Path) {
        let live = candidate_for(path).unwrap_or_else(|| path.to_path_buf());
        let Some(slot) = self.slots.lock().get(&live).cloned() else { return };
        let (reply, done) = oneshot::channel();
        if slot.commands.send(Command::Remove { path: path.to_path_buf(), reply }).is_ok() {
            let _ = done.await;
        }
        // Gone with its file, unless it keeps objects' finalizers listed.
        if candidate_for(path).is_none() && slot.view.read().removed.is_none() {
            self.slots.lock().remove(&live);
        }
    }

    /// A live file moved, unchanged: its slot follows it.
    fn moved(&self, from: &Path, to: &Path) {
        let mut slots = self.slots.lock();
        if let Some(slot) = slots.remove(from) {
            let _ = slot.commands.send(Command::Moved { to: to.to_path_buf() });
            slots.insert(to.to_path_buf(), slot);
        }
    }

    /// Something of every slot's view.
    fn views<T>(&self, f: impl Fn(&slot::View<B::Controller>) -> T) -> Vec<T> {
        self.slots.lock().values().map(|slot| f(&slot.view.read())).collect()
    }

    /// The view of the slot of plugin `name`: the one running it, or the slot whose file is
    /// named after it (a Plugin resource's).
    fn find<T>(&self, name: &str, f: impl Fn(&slot::View<B::Controller>) -> T) -> Option<T> {
        let slots = self.slots.lock();
        let by_name = slots.values().find(|slot| slot.view.read().name.as_deref() == Some(name));
        let by_file = || slots.values().find(|slot| files::stem(&slot.view.read().path) == name);
        by_name.or_else(by_file).map(|slot| f(&slot.view.read()))
    }

    /// Where the plugin `name` stands.
    pub fn state(&self, name: &str) -> PluginState {
        self.find(name, |view| match &view.phase {
            Phase::Running(controller) if controller.is_synced() => {
                let plugin = controller.serving();
                PluginState::Running { version: plugin.manifest().version.clone(), digest: format!("sha256:{}", plugin.digest()) }
            }
            Phase::Running(_) | Phase::Starting { .. } => PluginState::Starting,
            Phase::Idle => PluginState::Stopped { error: view.rejection.clone() },
        })
        .unwrap_or(PluginState::Stopped { error: None })
    }

    /// The digest of what was rolled back from `path`, while that content is refused.
    pub fn rolled_back(&self, path: &Path) -> Option<String> {
        self.slots.lock().get(path).and_then(|slot| slot.view.read().rolled_back).map(|d| d.to_string())
    }

    /// How the shadow run of the plugin `name`'s candidate compares so far, if one runs.
    pub fn shadow_report(&self, name: &str) -> Option<ShadowReport> {
        self.find(name, |view| view.phase.controller().and_then(|c| c.shadow_report())).flatten()
    }

    /// The agreeing reconciles that make the plugin `name`'s candidate promotable (its options,
    /// else `--promote-after`); 0 when none runs or never.
    pub fn promote_after(&self, name: &str) -> u64 {
        self.find(name, |view| view.promote_after).unwrap_or(0)
    }

    /// What the status ConfigMap lists: each running plugin, each plugin starting, and plugins
    /// removed while objects still carry their finalizer (unless their name runs again).
    pub fn listing(&self) -> BTreeMap<String, String> {
        let mut listing = BTreeMap::new();
        let mut removed = Vec::new();
        for slot in self.slots.lock().values() {
            let view = slot.view.read();
            match (&view.phase, &view.name) {
                (Phase::Running(controller), _) => controller.list(&view.path, &mut listing),
                (Phase::Starting { .. }, Some(name)) => {
                    listing.insert(name.clone(), format!("state=starting file={}", view.path.display()));
                }
                (Phase::Idle, Some(name)) if view.removed.is_some() => removed.extend(view.removed.clone().map(|entry| (name.clone(), entry))),
                _ => {}
            }
        }
        for (name, entry) in removed {
            listing.entry(name).or_insert(entry);
        }
        listing
    }

    /// Waits until every controller has stopped (graceful) after shutdown.
    pub async fn stopped(&self) {
        let controllers: Vec<_> = self.views(|view| view.phase.controller().cloned()).into_iter().flatten().collect();
        for controller in controllers {
            controller.stopped().await;
        }
    }
}
