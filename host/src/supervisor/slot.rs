//! One plugin's slot: everything the host holds for the plugin of one file (`NAME.wasm` of the
//! plugin directory, or the file a Plugin resource's module was written to) — the live version
//! and its controller, the candidate (`NAME.next.wasm`) running in its shadow, the probation of a
//! version just swapped in, the last rejection and the rolled-back mark — each version with its
//! memory [`Reservation`]. The slot's own task handles its commands ("this file changed", "this
//! file went") one at a time and its rollout checks in between; it alone writes that state, and
//! the rest of the host reads the [`View`] it publishes.
//!
//! A new version is admitted (its identity's RBAC, the memory budget, a name and finalizer of its
//! own), then swapped in ([`Running::swap`], bounded by the sync timeout) or started; a refused
//! one is rejected while the old version keeps serving. A version swapped in is on probation for
//! a while, the one it replaced kept at hand: if it fails on clearly more objects
//! ([`rollout`]), the previous version is swapped back, and the rolled-back content is refused
//! until the file changes. A candidate is admitted the same way and run in the shadow of the live
//! version; it is promoted by renaming it over the live file — by hand, or here once it has agreed
//! long enough — and the live file's reload does the rest.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::backend::{Backend, Module, Running};
use super::claims::Claims;
use super::files::{Content, read_content, stem};
use super::rollout::{self, Probation, Promotion, Verdict};
use super::status::Transition;
use super::{RejectReason, Rejection};
use crate::budget::Reservation;
use crate::controller::ControllerError;
use crate::plugin::{Digest, LoadError, PluginOptions, candidate_for};

/// What a slot is asked to do.
pub enum Command {
    /// A file of this slot is complete and changed: its live file or its candidate.
    Load(Load),
    /// A file of this slot went.
    Remove { path: PathBuf, reply: oneshot::Sender<()> },
    /// The live file moved, unchanged.
    Moved { to: PathBuf },
}

pub struct Load {
    pub path: PathBuf,
    /// The plugin name the source expects the module to declare.
    pub expected: Option<String>,
    /// From the plugin directory: a candidate that agrees long enough is promoted here, by
    /// renaming its file (a Plugin resource's candidate is promoted by its owner's edit).
    pub promote_files: bool,
    /// The file changed a moment ago: a load error that a half-written file gives is not a
    /// rejection yet.
    pub grace: bool,
    /// What the file holds, when the source read it: a version already running from exactly
    /// this content is not loaded again (two changes of one file can queue up behind a slow load).
    pub content: Option<Content>,
    pub reply: oneshot::Sender<Result<Accepted, Rejection>>,
}

/// What became of a file that was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accepted {
    /// It runs (or starts, or shadows): this digest.
    Runs(Digest),
    /// `--controllers` disables it.
    Disabled,
    /// It looks half-written: look again once it settles.
    Incomplete,
}

/// What the rest of the host may read of a slot.
pub struct View<C> {
    /// The live file.
    pub path: PathBuf,
    /// The plugin's name, once a version declared one (or the name its source expects).
    pub name: Option<String>,
    pub phase: Phase<C>,
    /// The last refusal, while nothing newer ran.
    pub rejection: Option<String>,
    /// The content rolled back from the file, refused until it changes.
    pub rolled_back: Option<Digest>,
    /// The agreeing reconciles that promote the candidate; 0 when none runs or never.
    pub promote_after: u64,
    /// The status entry of a plugin removed while objects still carry its finalizer.
    pub removed: Option<String>,
}

pub enum Phase<C> {
    Idle,
    /// Started, not serving yet. `waiting` says why while a resource it needs is not served (its
    /// CRD may be installed later); `None` while its caches sync, which the sync timeout bounds.
    Starting {
        since: Instant,
        waiting: Arc<Mutex<Option<String>>>,
    },
    Running(Arc<C>),
}

impl<C> Phase<C> {
    pub fn controller(&self) -> Option<&Arc<C>> {
        match self {
            Phase::Running(controller) => Some(controller),
            _ => None,
        }
    }
}

/// The live side of a slot.
enum Live<B: Backend> {
    Idle,
    Starting(Starting<B>),
    Running(Serving<B>),
}

struct Starting<B: Backend> {
    name: String,
    content: Option<Content>,
    stop: CancellationToken,
    reservation: Reservation,
    since: Instant,
    waiting: Arc<Mutex<Option<String>>>,
    done: oneshot::Receiver<Result<Arc<B::Controller>, String>>,
}

struct Serving<B: Backend> {
    name: String,
    /// The file content it runs from, when known.
    content: Option<Content>,
    controller: Arc<B::Controller>,
    stop: CancellationToken,
    reservation: Reservation,
}

/// A candidate in the shadow of the live version.
struct Candidate {
    digest: Digest,
    content: Option<Content>,
    version: String,
    /// Held while it runs: dropping the candidate gives its bytes back.
    _reservation: Reservation,
    /// Promote (by renaming its file) once it agreed this often; `None`: never here.
    promote_after: Option<u64>,
}

/// Content of a file that was rolled back: its module, settings and options.
#[derive(PartialEq)]
struct RolledBack {
    digest: Digest,
    settings: String,
    options: PluginOptions,
}

impl RolledBack {
    fn of(plugin: &impl Module) -> Self {
        RolledBack { digest: plugin.digest(), settings: plugin.settings().to_string(), options: plugin.options().clone() }
    }
}

/// The sender half of a slot, and what it shows.
pub struct SlotHandle<B: Backend> {
    pub commands: mpsc::UnboundedSender<Command>,
    pub view: Arc<RwLock<View<B::Controller>>>,
}

impl<B: Backend> Clone for SlotHandle<B> {
    fn clone(&self) -> Self {
        SlotHandle { commands: self.commands.clone(), view: self.view.clone() }
    }
}

pub struct PluginSlot<B: Backend> {
    backend: Arc<B>,
    claims: Arc<Claims>,
    path: PathBuf,
    view: Arc<RwLock<View<B::Controller>>>,
    live: Live<B>,
    candidate: Option<Candidate>,
    probation: Option<Probation<B::Plugin>>,
    rolled_back: Option<RolledBack>,
    /// Parent of every controller this slot starts.
    shutdown: CancellationToken,
}

/// What woke the slot.
enum Wake<C> {
    Command(Command),
    Started(Result<Arc<C>, String>),
    Check,
    Closed,
}

impl<B: Backend> PluginSlot<B> {
    /// Starts the slot of the live file `path`; it runs until its handle is dropped or `shutdown`.
    pub fn spawn(backend: Arc<B>, claims: Arc<Claims>, path: PathBuf, shutdown: CancellationToken) -> SlotHandle<B> {
        let (commands, receiver) = mpsc::unbounded_channel();
        let view = Arc::new(RwLock::new(View {
            path: path.clone(),
            name: None,
            phase: Phase::Idle,
            rejection: None,
            rolled_back: None,
            promote_after: 0,
            removed: None,
        }));
        let slot = PluginSlot {
            backend,
            claims,
            path,
            view: view.clone(),
            live: Live::Idle,
            candidate: None,
            probation: None,
            rolled_back: None,
            shutdown: shutdown.clone(),
        };
        tokio::spawn(slot.run(receiver, shutdown));
        SlotHandle { commands, view }
    }

    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>, shutdown: CancellationToken) {
        let mut check = tokio::time::interval_at(Instant::now() + rollout::CHECK_EVERY, rollout::CHECK_EVERY);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let watching = self.probation.is_some() || self.candidate.as_ref().is_some_and(|c| c.promote_after.is_some());
            let wake = tokio::select! {
                _ = shutdown.cancelled() => return,
                command = commands.recv() => command.map_or(Wake::Closed, Wake::Command),
                started = started(&mut self.live) => Wake::Started(started),
                _ = check.tick(), if watching => Wake::Check,
            };
            let handled = match wake {
                Wake::Closed => return,
                Wake::Command(command) => AssertUnwindSafe(self.handle(command)).catch_unwind().await,
                Wake::Started(result) => AssertUnwindSafe(self.started(result)).catch_unwind().await,
                Wake::Check => AssertUnwindSafe(self.check()).catch_unwind().await,
            };
            // A bug in one step must not take the slot (and its plugin) with it: the step's caller
            // hears of it through its dropped reply, and the next command is handled.
            if let Err(panic) = handled {
                let what = panic.downcast_ref::<String>().map(String::as_str).or_else(|| panic.downcast_ref::<&str>().copied()).unwrap_or("?");
                tracing::error!(file = %self.path.display(), "the plugin's slot failed while handling a command (a host bug): {what}");
            }
            self.publish_view();
        }
    }

    async fn handle(&mut self, command: Command) {
        match command {
            Command::Load(load) => {
                let reply = load.reply;
                if let Some(expected) = &load.expected {
                    self.view.write().name.get_or_insert_with(|| expected.clone());
                }
                let result = match self.running_from(&load.path, load.content.as_ref()) {
                    Some(digest) => {
                        tracing::debug!(file = %load.path.display(), "already runs this content: nothing to reload");
                        Ok(Accepted::Runs(digest))
                    }
                    None => self.load(load.path, load.expected, load.promote_files, load.grace, load.content).await,
                };
                let _ = reply.send(result);
            }
            Command::Remove { path, reply } => {
                self.remove(&path).await;
                let _ = reply.send(());
            }
            Command::Moved { to } => {
                self.claims.moved(&self.path, &to);
                tracing::info!(plugin = ?self.name(), from = %self.path.display(), to = %to.display(), "renamed: same content, nothing to reload");
                self.path = to;
            }
        }
    }

    /// The digest of what runs (or starts, or shadows) from `path`, if that is `content`.
    fn running_from(&self, path: &Path, content: Option<&Content>) -> Option<Digest> {
        let content = content?;
        let running = match (candidate_for(path), &self.live, &self.candidate) {
            (Some(_), _, Some(candidate)) => candidate.content.as_ref(),
            (None, Live::Running(serving), _) => serving.content.as_ref(),
            (None, Live::Starting(starting), _) => starting.content.as_ref(),
            _ => None,
        };
        (running == Some(content)).then_some(content.0)
    }

    /// The plugin's name: what runs or starts, else the name last seen.
    fn name(&self) -> Option<String> {
        match &self.live {
            Live::Running(serving) => Some(serving.name.clone()),
            Live::Starting(starting) => Some(starting.name.clone()),
            Live::Idle => self.view.read().name.clone(),
        }
    }

    async fn load(
        &mut self,
        path: PathBuf,
        expected: Option<String>,
        promote_files: bool,
        grace: bool,
        content: Option<Content>,
    ) -> Result<Accepted, Rejection> {
        let started = Instant::now();
        let plugin = match self.backend.load(&path).await {
            Ok(plugin) => plugin,
            Err(e) if grace && looks_incomplete(&e) => {
                tracing::debug!(file = %path.display(), "not a complete component yet, waiting: {e}");
                return Ok(Accepted::Incomplete);
            }
            Err(e) => {
                let plugin = expected.unwrap_or_else(|| stem(&self.path));
                // A budget too full to describe it in has room again once other plugins give
                // some back: looked at again later, like a version admitted over budget.
                let (reason, retry) = match e {
                    LoadError::DescribeMemory(_) => (RejectReason::OverBudget, true),
                    _ => (RejectReason::Rejected, false),
                };
                let rejection = Rejection { plugin, reason, why: load_error(&path, &e), retry };
                return Err(self.reject(&path, rejection, started).await);
            }
        };
        let result = match candidate_for(&path) {
            Some(_) => self.shadow(&path, plugin, expected, promote_files, content).await,
            None => self.install(plugin, expected, started, content).await,
        };
        match result {
            Ok(accepted) => Ok(accepted),
            Err(rejection) => Err(self.reject(&path, rejection, started).await),
        }
    }

    /// Reports a refusal, with when it is looked at again if it may pass.
    async fn reject(&mut self, path: &Path, rejection: Rejection, started: Instant) -> Rejection {
        let mut note = format!("rejected {}: {} ({} ms)", path.display(), rejection.why, started.elapsed().as_millis());
        if rejection.retry
            && let Some(after) = self.backend.retry_later(path).await
        {
            note.push_str(&format!("; trying again in {after:?}"));
        }
        self.view.write().rejection = Some(note.clone());
        self.backend.report(&rejection.plugin, Transition::Rejected, note).await;
        rejection
    }

    /// Admits a new live version and swaps it in, or starts it.
    async fn install(&mut self, plugin: B::Plugin, expected: Option<String>, started: Instant, content: Option<Content>) -> Result<Accepted, Rejection> {
        let manifest = plugin.manifest().clone();
        let name = manifest.name.clone();
        let reject = |reason, why: String, retry| Rejection { plugin: name.clone(), reason, why, retry };
        if let Some(expected) = expected.filter(|e| *e != name) {
            let why = format!("the module declares the plugin name {name:?}, not {expected:?}: name the Plugin after the plugin");
            return Err(Rejection { plugin: expected, reason: RejectReason::NameMismatch, why, retry: false });
        }
        if self.rolled_back.as_ref().is_some_and(|r| *r == RolledBack::of(&plugin)) {
            let why = format!(
                "{name} {} (sha256:{}) was rolled back; it is not loaded again until the module or its settings change",
                manifest.version,
                plugin.digest()
            );
            return Err(reject(RejectReason::RolledBack, why, false));
        }
        if !self.backend.enables(&name) {
            tracing::info!(plugin = %name, file = %self.path.display(), "disabled by --controllers");
            return Ok(Accepted::Disabled);
        }
        self.claims.check(&name, &self.path, manifest.finalizer.as_deref()).map_err(|e| reject(RejectReason::NameTaken, e.to_string(), true))?;
        self.backend.admit(&manifest, plugin.options()).await.map_err(|e| {
            let reason = if e.is_forbidden() { RejectReason::Forbidden } else { RejectReason::AdmissionFailed };
            reject(reason, e.to_string(), true)
        })?;
        let reservation =
            self.backend.budget().account(&name).reserve_first(plugin.memory_bytes()).map_err(|e| reject(RejectReason::OverBudget, e.to_string(), true))?;
        self.view.write().name = Some(name.clone());
        // The file may have held another plugin before: that one goes.
        if self.name().is_some_and(|n| n != name) {
            self.stop_live().await;
        }
        let digest = plugin.digest();
        match &mut self.live {
            Live::Running(serving) if serving.controller.serving().manifest().primary == manifest.primary => {
                let previous = serving.controller.serving();
                let baseline = serving.controller.health();
                if let Err(e) = serving.controller.swap(plugin.clone()).await {
                    // The old version keeps serving, with what it had reserved.
                    let sync = matches!(e, ControllerError::SyncTimeout(..));
                    return Err(reject(if sync { RejectReason::SyncFailed } else { RejectReason::Rejected }, e.to_string(), sync));
                }
                self.claims.set_finalizers(&name, serving.controller.finalizers());
                let previous_reservation = std::mem::replace(&mut serving.reservation, reservation);
                serving.content = content;
                self.rolled_back = None;
                // The candidate that ran in the shadow is live now: its run is over.
                let promoted = self.candidate.as_ref().is_some_and(|c| c.digest == digest);
                let report = if promoted {
                    self.candidate = None;
                    serving.controller.end_shadow()
                } else {
                    None
                };
                let policy = self.backend.rollout().for_plugin(plugin.options());
                self.probation = (!policy.is_off()).then(|| Probation::new(previous, previous_reservation, baseline, policy, Instant::now()));
                let (transition, verb) = if promoted { (Transition::Promoted, "promoted") } else { (Transition::Reloaded, "reloaded") };
                let mut note = format!("{verb} {name} {} (sha256:{digest}) in {} ms", manifest.version, started.elapsed().as_millis());
                if let Some(report) = report {
                    note.push_str(&format!(" after a shadow run of {}", report.summary()));
                }
                self.view.write().rejection = None;
                self.publish_view();
                self.backend.report(&name, transition, note).await;
            }
            _ => {
                // Not running, starting, or running another primary resource (a new queue): this
                // version takes the name, whatever ran here stops, then this version starts.
                self.stop_live().await;
                let mut finalizers: Vec<String> = manifest.finalizer.iter().cloned().collect();
                finalizers.dedup();
                self.claims.claim(&name, &self.path, finalizers).map_err(|e| reject(RejectReason::NameTaken, e.to_string(), true))?;
                self.live = Live::Starting(self.start(name.clone(), plugin, reservation, content));
                self.rolled_back = None;
                self.view.write().rejection = None;
                self.publish_view();
                let note = format!("loaded {name} {} (sha256:{digest}) in {} ms", manifest.version, started.elapsed().as_millis());
                self.backend.report(&name, Transition::Loaded, note).await;
            }
        }
        Ok(Accepted::Runs(digest))
    }

    /// Starts a controller in the background: retrying while a resource it needs is not served
    /// yet, then waiting for its caches to sync, within the sync timeout.
    fn start(&self, name: String, plugin: B::Plugin, reservation: Reservation, content: Option<Content>) -> Starting<B> {
        let stop = self.shutdown.child_token();
        let waiting = Arc::new(Mutex::new(None));
        let (done_tx, done) = oneshot::channel();
        let (backend, token, why) = (self.backend.clone(), stop.clone(), waiting.clone());
        let plugin_name = name.clone();
        tokio::spawn(async move {
            let mut delay = Duration::from_secs(1);
            let controller = loop {
                match backend.start(plugin.clone(), token.child_token()).await {
                    Ok(controller) => break controller,
                    Err(e) => {
                        tracing::warn!(plugin = %plugin_name, "cannot start yet, retrying in {delay:?}: {e}");
                        *why.lock() = Some(e.to_string());
                    }
                }
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = tokio::time::sleep(delay) => delay = (delay * 2).min(Duration::from_secs(30)),
                }
            };
            *why.lock() = None;
            let synced = tokio::select! {
                _ = token.cancelled() => return,
                synced = controller.first_sync() => synced,
            };
            let _ = done_tx.send(match synced {
                Ok(()) => Ok(controller),
                Err(e) => {
                    token.cancel();
                    controller.stopped().await;
                    Err(e.to_string())
                }
            });
        });
        Starting { name, content, stop, reservation, since: Instant::now(), waiting, done }
    }

    /// The start finished: it serves, or it is rejected and looked at again later.
    async fn started(&mut self, result: Result<Arc<B::Controller>, String>) {
        let Live::Starting(starting) = std::mem::replace(&mut self.live, Live::Idle) else { return };
        match result {
            Ok(controller) => {
                tracing::info!(plugin = %starting.name, "serving");
                self.live = Live::Running(Serving {
                    name: starting.name,
                    content: starting.content,
                    controller,
                    stop: starting.stop,
                    reservation: starting.reservation,
                });
                self.publish_view();
                self.backend.publish().await;
            }
            Err(why) => {
                self.claims.free(&starting.name, &self.path);
                drop(starting.reservation);
                let mut note = format!("rejected {}: {why}", self.path.display());
                if let Some(after) = self.backend.retry_later(&self.path).await {
                    note.push_str(&format!("; trying again in {after:?}"));
                }
                self.view.write().rejection = Some(note.clone());
                self.publish_view();
                self.backend.report(&starting.name, Transition::Rejected, note).await;
            }
        }
    }

    /// Runs a candidate file in the shadow of the live version, admitted as a new version would
    /// be (its identity's RBAC, the memory budget — one worker's worth); a candidate before it
    /// ends.
    async fn shadow(
        &mut self,
        path: &Path,
        plugin: B::Plugin,
        expected: Option<String>,
        promote_files: bool,
        content: Option<Content>,
    ) -> Result<Accepted, Rejection> {
        let manifest = plugin.manifest().clone();
        let name = expected.clone().unwrap_or_else(|| manifest.name.clone());
        let reject = |reason, why: String, retry| Rejection { plugin: name.clone(), reason, why, retry };
        let Live::Running(serving) = &self.live else {
            let why = format!("{} is a candidate for {}, which does not run (yet)", path.display(), self.path.display());
            return Err(reject(RejectReason::NotRunning, why, true));
        };
        if !serving.controller.is_synced() {
            let why = format!("{} is a candidate for {}, which does not run (yet)", path.display(), self.path.display());
            return Err(reject(RejectReason::NotRunning, why, true));
        }
        if serving.name != manifest.name || expected.is_some_and(|e| e != manifest.name) {
            let why = format!("the candidate declares the plugin name {:?}, but {} runs {:?}", manifest.name, self.path.display(), serving.name);
            return Err(reject(RejectReason::NameMismatch, why, false));
        }
        let live = serving.controller.serving();
        if live.manifest().primary != manifest.primary {
            let why = format!(
                "the candidate's primary is {}, the live version's {}: a new primary is a new controller, load it as one",
                manifest.primary,
                live.manifest().primary
            );
            return Err(reject(RejectReason::Rejected, why, false));
        }
        self.backend.admit(&manifest, plugin.options()).await.map_err(|e| {
            let reason = if e.is_forbidden() { RejectReason::Forbidden } else { RejectReason::AdmissionFailed };
            reject(reason, e.to_string(), true)
        })?;
        let reservation =
            self.backend.budget().account(&name).reserve_first(plugin.memory_bytes()).map_err(|e| reject(RejectReason::OverBudget, e.to_string(), true))?;
        let digest = plugin.digest();
        let policy = self.backend.rollout().for_plugin(plugin.options());
        if let Err(e) = serving.controller.shadow(plugin).await {
            let sync = matches!(e, ControllerError::SyncTimeout(..));
            return Err(reject(if sync { RejectReason::SyncFailed } else { RejectReason::Rejected }, e.to_string(), sync));
        }
        let promote_after = (promote_files && policy.promote_after > 0).then_some(policy.promote_after);
        self.candidate = Some(Candidate { digest, content, version: manifest.version.clone(), _reservation: reservation, promote_after });
        self.view.write().promote_after = policy.promote_after;
        let mut note =
            format!("shadowing {name} {} with the candidate {} (sha256:{digest}) from {}", live.manifest().version, manifest.version, path.display());
        if let Some(after) = promote_after {
            note.push_str(&format!("; promoted once it agrees on {after} reconciles"));
        }
        self.backend.report(&name, Transition::Candidate, note).await;
        Ok(Accepted::Runs(digest))
    }

    /// A file went: the live one stops the plugin, the candidate ends its shadow run.
    async fn remove(&mut self, path: &Path) {
        if candidate_for(path).is_some() {
            self.candidate_gone(path).await;
            return;
        }
        let started = Instant::now();
        self.rolled_back = None;
        self.probation = None;
        self.candidate = None;
        let name = self.name();
        let removed = match &self.live {
            Live::Running(serving) => serving.controller.leftover_finalizers(),
            _ => None,
        };
        let was_live = !matches!(self.live, Live::Idle);
        self.stop_live().await;
        self.view.write().removed = removed;
        if let (true, Some(name)) = (was_live, name) {
            let note = format!("unloaded {name}: {} was removed ({} ms)", path.display(), started.elapsed().as_millis());
            self.publish_view();
            self.backend.report(&name, Transition::Unloaded, note).await;
        }
    }

    /// The candidate's file went: its shadow run ends — unless it was renamed over the live file
    /// (promoted), which the live file's reload takes care of.
    async fn candidate_gone(&mut self, path: &Path) {
        let Some(candidate) = &self.candidate else { return };
        let promoted = read_content(&self.path).await.is_ok_and(|(digest, _): Content| digest == candidate.digest);
        if promoted {
            tracing::debug!(file = %path.display(), "the candidate was renamed over {}: its reload ends the shadow run", self.path.display());
            return;
        }
        let Some(candidate) = self.candidate.take() else { return };
        self.view.write().promote_after = 0;
        let Live::Running(serving) = &self.live else { return };
        let report = serving.controller.end_shadow();
        let summary = report.map(|r| r.summary()).unwrap_or_default();
        let note = format!(
            "ended the shadow run of {}'s candidate {} (sha256:{}): {} was removed; it compared {summary}",
            serving.name,
            candidate.version,
            candidate.digest,
            path.display()
        );
        let name = serving.name.clone();
        drop(candidate);
        self.backend.report(&name, Transition::CandidateRemoved, note).await;
    }

    /// Stops whatever runs or starts here (gracefully: running reconciles finish) and gives up
    /// its name and reservation.
    async fn stop_live(&mut self) {
        match std::mem::replace(&mut self.live, Live::Idle) {
            Live::Idle => {}
            Live::Starting(starting) => {
                starting.stop.cancel();
                self.claims.free(&starting.name, &self.path);
            }
            Live::Running(serving) => {
                serving.stop.cancel();
                serving.controller.stopped().await;
                self.claims.free(&serving.name, &self.path);
            }
        }
        self.candidate = None;
        self.probation = None;
        self.view.write().promote_after = 0;
    }

    /// The rollout checks: the version on probation, the candidate waiting for promotion.
    async fn check(&mut self) {
        let Live::Running(serving) = &self.live else {
            self.probation = None;
            return;
        };
        if let Some(probation) = &mut self.probation {
            let health = serving.controller.health();
            match probation.judge(Instant::now(), self.backend.leading(), &health) {
                Verdict::Watch => {}
                Verdict::Keep => {
                    tracing::debug!(plugin = %serving.name, "rollback window over: the new version stays");
                    self.probation = None;
                }
                Verdict::RollBack { before, after } => {
                    let why = format!(
                        "it failed on {} of {} objects ({:.0}%) after {} reconciles, the version before on {:.0}%",
                        health.failing,
                        health.objects,
                        after * 100.0,
                        health.reconciles,
                        before * 100.0
                    );
                    self.roll_back(why).await;
                }
            }
        }
        let (Live::Running(serving), Some(candidate)) = (&self.live, &mut self.candidate) else { return };
        let (Some(after), Some(report)) = (candidate.promote_after, serving.controller.shadow_report()) else { return };
        match rollout::promotion(&report, after) {
            Promotion::Wait => {}
            Promotion::Never => {
                tracing::info!(plugin = %serving.name, "the candidate did not agree with the live version: it is left for `kubewasm rollout promote`");
                candidate.promote_after = None;
            }
            Promotion::Promote => {
                candidate.promote_after = None;
                let name = serving.name.clone();
                match crate::plugin::promote(&self.path) {
                    Ok(()) => tracing::info!(plugin = %name, "the candidate agreed on {after} reconciles: promoting it"),
                    Err(e) => {
                        let note = format!("cannot promote {name}'s candidate {} (it agreed on {after} reconciles): {e}; promote it by hand", report.version);
                        self.backend.report(&name, Transition::Rejected, note).await;
                    }
                }
            }
        }
    }

    /// Swaps the previous version back in place of the one on probation, and marks what was
    /// rolled back so that the file is not loaded again until it changes.
    async fn roll_back(&mut self, why: String) {
        let (Some(probation), Live::Running(serving)) = (self.probation.take(), &mut self.live) else { return };
        let started = Instant::now();
        let bad = serving.controller.serving();
        let previous = probation.previous.clone();
        let (from, to) =
            (format!("{} (sha256:{})", bad.manifest().version, bad.digest()), format!("{} (sha256:{})", previous.manifest().version, previous.digest()));
        let name = serving.name.clone();
        match serving.controller.swap(previous).await {
            Ok(()) => {
                // It runs within what it had reserved before the reload; the bad one's goes.
                serving.reservation = probation.reservation;
                // The file still holds the bad content; the previous version's is not on disk.
                serving.content = None;
                self.claims.set_finalizers(&name, serving.controller.finalizers());
                self.rolled_back = Some(RolledBack::of(&bad));
                let note = format!(
                    "rolled back {name} {from} to {to} in {} ms: {why}; {} is not loaded again until it changes",
                    started.elapsed().as_millis(),
                    self.path.display()
                );
                self.publish_view();
                self.backend.report(&name, Transition::RolledBack, note).await;
            }
            Err(e) => tracing::warn!(plugin = %name, "cannot roll {from} back to {to}, it keeps serving: {e}"),
        }
    }

    /// Shows the state as it is now.
    fn publish_view(&self) {
        let name = self.name();
        let mut view = self.view.write();
        view.path = self.path.clone();
        view.phase = match &self.live {
            Live::Idle => Phase::Idle,
            Live::Starting(starting) => Phase::Starting { since: starting.since, waiting: starting.waiting.clone() },
            Live::Running(serving) => Phase::Running(serving.controller.clone()),
        };
        if name.is_some() {
            view.name = name;
        }
        view.rolled_back = self.rolled_back.as_ref().map(|r| r.digest);
        if self.candidate.is_none() {
            view.promote_after = 0;
        }
        if !matches!(self.live, Live::Idle) {
            view.removed = None;
        }
    }
}

/// Resolves when a start finishes; never when nothing starts.
async fn started<B: Backend>(live: &mut Live<B>) -> Result<Arc<B::Controller>, String> {
    match live {
        Live::Starting(starting) => match (&mut starting.done).await {
            Ok(result) => result,
            Err(_) => Err("its start ended without a word (a host bug)".into()),
        },
        _ => std::future::pending().await,
    }
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
pub(super) fn looks_incomplete(error: &LoadError) -> bool {
    match error {
        LoadError::Truncated(_) | LoadError::NotWebAssembly => true,
        // Compiled in this process, or in the compiler process (which reports in words).
        LoadError::Runtime(crate::runtime::RuntimeError::Compile(message)) | LoadError::Compile(crate::plugin::compiler::CompileError::Failed(message)) => {
            message.contains("unexpected end") || message.contains("out of bounds")
        }
        _ => false,
    }
}
