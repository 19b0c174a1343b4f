//! The host's disk cache (`--cache-dir`: compiled artifacts, pulled modules, the Plugins' files)
//! kept under a size limit (`--cache-max-bytes`), so that a pod's `emptyDir` never fills and the
//! kubelet never evicts it. Entries are evicted least recently used first (a use sets the file's
//! modification time: [`touch`]); only compiled artifacts (`*.cwasm`, with their checksum) and
//! pulled modules (`layers/*.wasm`) are evicted — everything else is counted but kept, and so is
//! a file still being written (a `.tmp*` name).
//!
//! An artifact a running plugin maps is never evicted: this process's mappings are read from
//! `/proc/self/maps` before each sweep. What it relies on besides: on Linux, removing a file that
//! another process (a second host sharing the directory) maps or has open leaves that mapping
//! intact until it is closed — only the name goes, and with it the disk space once the last user
//! is done; an evicted artifact is recompiled, an evicted module pulled again, when next needed.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

/// What the chart's 2 GiB `emptyDir` holds with headroom for modules being pulled and the
/// Plugins' files.
pub const DEFAULT_MAX_BYTES: u64 = 1536 << 20;
/// How often the cache is measured.
const SWEEP_EVERY: Duration = Duration::from_secs(15);

/// Marks `path` as just used, for the least-recently-used order. Best effort: a file that cannot
/// be touched is only evicted a little earlier.
pub fn touch(path: &Path) {
    if let Ok(file) = std::fs::File::open(path) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// What one sweep found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Bytes in the cache before the sweep.
    pub before: u64,
    /// Bytes after it.
    pub after: u64,
    pub evicted: usize,
}

/// One evictable entry: the file and what goes with it.
struct Entry {
    files: Vec<PathBuf>,
    bytes: u64,
    used: SystemTime,
}

/// The limit over a set of directories.
#[derive(Debug, Clone)]
pub struct CacheLimit {
    dirs: Vec<PathBuf>,
    max_bytes: u64,
}

impl CacheLimit {
    /// `dirs` are walked whole (a file reachable from two of them counts once).
    pub fn new(dirs: Vec<PathBuf>, max_bytes: u64) -> Self {
        CacheLimit { dirs, max_bytes }
    }

    /// Measures the cache and evicts until it is within the limit (or nothing evictable is left).
    pub fn sweep(&self) -> Sweep {
        let mapped = mapped_files();
        let mut seen = HashSet::new();
        let mut total: u64 = 0;
        let mut entries: HashMap<PathBuf, Entry> = HashMap::new();
        for dir in &self.dirs {
            // As /proc/self/maps names files: absolute, through no symlink.
            let dir = dir.canonicalize().unwrap_or_else(|_| dir.clone());
            walk(&dir, &mut |path, meta| {
                use std::os::unix::fs::MetadataExt;
                if !seen.insert((meta.dev(), meta.ino())) {
                    return;
                }
                total = total.saturating_add(meta.len());
                let Some(main) = evictable(path) else { return };
                if mapped.contains(&main) {
                    return;
                }
                let entry = entries.entry(main).or_insert_with(|| Entry { files: Vec::new(), bytes: 0, used: SystemTime::UNIX_EPOCH });
                entry.files.push(path.to_path_buf());
                entry.bytes += meta.len();
                entry.used = entry.used.max(meta.modified().unwrap_or(SystemTime::UNIX_EPOCH));
            });
        }
        let mut sweep = Sweep { before: total, after: total, evicted: 0 };
        if total <= self.max_bytes {
            return sweep;
        }
        let mut order: Vec<Entry> = entries.into_values().collect();
        order.sort_by_key(|e| e.used);
        for entry in order {
            if sweep.after <= self.max_bytes {
                break;
            }
            // The main file first: an entry without it is never used, whatever remains.
            let mut files = entry.files;
            files.sort_by_key(|f| f.extension().is_some_and(|e| e == "sha256"));
            if files.iter().all(|f| std::fs::remove_file(f).is_ok() || !f.exists()) {
                sweep.after = sweep.after.saturating_sub(entry.bytes);
                sweep.evicted += 1;
            }
        }
        sweep
    }

    /// Sweeps now and every few seconds until `shutdown`; logs what it evicts.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            let limit = self.clone();
            if let Ok(sweep) = tokio::task::spawn_blocking(move || limit.sweep()).await
                && sweep.evicted > 0
            {
                tracing::info!(
                    before = sweep.before,
                    after = sweep.after,
                    evicted = sweep.evicted,
                    limit = self.max_bytes,
                    "cache over its limit: evicted the least recently used entries"
                );
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(SWEEP_EVERY) => {}
            }
        }
    }
}

/// The entry a file belongs to, if it may be evicted: a compiled artifact (`X.cwasm`, its
/// checksum `X.cwasm.sha256`) or a pulled module (`layers/X.wasm`). Files being written
/// (`.tmp*`) are not.
fn evictable(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    if name.starts_with(".tmp") {
        return None;
    }
    if let Some(artifact) = name.strip_suffix(".sha256").filter(|n| n.ends_with(".cwasm")) {
        return Some(path.with_file_name(artifact));
    }
    if name.ends_with(".cwasm") {
        return Some(path.to_path_buf());
    }
    let in_layers = path.parent().and_then(Path::file_name).is_some_and(|d| d == "layers");
    (in_layers && name.ends_with(".wasm")).then(|| path.to_path_buf())
}

/// Every regular file under `dir` (symlinks not followed).
fn walk(dir: &Path, visit: &mut dyn FnMut(&Path, &std::fs::Metadata)) {
    let Ok(read) = std::fs::read_dir(dir) else { return };
    for entry in read.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        let path = entry.path();
        if meta.is_dir() {
            walk(&path, visit);
        } else if meta.is_file() {
            visit(&path, &meta);
        }
    }
}

/// The files this process maps (wasmtime maps artifacts it loads), as absolute paths. Empty where
/// there is no `/proc`.
fn mapped_files() -> HashSet<PathBuf> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return HashSet::new() };
    maps.lines().filter_map(|line| line.split_once('/').map(|(_, path)| PathBuf::from(format!("/{path}")))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &Path, bytes: usize, age: u64) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, vec![0u8; bytes]).unwrap();
        let file = std::fs::File::open(path).unwrap();
        file.set_modified(SystemTime::now() - Duration::from_secs(age)).unwrap();
    }

    #[test]
    fn the_least_recently_used_entries_go_first_and_only_evictable_ones() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        file(&root.join("a-tag.cwasm"), 400, 300);
        file(&root.join("a-tag.cwasm.sha256"), 32, 300);
        file(&root.join("b-tag.cwasm"), 400, 100);
        file(&root.join("oci/layers/c.wasm"), 400, 200);
        file(&root.join("oci/manifests/r/c"), 10, 1000);
        file(&root.join("plugins/1/p.wasm"), 300, 1000);
        file(&root.join("oci/layers/.tmpXYZ"), 300, 1000);
        let limit = CacheLimit::new(vec![root.to_path_buf()], 1200);
        let sweep = limit.sweep();
        assert_eq!(sweep.before, 400 + 32 + 400 + 400 + 10 + 300 + 300);
        // a (oldest) and then c go; b, the newest, stays.
        assert_eq!(sweep.evicted, 2, "{sweep:?}");
        assert_eq!(sweep.after, 400 + 10 + 300 + 300);
        assert!(!root.join("a-tag.cwasm").exists() && !root.join("a-tag.cwasm.sha256").exists() && !root.join("oci/layers/c.wasm").exists());
        assert!(root.join("b-tag.cwasm").exists() && root.join("plugins/1/p.wasm").exists() && root.join("oci/layers/.tmpXYZ").exists());
        // Touched, b is now the newest; under the limit nothing goes.
        touch(&root.join("b-tag.cwasm"));
        assert_eq!(CacheLimit::new(vec![root.to_path_buf()], 2000).sweep().evicted, 0);
    }

    #[test]
    #[cfg(target_env = "gnu")]
    fn a_file_this_process_maps_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mapped-tag.cwasm");
        file(&path, 4096, 1000);
        let file = std::fs::File::open(&path).unwrap();
        // The artifact cache's loads map files just so (wasmtime's `deserialize_file`).
        let map = unsafe { libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_PRIVATE, std::os::fd::AsRawFd::as_raw_fd(&file), 0) };
        assert_ne!(map, libc::MAP_FAILED);
        let sweep = CacheLimit::new(vec![dir.path().to_path_buf()], 0).sweep();
        assert_eq!((sweep.evicted, path.exists()), (0, true));
        unsafe { libc::munmap(map, 4096) };
        assert_eq!(CacheLimit::new(vec![dir.path().to_path_buf()], 0).sweep().evicted, 1);
    }
}
