//! The plugin directory and its controllers: starts a controller for each `NAME.wasm`, and —
//! with hot reload on — swaps, starts and stops them as files are replaced, added and removed,
//! without restarting the host or losing an event.
//!
//! A file is loaded only when complete: at once when it was renamed into place or its writer
//! closed it (inotify), otherwise once its size and modification time have been stable for a
//! moment; a file that still fails to parse as a component while it was recently written is
//! taken as half-written and looked at again later. A new version is compiled and described off
//! the reconcile path, then swapped in ([`Controller::swap`]); an invalid one is rejected while
//! the old version keeps serving. Same content under a new name, or written again, reloads
//! nothing (same digest). Every load, reload, rejection and unload is logged, counted in
//! `kubewasm_plugin_reloads_total`, and recorded as an Event on the host's status ConfigMap,
//! which lists the plugins running (written by the leader only).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::controller::{Controller, Environment};
use crate::plugin::{Digest, LoadError, LoadedPlugin, Loader};
use crate::resource::{Gvk, ObjectKey};
use crate::runtime::host::{EventSink, PluginEvent};

/// How long a file's size and mtime must stay put before it is loaded (without an inotify hint
/// that its writer is done).
const SETTLE: Duration = Duration::from_millis(500);
/// A file that does not parse is taken as half-written for this long after its last change.
const INCOMPLETE_GRACE: Duration = Duration::from_secs(5);
/// The directory is rescanned this often even without filesystem events.
const RESCAN: Duration = Duration::from_secs(2);

/// The ConfigMap (namespace, name) where the host lists its plugins and records plugin Events.
#[derive(Debug, Clone)]
pub struct StatusObject {
    pub namespace: String,
    pub name: String,
}

pub struct Supervisor {
    env: Arc<Environment>,
    loader: Loader,
    filter: crate::app::ControllerFilter,
    dir: PathBuf,
    status: StatusObject,
    shutdown: CancellationToken,
    /// Scans one at a time.
    scanning: tokio::sync::Mutex<Files>,
    /// Shared with the tasks that start controllers in the background.
    plugins: Arc<Mutex<Plugins>>,
    /// Status ConfigMap writes, one at a time, each listing what runs when it is written.
    publishing: Arc<tokio::sync::Mutex<()>>,
    /// Set once the first scan of the directory has loaded (or rejected) every file in it.
    scanned: std::sync::atomic::AtomicBool,
}

/// What the supervisor knows of each file.
#[derive(Default)]
struct Files(HashMap<PathBuf, FileState>);

struct FileState {
    stamp: Stamp,
    /// When `stamp` was first seen.
    since: Instant,
    /// The stamp last acted on (loaded, rejected, or found unchanged).
    handled: Option<Stamp>,
    /// The content loaded from this file, if any.
    loaded: Option<(Digest, String)>,
}

/// Size and modification time of a plugin file and of its settings file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    wasm: (u64, Option<SystemTime>),
    settings: Option<(u64, Option<SystemTime>)>,
}

fn stamp_of(path: &Path) -> Option<Stamp> {
    let meta = |p: &Path| std::fs::metadata(p).ok().filter(|m| m.is_file()).map(|m| (m.len(), m.modified().ok()));
    Some(Stamp { wasm: meta(path)?, settings: meta(&path.with_extension("toml")) })
}

/// The plugins by name: running controllers, and plugins still starting.
#[derive(Default)]
struct Plugins {
    running: BTreeMap<String, Running>,
    starting: BTreeMap<String, CancellationToken>,
}

struct Running {
    controller: Arc<Controller>,
    stop: CancellationToken,
    path: PathBuf,
}

impl Supervisor {
    pub fn new(
        env: Arc<Environment>,
        loader: Loader,
        filter: crate::app::ControllerFilter,
        dir: PathBuf,
        status: StatusObject,
        shutdown: CancellationToken,
    ) -> Arc<Self> {
        Arc::new(Supervisor {
            env,
            loader,
            filter,
            dir,
            status,
            shutdown,
            scanning: Default::default(),
            plugins: Default::default(),
            publishing: Default::default(),
            scanned: Default::default(),
        })
    }

    /// `Ok` when every plugin runs with synced caches; else which do not.
    pub fn readiness(&self) -> Result<(), String> {
        if !self.scanned.load(std::sync::atomic::Ordering::SeqCst) {
            return Err("not ready: loading the plugin directory".into());
        }
        let plugins = self.plugins.lock();
        let waiting: Vec<&str> = plugins
            .starting
            .keys()
            .map(String::as_str)
            .chain(plugins.running.values().filter(|r| !r.controller.is_synced()).map(|r| r.controller.name()))
            .collect();
        if waiting.is_empty() { Ok(()) } else { Err(format!("not ready: {}", waiting.join(", "))) }
    }

    pub fn controllers(&self) -> Vec<Arc<Controller>> {
        self.plugins.lock().running.values().map(|r| r.controller.clone()).collect()
    }

    /// Loads the directory, then (with `watch`) follows it until shutdown.
    pub async fn run(self: Arc<Self>, watch: bool) -> Result<(), crate::app::AppError> {
        crate::app::plugin_files(&self.dir)?;
        self.scan(&HashSet::new(), true).await;
        self.scanned.store(true, std::sync::atomic::Ordering::SeqCst);
        if self.plugins.lock().running.is_empty() && self.plugins.lock().starting.is_empty() {
            tracing::warn!(dir = %self.dir.display(), "no plugin is running");
        }
        if !watch {
            return Ok(());
        }
        let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel();
        let watcher = {
            use notify::Watcher;
            let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if let Ok(event) = event
                    && changes_something(&event)
                {
                    let _ = events_tx.send(event);
                }
            });
            if let Ok(w) = watcher.as_mut()
                && let Err(e) = w.watch(&self.dir, notify::RecursiveMode::NonRecursive)
            {
                tracing::warn!(dir = %self.dir.display(), "cannot watch the plugin directory, polling every {RESCAN:?}: {e}");
            }
            watcher
        };
        tracing::info!(dir = %self.dir.display(), "watching for plugin changes");
        let supervisor = self.clone();
        tokio::spawn(async move {
            let _watcher = watcher;
            loop {
                let mut complete = HashSet::new();
                tokio::select! {
                    _ = supervisor.shutdown.cancelled() => return,
                    _ = tokio::time::sleep(RESCAN) => {}
                    Some(event) = events.recv() => {
                        done_writing(&event, &mut complete);
                        // Take whatever else arrived with it, then scan once.
                        while let Ok(event) = events.try_recv() {
                            done_writing(&event, &mut complete);
                        }
                    }
                }
                supervisor.scan(&complete, false).await;
            }
        });
        Ok(())
    }

    /// Compares the directory with what runs and acts on the differences. `complete` names
    /// files known to be fully written; `startup` takes every file as settled.
    async fn scan(&self, complete: &HashSet<PathBuf>, startup: bool) {
        let mut files = self.scanning.lock().await;
        let now = Instant::now();
        let present = match crate::app::plugin_files(&self.dir) {
            Ok(present) => present,
            Err(e) => {
                tracing::warn!("{e}");
                return;
            }
        };
        let mut ready = Vec::new();
        for path in &present {
            let Some(stamp) = stamp_of(path) else { continue };
            let state = files.0.entry(path.clone()).or_insert(FileState { stamp, since: now, handled: None, loaded: None });
            if state.stamp != stamp {
                state.stamp = stamp;
                state.since = now;
            }
            let settled = startup || complete.contains(path) || now.duration_since(state.since) >= SETTLE;
            if settled && state.handled != Some(stamp) {
                ready.push(path.clone());
            }
        }
        let gone: Vec<PathBuf> = files.0.keys().filter(|p| !present.contains(p)).cloned().collect();
        let mut renamed_from = HashSet::new();
        for path in ready {
            if let Some(from) = self.examine(&mut files, &path, &gone, now).await {
                renamed_from.insert(from);
            }
        }
        for path in gone {
            let state = files.0.remove(&path);
            if !renamed_from.contains(&path) && state.is_some_and(|s| s.loaded.is_some()) {
                self.unload(&path).await;
            }
        }
    }

    /// Acts on one settled file. Returns the old path when the file turns out to be a renamed
    /// plugin.
    async fn examine(&self, files: &mut Files, path: &Path, gone: &[PathBuf], now: Instant) -> Option<PathBuf> {
        let (stamp, since) = {
            let state = &files.0[path];
            (state.stamp, state.since)
        };
        let content = match read_content(path).await {
            Ok(content) => content,
            Err(e) => {
                tracing::debug!(file = %path.display(), "cannot read yet: {e}");
                return None;
            }
        };
        if files.0[path].loaded.as_ref() == Some(&content) {
            files.0.get_mut(path).expect("present").handled = Some(stamp);
            tracing::debug!(file = %path.display(), "rewritten with the same content: nothing to reload");
            return None;
        }
        if let Some(from) = gone.iter().find(|g| files.0.get(*g).and_then(|s| s.loaded.as_ref()) == Some(&content)) {
            let from = from.clone();
            let state = files.0.get_mut(path).expect("present");
            state.loaded = Some(content);
            state.handled = Some(stamp);
            self.rename(&from, path);
            return Some(from);
        }
        let started = Instant::now();
        match self.loader.load(path).await {
            Ok(plugin) => {
                let state = files.0.get_mut(path).expect("present");
                state.handled = Some(stamp);
                // What was loaded, which a writer still at work may have changed since
                // `read_content` looked: remembering that read instead would load it again.
                let loaded = (plugin.digest, content.1);
                if self.install(path, plugin, started).await {
                    files.0.get_mut(path).expect("present").loaded = Some(loaded);
                }
            }
            Err(e) if looks_incomplete(&e) && now.duration_since(since) < INCOMPLETE_GRACE => {
                tracing::debug!(file = %path.display(), "not a complete component yet, waiting: {e}");
            }
            Err(e) => {
                files.0.get_mut(path).expect("present").handled = Some(stamp);
                self.reject(path, &stem(path), &e.to_string(), started);
            }
        }
        None
    }

    /// Starts, swaps or restarts the controller for a loaded plugin. Returns whether it now runs
    /// (or is starting).
    async fn install(&self, path: &Path, plugin: LoadedPlugin, started: Instant) -> bool {
        let name = plugin.described.manifest.name.clone();
        let version = plugin.described.manifest.version.clone();
        let digest = plugin.digest;
        if !self.filter.enables(&name) {
            tracing::info!(plugin = %name, file = %path.display(), "disabled by --controllers");
            return false;
        }
        let (same_file, other_file) = {
            let plugins = self.plugins.lock();
            let previous = plugins.running.get(&name).map(|r| (r.path.clone(), r.controller.clone()));
            let same = previous.as_ref().filter(|(p, _)| p == path).map(|(_, c)| c.clone());
            let other = previous.filter(|(p, _)| p != path).map(|(p, _)| p);
            (same, other)
        };
        if let Some(other) = other_file {
            let why = format!("plugin {name:?} is already provided by {}", other.display());
            self.reject(path, &name, &why, started);
            return false;
        }
        // The file may have held another plugin before: that one goes.
        let replaced = self.name_at(path).filter(|n| *n != name);
        if let Some(old) = replaced {
            self.stop(&old).await;
        }
        match same_file {
            Some(controller) if controller.version().manifest.primary == plugin.described.manifest.primary => {
                match controller.swap(plugin).await {
                    Ok(_) => {
                        self.record(&name, "reloaded", format!("reloaded {name} {version} (sha256:{digest}) in {} ms", started.elapsed().as_millis()), false);
                        true
                    }
                    Err(e) => {
                        self.reject(path, &name, &e.to_string(), started);
                        false
                    }
                }
            }
            previous => {
                if previous.is_some() {
                    // A new primary resource means a new queue: restart rather than swap.
                    self.stop(&name).await;
                }
                self.start(path, plugin);
                self.record(&name, "loaded", format!("loaded {name} {version} (sha256:{digest}) in {} ms", started.elapsed().as_millis()), false);
                true
            }
        }
    }

    /// Starts a controller, retrying in the background while a resource it needs is not served
    /// yet (its CRD may be installed later).
    fn start(&self, path: &Path, plugin: LoadedPlugin) {
        let name = plugin.described.manifest.name.clone();
        let stop = self.shutdown.child_token();
        self.plugins.lock().starting.insert(name.clone(), stop.clone());
        let (env, path, registry) = (self.env.clone(), path.to_path_buf(), self.plugins.clone());
        let (status, publishing) = (self.status.clone(), self.publishing.clone());
        tokio::spawn(async move {
            let mut delay = Duration::from_secs(1);
            loop {
                match Controller::start(env.clone(), plugin.clone(), stop.child_token()).await {
                    Ok(controller) => {
                        {
                            let mut plugins = registry.lock();
                            if plugins.starting.remove(&name).is_some() {
                                plugins.running.insert(name, Running { controller, stop, path });
                            }
                        }
                        // It runs now: list it (the load's own update ran while it was starting).
                        if env.leadership.is_leader()
                            && let Err(e) = publish_status(&env, &status, &registry, &publishing).await
                        {
                            tracing::warn!(configmap = %format!("{}/{}", status.namespace, status.name), "cannot update the status ConfigMap: {e}");
                        }
                        return;
                    }
                    Err(e) => tracing::warn!(plugin = %name, "cannot start yet, retrying in {delay:?}: {e}"),
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(delay) => delay = (delay * 2).min(Duration::from_secs(30)),
                }
            }
        });
    }

    fn name_at(&self, path: &Path) -> Option<String> {
        self.plugins.lock().running.iter().find(|(_, r)| r.path == path).map(|(n, _)| n.clone())
    }

    fn rename(&self, from: &Path, to: &Path) {
        let mut plugins = self.plugins.lock();
        if let Some((name, running)) = plugins.running.iter_mut().find(|(_, r)| r.path == from) {
            running.path = to.to_path_buf();
            tracing::info!(plugin = %name, from = %from.display(), to = %to.display(), "renamed: same content, nothing to reload");
        }
    }

    /// Stops a plugin's controller gracefully: running reconciles finish; its queue goes, and
    /// informers no other plugin needs are released.
    async fn stop(&self, name: &str) {
        let (running, starting) = {
            let mut plugins = self.plugins.lock();
            (plugins.running.remove(name), plugins.starting.remove(name))
        };
        if let Some(stop) = starting {
            stop.cancel();
        }
        if let Some(running) = running {
            running.stop.cancel();
            running.controller.stopped().await;
        }
    }

    async fn unload(&self, path: &Path) {
        let started = Instant::now();
        if let Some(name) = self.name_at(path) {
            self.stop(&name).await;
            self.record(&name, "unloaded", format!("unloaded {name}: {} was removed ({} ms)", path.display(), started.elapsed().as_millis()), false);
        }
    }

    fn reject(&self, path: &Path, plugin: &str, why: &str, started: Instant) {
        let note = format!("rejected {}: {why} ({} ms)", path.display(), started.elapsed().as_millis());
        self.record(plugin, "rejected", note, true);
    }

    /// Logs, counts and reports (Event and status ConfigMap) one load, reload, rejection or
    /// unload.
    fn record(&self, plugin: &str, result: &str, note: String, warning: bool) {
        if warning {
            tracing::warn!(plugin, result, "{note}");
        } else {
            tracing::info!(plugin, result, "{note}");
        }
        self.env.metrics.reloads(plugin, result).inc();
        let reason = match result {
            "loaded" => "PluginLoaded",
            "reloaded" => "PluginReloaded",
            "unloaded" => "PluginUnloaded",
            _ => "PluginRejected",
        };
        let status = self.status.clone();
        let env = self.env.clone();
        let (registry, publishing) = (self.plugins.clone(), self.publishing.clone());
        let plugin = plugin.to_string();
        tokio::spawn(async move {
            if !env.leadership.is_leader() {
                return;
            }
            let uid = match publish_status(&env, &status, &registry, &publishing).await {
                Ok(uid) => uid,
                Err(e) => {
                    tracing::warn!(configmap = %format!("{}/{}", status.namespace, status.name), "cannot update the status ConfigMap: {e}");
                    None
                }
            };
            env.events.publish(PluginEvent {
                plugin,
                regarding: Gvk::new("", "v1", "ConfigMap"),
                key: ObjectKey::new(Some(&status.namespace), &status.name),
                uid,
                warning,
                reason: reason.into(),
                action: "Load".into(),
                note: note.chars().take(1024).collect(),
            });
        });
    }

    /// Stops every controller (graceful).
    pub async fn stopped(&self) {
        for controller in self.controllers() {
            controller.stopped().await;
        }
    }
}

/// What the status ConfigMap lists: each running plugin with its version, digest and file.
fn listing(plugins: &Mutex<Plugins>) -> BTreeMap<String, String> {
    plugins
        .lock()
        .running
        .iter()
        .map(|(name, r)| {
            let v = r.controller.version();
            (name.clone(), format!("version={} digest=sha256:{} file={}", v.manifest.version, v.plugin.digest, r.path.display()))
        })
        .collect()
}

/// Writes the plugins running now into the status ConfigMap (server-side apply); returns its
/// uid. One write at a time, each listing what runs when it is made, so that writes finishing
/// out of order cannot leave an older listing behind.
async fn publish_status(
    env: &Environment,
    status: &StatusObject,
    plugins: &Mutex<Plugins>,
    publishing: &tokio::sync::Mutex<()>,
) -> Result<Option<String>, kube::Error> {
    let _one_at_a_time = publishing.lock().await;
    let listing = listing(plugins);
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &status.namespace);
    let object = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": status.name, "labels": {"app.kubernetes.io/managed-by": "kubewasm"}},
        "data": listing,
    });
    let params = PatchParams::apply("kubewasm").force();
    let stored = api.patch(&status.name, &params, &Patch::Apply(object)).await?;
    Ok(stored.metadata.uid)
}

/// Whether an event may mean a changed file. Opening, reading and closing a file unchanged do
/// not — and the scan itself reads the files: were those events to wake it, a file it cannot
/// load yet would be examined again and again without pause.
fn changes_something(event: &notify::Event) -> bool {
    use notify::EventKind::Access;
    use notify::event::{AccessKind, AccessMode};
    match event.kind {
        Access(AccessKind::Close(AccessMode::Write)) => true,
        Access(_) => false,
        _ => true,
    }
}

/// Marks files whose writer is known to be done: renamed into place, or closed after writing.
fn done_writing(event: &notify::Event, complete: &mut HashSet<PathBuf>) {
    use notify::EventKind::{Access, Modify};
    use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
    match event.kind {
        Access(AccessKind::Close(AccessMode::Write)) | Modify(ModifyKind::Name(RenameMode::To)) => {
            complete.extend(event.paths.iter().cloned());
        }
        Modify(ModifyKind::Name(RenameMode::Both)) => complete.extend(event.paths.last().cloned()),
        _ => {}
    }
}

/// A load error that a file still being written produces.
fn looks_incomplete(error: &LoadError) -> bool {
    match error {
        LoadError::Truncated(_) | LoadError::NotWebAssembly => true,
        LoadError::Runtime(crate::runtime::RuntimeError::Compile(message)) => {
            message.contains("unexpected end") || message.contains("out of bounds")
        }
        _ => false,
    }
}

/// The plugin's identity on disk: the digest of the `.wasm` and the settings text.
async fn read_content(path: &Path) -> std::io::Result<(Digest, String)> {
    let wasm = tokio::fs::read(path).await?;
    let settings = tokio::fs::read_to_string(path.with_extension("toml")).await.unwrap_or_default();
    Ok((Digest::of(&wasm), settings))
}

fn stem(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}
