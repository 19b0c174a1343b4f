//! The plugin directory: which `NAME.wasm` files (with their `NAME.toml`) are there, which are
//! complete, which changed, which moved, which are gone. A file is ready to look at only when
//! complete: at once when it was renamed into place or its writer closed it (inotify), otherwise
//! once its size and modification time have been stable for a moment. Same content under a new
//! name is a rename, not a new plugin. Knows files, not plugins.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::plugin::{Digest, candidate_for, settings_path};
use crate::resource::is_dns_label;

/// How long a file's size and mtime must stay put before it is looked at (without an inotify
/// hint that its writer is done).
const SETTLE: Duration = Duration::from_millis(500);
/// A file that does not parse is taken as half-written for this long after its last change.
pub const INCOMPLETE_GRACE: Duration = Duration::from_secs(5);
/// Retries of a file refused for a reason that may pass (RBAC, the memory budget, a name or a
/// sync) start this far apart and double up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(5);
const RETRY_MAX: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
#[error("cannot read the plugin directory {path}: {source}")]
pub struct DirError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// The `*.wasm` files of the plugin directory, sorted.
pub fn plugin_files(dir: &Path) -> Result<Vec<PathBuf>, DirError> {
    let entries = std::fs::read_dir(dir).map_err(|source| DirError { path: dir.into(), source })?;
    let mut files: Vec<PathBuf> =
        entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file()).collect();
    files.sort();
    Ok(files)
}

/// kube-controller-manager's `--controllers` rule: `*` enables every plugin, `name` enables one,
/// `-name` disables one. The default is `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerFilter {
    all: bool,
    enabled: Vec<String>,
    disabled: Vec<String>,
}

impl Default for ControllerFilter {
    fn default() -> Self {
        ControllerFilter { all: true, enabled: Vec::new(), disabled: Vec::new() }
    }
}

impl std::str::FromStr for ControllerFilter {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut filter = ControllerFilter { all: false, enabled: Vec::new(), disabled: Vec::new() };
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            match item.strip_prefix('-') {
                Some(name) if is_dns_label(name) => filter.disabled.push(name.into()),
                None if item == "*" => filter.all = true,
                None if is_dns_label(item) => filter.enabled.push(item.into()),
                _ => return Err(format!("{item:?} is not a plugin name, `-name` or `*`")),
            }
        }
        if !filter.all && filter.enabled.is_empty() {
            return Err("names no plugin to run; use `*` for all".into());
        }
        Ok(filter)
    }
}

impl ControllerFilter {
    pub fn enables(&self, name: &str) -> bool {
        !self.disabled.iter().any(|d| d == name) && (self.all || self.enabled.iter().any(|e| e == name))
    }
}

/// What the directory holds: a plugin's content is the digest of its `.wasm` and its settings.
pub type Content = (Digest, String);

/// What changed since the last look.
#[derive(Debug, PartialEq, Eq)]
pub enum Change {
    /// A complete file that is new or changed, or due for a retry.
    Ready(PathBuf),
    /// A loaded plugin moved to a new name, unchanged.
    Renamed { from: PathBuf, to: PathBuf },
    /// A file that was loaded is gone.
    Removed(PathBuf),
}

/// What is known of each file.
#[derive(Default)]
pub struct Files(HashMap<PathBuf, FileState>);

struct FileState {
    stamp: Stamp,
    /// When `stamp` was first seen.
    since: Instant,
    /// The stamp last acted on (looked at, loaded, or refused).
    handled: Option<Stamp>,
    /// The content loaded from this file, if any.
    loaded: Option<Content>,
    /// Look again then, though nothing changed (a refusal that may pass).
    retry_at: Option<Instant>,
    retry_delay: Duration,
}

/// Size and modification time of a plugin file and of its settings file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    wasm: (u64, Option<SystemTime>),
    settings: Option<(u64, Option<SystemTime>)>,
}

fn stamp_of(path: &Path) -> Option<Stamp> {
    let meta = |p: &Path| std::fs::metadata(p).ok().filter(|m| m.is_file()).map(|m| (m.len(), m.modified().ok()));
    Some(Stamp { wasm: meta(path)?, settings: meta(&settings_path(path)) })
}

impl Files {
    /// Compares the directory with what is known. `complete` names files known to be fully
    /// written; `startup` takes every file as settled. Files returned as ready are marked
    /// handled: call [`Files::unhandle`] to have one looked at again.
    pub async fn scan(&mut self, dir: &Path, complete: &HashSet<PathBuf>, startup: bool) -> Result<Vec<Change>, DirError> {
        let now = Instant::now();
        let present = plugin_files(dir)?;
        let mut ready = Vec::new();
        for path in &present {
            let Some(stamp) = stamp_of(path) else { continue };
            let state =
                self.0.entry(path.clone()).or_insert(FileState { stamp, since: now, handled: None, loaded: None, retry_at: None, retry_delay: RETRY_FIRST });
            if state.stamp != stamp {
                state.stamp = stamp;
                state.since = now;
                state.retry_at = None;
                state.retry_delay = RETRY_FIRST;
            }
            let settled = startup || complete.contains(path) || now.duration_since(state.since) >= SETTLE;
            let due = state.retry_at.is_some_and(|at| now >= at);
            if settled && (state.handled != Some(stamp) || due) {
                state.handled = Some(stamp);
                state.retry_at = None;
                ready.push(path.clone());
            }
        }
        let gone: Vec<PathBuf> = self.0.keys().filter(|p| !present.contains(p)).cloned().collect();
        let mut changes = Vec::new();
        let mut renamed = HashSet::new();
        for path in ready {
            // Same content as a loaded file that just disappeared: it moved.
            let from = match read_content(&path).await {
                // A candidate renamed over its live file is a new version of it, not a move.
                Ok(content) => gone
                    .iter()
                    .find(|g| !renamed.contains(*g) && candidate_for(g).is_none() && self.0.get(*g).and_then(|s| s.loaded.as_ref()) == Some(&content))
                    .cloned(),
                Err(_) => None,
            };
            match from {
                Some(from) => {
                    let loaded = self.0.get_mut(&from).and_then(|s| s.loaded.take());
                    self.0.get_mut(&path).expect("present").loaded = loaded;
                    renamed.insert(from.clone());
                    changes.push(Change::Renamed { from, to: path });
                }
                None => changes.push(Change::Ready(path)),
            }
        }
        for path in gone {
            let state = self.0.remove(&path).expect("known");
            if !renamed.contains(&path) && state.loaded.is_some() {
                changes.push(Change::Removed(path));
            }
        }
        Ok(changes)
    }

    /// What was loaded from `path`, if anything.
    pub fn loaded(&self, path: &Path) -> Option<&Content> {
        self.0.get(path).and_then(|s| s.loaded.as_ref())
    }

    /// Records what now runs from `path` (`None`: nothing does).
    pub fn set_loaded(&mut self, path: &Path, content: Option<Content>) {
        if let Some(state) = self.0.get_mut(path) {
            state.loaded = content;
            state.retry_delay = RETRY_FIRST;
        }
    }

    /// Has `path` looked at again on the next scan.
    pub fn unhandle(&mut self, path: &Path) {
        if let Some(state) = self.0.get_mut(path) {
            state.handled = None;
        }
    }

    /// Has `path` looked at again after a growing delay, though it does not change.
    pub fn retry_later(&mut self, path: &Path) -> Option<Duration> {
        let state = self.0.get_mut(path)?;
        let delay = state.retry_delay;
        state.retry_at = Some(Instant::now() + delay);
        state.retry_delay = (delay * 2).min(RETRY_MAX);
        Some(delay)
    }

    /// When a file first appeared with its current stamp.
    pub fn since(&self, path: &Path) -> Option<Instant> {
        self.0.get(path).map(|s| s.since)
    }
}

/// The plugin's identity on disk: the digest of the `.wasm` and the settings text.
pub async fn read_content(path: &Path) -> std::io::Result<Content> {
    let wasm = tokio::fs::read(path).await?;
    let settings = tokio::fs::read_to_string(settings_path(path)).await.unwrap_or_default();
    Ok((Digest::of(&wasm), settings))
}

/// Whether a filesystem event may mean a changed file. Opening, reading and closing a file
/// unchanged do not — and the scan itself reads the files: were those events to wake it, a file
/// it cannot load yet would be examined again and again without pause.
pub fn changes_something(event: &notify::Event) -> bool {
    use notify::EventKind::Access;
    use notify::event::{AccessKind, AccessMode};
    match event.kind {
        Access(AccessKind::Close(AccessMode::Write)) => true,
        Access(_) => false,
        _ => true,
    }
}

/// Marks files whose writer is known to be done: renamed into place, or closed after writing.
pub fn done_writing(event: &notify::Event, complete: &mut HashSet<PathBuf>) {
    use notify::EventKind::{Access, Modify};
    use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
    match event.kind {
        Access(AccessKind::Close(AccessMode::Write)) | Modify(ModifyKind::Name(RenameMode::To)) => {
            complete.extend(event.paths.iter().map(|p| p.with_extension("wasm")));
        }
        Modify(ModifyKind::Name(RenameMode::Both)) => complete.extend(event.paths.last().map(|p| p.with_extension("wasm"))),
        _ => {}
    }
}

/// A file's name without `.wasm`: what a rejection names when no plugin name is known.
pub fn stem(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controllers_flag_works_like_kube_controller_managers() {
        let all: ControllerFilter = "*,-noisy".parse().unwrap();
        assert!(all.enables("sample") && !all.enables("noisy"));
        let only: ControllerFilter = "sample, reboot".parse().unwrap();
        assert!(only.enables("sample") && only.enables("reboot") && !only.enables("other"));
        assert!("-noisy".parse::<ControllerFilter>().unwrap_err().contains("use `*`"));
        assert!("Bad_Name".parse::<ControllerFilter>().unwrap_err().contains("not a plugin name"));
        assert!(ControllerFilter::default().enables("anything"));
    }

    #[tokio::test]
    async fn new_changed_renamed_and_removed_files_and_retries() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = Files::default();
        let a = dir.path().join("a.wasm");
        std::fs::write(&a, b"one").unwrap();
        assert_eq!(files.scan(dir.path(), &HashSet::new(), true).await.unwrap(), [Change::Ready(a.clone())]);
        assert!(files.scan(dir.path(), &HashSet::new(), true).await.unwrap().is_empty(), "handled");
        files.set_loaded(&a, Some(read_content(&a).await.unwrap()));
        // A refusal that may pass: looked at again after the delay, unchanged.
        assert_eq!(files.retry_later(&a), Some(RETRY_FIRST));
        files.0.get_mut(&a).unwrap().retry_at = Some(Instant::now());
        let settled = HashSet::from([a.clone()]);
        assert_eq!(files.scan(dir.path(), &settled, false).await.unwrap(), [Change::Ready(a.clone())]);
        assert!(files.scan(dir.path(), &settled, false).await.unwrap().is_empty(), "once");
        // Settings beside it are part of it.
        std::fs::write(dir.path().join("a.toml"), "x = 1").unwrap();
        let complete = HashSet::from([a.clone()]);
        assert_eq!(files.scan(dir.path(), &complete, false).await.unwrap(), [Change::Ready(a.clone())]);
        files.set_loaded(&a, Some(read_content(&a).await.unwrap()));
        // Moved with its settings: a rename.
        let b = dir.path().join("b.wasm");
        std::fs::rename(&a, &b).unwrap();
        std::fs::rename(dir.path().join("a.toml"), dir.path().join("b.toml")).unwrap();
        let complete = HashSet::from([b.clone()]);
        assert_eq!(files.scan(dir.path(), &complete, false).await.unwrap(), [Change::Renamed { from: a.clone(), to: b.clone() }]);
        assert!(files.loaded(&b).is_some());
        std::fs::remove_file(&b).unwrap();
        assert_eq!(files.scan(dir.path(), &HashSet::new(), false).await.unwrap(), [Change::Removed(b)]);
    }
}
