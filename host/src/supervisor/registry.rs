//! The plugins of a host by name: starting (waiting for a resource to be served, or for its
//! caches to sync) or running. A name belongs to one file, and a finalizer to one plugin, across
//! both states, so a second file cannot take over another plugin's field manager, identity or
//! finalizer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::controller::Controller;

/// Tells one start of a plugin from the next.
pub type Generation = u64;

/// What stands under a name.
pub enum Slot {
    Starting { path: PathBuf, finalizer: Option<String>, stop: CancellationToken, generation: Generation },
    Running { path: PathBuf, controller: Arc<Controller>, stop: CancellationToken, generation: Generation },
}

impl Slot {
    pub fn path(&self) -> &Path {
        match self {
            Slot::Starting { path, .. } | Slot::Running { path, .. } => path,
        }
    }

    fn generation(&self) -> Generation {
        match self {
            Slot::Starting { generation, .. } | Slot::Running { generation, .. } => *generation,
        }
    }

    fn finalizers(&self) -> Vec<String> {
        match self {
            Slot::Starting { finalizer, .. } => finalizer.iter().cloned().collect(),
            Slot::Running { controller, .. } => {
                let version = controller.version();
                version.manifest.finalizer.iter().chain(&version.previous_finalizers).cloned().collect()
            }
        }
    }

    /// Stops what runs or starts under it (gracefully: running reconciles finish).
    pub async fn stop(self) {
        match self {
            Slot::Starting { stop, .. } => stop.cancel(),
            Slot::Running { controller, stop, .. } => {
                stop.cancel();
                controller.stopped().await;
            }
        }
    }
}

/// Why a plugin may not take a name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    #[error("plugin name {name:?} is already taken by {}", other.display())]
    Name { name: String, other: PathBuf },
    #[error("finalizer {finalizer:?} is already used by plugin {other:?}")]
    Finalizer { finalizer: String, other: String },
}

#[derive(Default)]
pub struct Registry {
    slots: Mutex<BTreeMap<String, Slot>>,
    generations: AtomicU64,
}

impl Registry {
    /// A new generation for a start.
    pub fn generation(&self) -> Generation {
        self.generations.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Checks that `path` may run plugin `name` with `finalizer`: no other file holds the name,
    /// no other plugin the finalizer.
    pub fn check(&self, name: &str, path: &Path, finalizer: Option<&str>) -> Result<(), ClaimError> {
        check(&self.slots.lock(), name, path, finalizer)
    }

    /// Puts `slot` under `name` if [`Registry::check`] passes, in one step (no other file can
    /// take the name in between), returning what was there: the caller stops it.
    pub fn claim(&self, name: &str, finalizer: Option<&str>, slot: Slot) -> Result<Option<Slot>, ClaimError> {
        let mut slots = self.slots.lock();
        check(&slots, name, slot.path(), finalizer)?;
        Ok(slots.insert(name.into(), slot))
    }

    /// Turns a starting plugin into a running one, unless it was stopped or replaced meanwhile
    /// (then `false`).
    pub fn started(&self, name: &str, generation: Generation, controller: Arc<Controller>) -> bool {
        let mut slots = self.slots.lock();
        match slots.get(name) {
            Some(Slot::Starting { path, stop, generation: g, .. }) if *g == generation => {
                let (path, stop) = (path.clone(), stop.clone());
                slots.insert(name.into(), Slot::Running { path, controller, stop, generation });
                true
            }
            _ => false,
        }
    }

    /// Takes the slot of `name` out, if it is still of `generation` (or whatever is there with
    /// `None`).
    pub fn take(&self, name: &str, generation: Option<Generation>) -> Option<Slot> {
        let mut slots = self.slots.lock();
        let ours = slots.get(name).is_some_and(|slot| generation.is_none_or(|g| slot.generation() == g));
        if ours { slots.remove(name) } else { None }
    }

    /// The name whose plugin comes from `path`.
    pub fn name_at(&self, path: &Path) -> Option<String> {
        self.slots.lock().iter().find(|(_, slot)| slot.path() == path).map(|(name, _)| name.clone())
    }

    /// The running controller of `name`.
    pub fn controller(&self, name: &str) -> Option<Arc<Controller>> {
        match self.slots.lock().get(name) {
            Some(Slot::Running { controller, .. }) => Some(controller.clone()),
            _ => None,
        }
    }

    /// Follows a file that moved.
    pub fn rename(&self, from: &Path, to: &Path) -> Option<String> {
        let mut slots = self.slots.lock();
        let (name, slot) = slots.iter_mut().find(|(_, slot)| slot.path() == from)?;
        match slot {
            Slot::Starting { path, .. } | Slot::Running { path, .. } => *path = to.to_path_buf(),
        }
        Some(name.clone())
    }

    /// Running controllers, with the file each comes from.
    pub fn running(&self) -> Vec<(Arc<Controller>, PathBuf)> {
        self.slots
            .lock()
            .values()
            .filter_map(|slot| match slot {
                Slot::Running { controller, path, .. } => Some((controller.clone(), path.clone())),
                Slot::Starting { .. } => None,
            })
            .collect()
    }

    /// Plugins not serving yet: starting, or running with caches not synced.
    pub fn waiting(&self) -> Vec<String> {
        self.slots
            .lock()
            .iter()
            .filter(|(_, slot)| match slot {
                Slot::Starting { .. } => true,
                Slot::Running { controller, .. } => !controller.is_synced(),
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.lock().is_empty()
    }
}

/// The name and finalizer rules, on the slots as they are.
fn check(slots: &BTreeMap<String, Slot>, name: &str, path: &Path, finalizer: Option<&str>) -> Result<(), ClaimError> {
    if let Some(slot) = slots.get(name)
        && slot.path() != path
    {
        return Err(ClaimError::Name { name: name.into(), other: slot.path().to_path_buf() });
    }
    if let Some(finalizer) = finalizer
        && let Some((other, _)) = slots.iter().find(|(other, slot)| *other != name && slot.finalizers().iter().any(|f| f == finalizer))
    {
        return Err(ClaimError::Finalizer { finalizer: finalizer.into(), other: other.clone() });
    }
    Ok(())
}
