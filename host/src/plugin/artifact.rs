//! Precompiled plugins on disk, keyed by the sha256 of the `.wasm` file and the engine
//! configuration: a restart with cached plugins compiles nothing. Each artifact has a checksum
//! beside it (`.sha256`), verified before loading, so a corrupt or truncated entry is recompiled —
//! never handed to wasmtime's (unsafe) deserializer. A verified artifact is mapped from its file,
//! not copied into memory: its code pages are the page cache's, read in as they run and shared
//! with every other host on the node that maps them (a Python or JS plugin's is 35 MB). Each load
//! marks its entry as used, for the cache's size limit (`crate::cache_dir`), which evicts the
//! least recently used entries but none this process maps.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};
use wasmtime::component::Component;

use super::Digest;
use crate::runtime::{Runtime, RuntimeError};

pub struct ArtifactCache {
    dir: PathBuf,
}

/// Where a component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Loaded from the artifact cache.
    Cache,
    /// Compiled now (and stored, if the cache is writable).
    Compiled,
    /// Shared with a plugin already running from the same digest.
    Shared,
}

impl ArtifactCache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ArtifactCache { dir: dir.into() }
    }

    /// `$XDG_CACHE_HOME/kubewasm/artifacts`, else `~/.cache/kubewasm/artifacts`.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from).or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
        Some(base.join("kubewasm").join("artifacts"))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The component of `digest` if the cache holds a verified artifact of it (what a compiler
    /// process stored, see `plugin::compiler`); never compiles.
    pub fn cached(&self, runtime: &Runtime, digest: &Digest) -> Option<Component> {
        self.load(runtime, &self.path(runtime, digest))
    }

    fn path(&self, runtime: &Runtime, digest: &Digest) -> PathBuf {
        self.dir.join(format!("{digest}-{}.cwasm", runtime.artifact_tag()))
    }

    /// The component from the cache, or compiled from `wasm` and stored. CPU-heavy when it
    /// compiles: call it from a blocking thread.
    pub fn load_or_compile(&self, runtime: &Runtime, digest: &Digest, wasm: &[u8]) -> Result<(Component, Origin), RuntimeError> {
        let path = self.path(runtime, digest);
        if let Some(component) = self.load(runtime, &path) {
            return Ok((component, Origin::Cache));
        }
        let component = runtime.compile(wasm)?;
        if let Err(e) = self.store(runtime, &component, &path) {
            // The cache is an optimization: a read-only or full disk only costs a recompile later.
            tracing::warn!(path = %path.display(), "cannot store compiled plugin: {e}");
        }
        Ok((component, Origin::Compiled))
    }

    fn load(&self, runtime: &Runtime, path: &Path) -> Option<Component> {
        let expected = std::fs::read(checksum_path(path)).ok()?;
        // One open file is checked and then mapped (through /proc/self/fd, where there is one):
        // a file renamed over the entry between the check and the map cannot take its place.
        let file = std::fs::File::open(path).ok()?;
        if reader_sha256(&file).ok()?.as_slice() != expected.as_slice() {
            tracing::warn!(path = %path.display(), "artifact cache entry is corrupt; recompiling");
            return None;
        }
        let pinned = PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file)));
        let mapped = if pinned.exists() { pinned } else { path.to_path_buf() };
        // SAFETY: the file is, byte for byte, what `store` wrote from `Runtime::serialize` with
        // this artifact tag (the checksum above proves it is unmodified, read from the very file
        // mapped here), and entries are only ever replaced by renaming a new file over them,
        // never rewritten in place, so the mapping keeps the verified bytes. What this does not
        // cover: someone else who may write the cache directory rewriting a file in place — the
        // directory must be the host's alone (the chart's emptyDir is).
        match unsafe { runtime.deserialize_file(&mapped) } {
            Ok(component) => {
                crate::cache_dir::touch(path);
                Some(component)
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), "artifact cache entry unusable ({e}); recompiling");
                None
            }
        }
    }

    fn store(&self, runtime: &Runtime, component: &Component, path: &Path) -> std::io::Result<()> {
        let body = runtime.serialize(component).map_err(std::io::Error::other)?;
        std::fs::create_dir_all(&self.dir)?;
        // Each written to a temporary file and renamed: a reader never sees half of one. The
        // checksum goes last, so an artifact without a matching one is never loaded.
        let persist = |bytes: &[u8], to: &Path| -> std::io::Result<()> {
            let mut file = tempfile::NamedTempFile::new_in(&self.dir)?;
            file.write_all(bytes)?;
            file.persist(to).map_err(|e| e.error)?;
            Ok(())
        };
        persist(&body, path)?;
        persist(&Sha256::digest(&body), &checksum_path(path))
    }
}

fn checksum_path(artifact: &Path) -> PathBuf {
    artifact.with_extension("cwasm.sha256")
}

/// The sha256 of an open file, read in pieces (an artifact is tens of MB).
fn reader_sha256(mut file: &std::fs::File) -> std::io::Result<[u8; 32]> {
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hasher.finalize().into())
}
