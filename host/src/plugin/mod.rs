//! Plugins as files: reading a `.wasm` (and its `NAME.toml` settings), its digest, the artifact
//! cache, and loading — check the file, compile or fetch the artifact, ask the plugin to
//! describe itself, validate. What a loaded plugin then does is the controller's business.
//!
//! Loading is bounded before anything is admitted: a file is at most [`MAX_MODULE_BYTES`], a
//! compile runs in a child process under a memory limit and a deadline ([`compiler`]) when the
//! loader has an artifact cache and a compiler, and `describe` runs under [`DESCRIBE_DEADLINE`]
//! and, in a host, inside the plugin memory budget ([`Loader::with_budget`]).

pub mod artifact;
pub mod compiler;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

use self::artifact::{ArtifactCache, Origin};
use self::compiler::{ChildCompiler, CompileError};
use crate::budget::{BudgetError, MemoryBudget};
use crate::manifest::LimitPolicy;
use crate::runtime::{DescribeError, Described, Prepared, Runtime, RuntimeError, WeakPrepared};

/// The largest plugin file loaded. The largest real plugins (Python, the interpreter inside) are
/// 19 MB; Cranelift's time and memory grow with a module's code.
pub const MAX_MODULE_BYTES: u64 = 64 << 20;

/// How long `describe` may take when a plugin is loaded, whatever its settings ask for its
/// calls: it parses settings and returns a manifest, and it runs before the plugin is admitted.
pub const DESCRIBE_DEADLINE: Duration = Duration::from_secs(10);

/// The sha256 of a plugin file: its identity. Same digest, same plugin.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest([u8; 32]);

impl Digest {
    pub fn of(bytes: &[u8]) -> Self {
        Digest(Sha256::digest(bytes).into())
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{self}")
    }
}

/// Why a plugin file could not be loaded. Each variant names the step that failed; the message
/// says what to fix.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read it: {0}")]
    Read(#[source] std::io::Error),
    #[error("it is not WebAssembly (no \\0asm header)")]
    NotWebAssembly,
    #[error("it is truncated ({0} bytes)")]
    Truncated(usize),
    #[error("it is more than {MAX_MODULE_BYTES} bytes, the most a plugin may have")]
    TooLarge,
    #[error(
        "it is a core WebAssembly module, not a component: build Rust plugins with `--target wasm32-wasip2`, or wrap the module with `wasm-tools component new`"
    )]
    CoreModule,
    #[error("{0}")]
    Runtime(#[from] RuntimeError),
    #[error("settings file {path}: {message}")]
    Settings { path: PathBuf, message: String },
    #[error("[kubewasm] options: {0}")]
    Options(String),
    #[error("{0}")]
    Compile(#[from] CompileError),
    #[error(
        "describe would run under its memory limit of {} bytes, but only {} of the host's {} bytes of plugin memory (--plugin-memory-budget) are free: lower `memory-mib` in its [kubewasm] settings, or raise the budget",
        .0.needed, .0.available, .0.total
    )]
    DescribeMemory(#[source] BudgetError),
    #[error("{0}")]
    Describe(#[from] DescribeError),
    #[error("compilation was interrupted: {0}")]
    Interrupted(String),
}

/// The operator's overrides for one plugin: the `[kubewasm]` table of `NAME.toml`. They win over
/// what the plugin's manifest asks for (limits still within the host's maxima); the rest of the
/// file is the plugin's own settings.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct PluginOptions {
    /// Client-side rate limit of the plugin's writes (default: `--max-plugin-qps`, 100 per second).
    pub qps: Option<f64>,
    /// Writes allowed at once before `qps` pacing starts (default: `--max-plugin-burst`, 200).
    pub burst: Option<u32>,
    /// Concurrent reconciles, instead of the manifest's `max-concurrency`.
    pub max_concurrency: Option<u32>,
    /// Per-call deadline in milliseconds, instead of the manifest's.
    pub deadline_ms: Option<u64>,
    /// Memory per instance in MiB, instead of the manifest's.
    pub memory_mib: Option<u64>,
    /// Share of failing objects that rolls a hot-reloaded version back, instead of the host's
    /// `--rollback-threshold` (0 turns rollback off for this plugin).
    pub rollback_threshold: Option<f64>,
    /// Reconciles a hot-reloaded version runs before it may be rolled back (default 20).
    pub rollback_min_reconciles: Option<u64>,
    /// A candidate (`NAME.next.wasm`) that agrees with the live version on this many reconciles
    /// in its shadow run, and never differs, errs or faults, is promoted; 0 never promotes
    /// automatically. Instead of the host's `--promote-after`; read from the candidate's
    /// settings.
    pub promote_after: Option<u64>,
    /// `false`: this plugin is not sharded across the ring's replicas (it must see every
    /// object at once); it runs on the ring's leader only. Sharded by default when the host
    /// runs in a ring (`--shard-ring`).
    pub sharding: Option<bool>,
}

/// Checks a rollback threshold, from the command line or `NAME.toml`: a share of objects.
pub fn check_rollback_threshold(threshold: f64) -> Result<f64, String> {
    if (0.0..=1.0).contains(&threshold) {
        Ok(threshold)
    } else {
        Err(format!("rollback threshold {threshold} is not a share between 0 and 1 (0 turns rollback off)"))
    }
}

/// The host-side table in `NAME.toml`.
const OPTIONS_TABLE: &str = "kubewasm";

/// A plugin file, loaded and described, ready to run.
#[derive(Clone)]
pub struct LoadedPlugin {
    pub path: PathBuf,
    pub digest: Digest,
    pub prepared: Prepared,
    pub described: Described,
    /// The settings as JSON text, for every new instance's `describe`.
    pub settings: String,
    pub options: PluginOptions,
    pub origin: Origin,
    pub load_time: Duration,
}

impl fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("path", &self.path)
            .field("digest", &self.digest)
            .field("name", &self.described.manifest.name)
            .field("version", &self.described.manifest.version)
            .finish_non_exhaustive()
    }
}

/// Loads plugin files: one compilation at a time (compiling a Python or JS component peaks at
/// hundreds of MB; loads from the artifact cache or shared code do not wait for it), artifacts
/// cached on disk, and the compiled code of a digest shared by every plugin loaded from it while
/// any of them runs (50 controllers from one module with 50 settings map its code once).
pub struct Loader {
    runtime: Arc<Runtime>,
    artifacts: Option<Arc<ArtifactCache>>,
    policy: LimitPolicy,
    /// Where compiles run when there is an artifact cache; `None`: in this process.
    compiler: Option<ChildCompiler>,
    /// What `describe` holds its memory limit in while it runs; `None`: nothing.
    budget: Option<MemoryBudget>,
    compiling: tokio::sync::Mutex<()>,
    /// Files read and compiled at once, one per core: fifty plugins starting together would
    /// otherwise each hold their whole module in memory while they queue for the compiler. Not
    /// held while a plugin describes itself: a slow describe holds up no other load.
    reading: tokio::sync::Semaphore,
    loaded: parking_lot::Mutex<std::collections::HashMap<Digest, WeakPrepared>>,
}

impl Loader {
    /// A loader that compiles in this process and describes outside any budget: for one-shot
    /// commands and libraries. A host adds [`Loader::with_compiler`] and [`Loader::with_budget`].
    pub fn new(runtime: Arc<Runtime>, artifacts: Option<ArtifactCache>, policy: LimitPolicy) -> Self {
        let reading = tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(2, usize::from));
        Loader {
            runtime,
            artifacts: artifacts.map(Arc::new),
            policy,
            compiler: None,
            budget: None,
            compiling: Default::default(),
            reading,
            loaded: Default::default(),
        }
    }

    /// Compiles in child processes (when there is an artifact cache for them to store into).
    pub fn with_compiler(mut self, compiler: ChildCompiler) -> Self {
        self.compiler = Some(compiler);
        self
    }

    /// Runs each `describe` inside `budget`: its instance's memory limit is held there while it
    /// runs (before the plugin is admitted), and a plugin whose limit does not fit is refused
    /// before it is instantiated.
    pub fn with_budget(mut self, budget: MemoryBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The prepared component of `digest`, shared with a plugin already loaded from it, from the
    /// artifact cache, or compiled now.
    async fn prepared(&self, digest: Digest, wasm: Vec<u8>) -> Result<(Prepared, Origin), LoadError> {
        if let Some(found) = self.find(digest).await? {
            return Ok(found);
        }
        let _one_at_a_time = self.compiling.lock().await;
        // Compiled by another load while this one waited?
        if let Some(found) = self.find(digest).await? {
            return Ok(found);
        }
        let component = match (&self.compiler, &self.artifacts) {
            (Some(compiler), Some(cache)) => {
                compiler.compile(cache.dir(), self.runtime.config(), &wasm).await?;
                self.cached(digest)
                    .await?
                    .ok_or_else(|| CompileError::Failed(format!("the compiler process stored no artifact in {}", cache.dir().display())))?
            }
            _ => {
                let (runtime, artifacts) = (self.runtime.clone(), self.artifacts.clone());
                let compiled = tokio::task::spawn_blocking(move || match artifacts {
                    Some(cache) => cache.load_or_compile(&runtime, &digest, &wasm).map(|(c, _)| c),
                    None => runtime.compile(&wasm),
                });
                compiled.await.map_err(|e| LoadError::Interrupted(e.to_string()))??
            }
        };
        Ok((self.share(digest, &component)?, Origin::Compiled))
    }

    /// The component of `digest` if it is loaded already or in the artifact cache.
    async fn find(&self, digest: Digest) -> Result<Option<(Prepared, Origin)>, LoadError> {
        if let Some(prepared) = self.loaded.lock().get(&digest).and_then(WeakPrepared::upgrade) {
            return Ok(Some((prepared, Origin::Shared)));
        }
        match self.cached(digest).await? {
            Some(component) => Ok(Some((self.share(digest, &component)?, Origin::Cache))),
            None => Ok(None),
        }
    }

    /// The artifact cache's verified artifact of `digest` (checksummed off the executor).
    async fn cached(&self, digest: Digest) -> Result<Option<wasmtime::component::Component>, LoadError> {
        let Some(cache) = self.artifacts.clone() else { return Ok(None) };
        let runtime = self.runtime.clone();
        tokio::task::spawn_blocking(move || cache.cached(&runtime, &digest)).await.map_err(|e| LoadError::Interrupted(e.to_string()))
    }

    /// Prepares a component and remembers it, for other plugins loaded from the same digest.
    fn share(&self, digest: Digest, component: &wasmtime::component::Component) -> Result<Prepared, LoadError> {
        let prepared = self.runtime.prepare(component)?;
        let mut loaded = self.loaded.lock();
        loaded.retain(|_, weak| weak.upgrade().is_some());
        loaded.insert(digest, prepared.downgrade());
        Ok(prepared)
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// Reads, checks, compiles (or fetches) and describes the plugin at `path`, with the
    /// settings in `NAME.toml` beside it.
    pub async fn load(&self, path: &Path) -> Result<LoadedPlugin, LoadError> {
        let started = Instant::now();
        let (prepared, origin, digest, settings, options) = {
            let _reading = self.reading.acquire().await.expect("never closed");
            let wasm = read_module(path).await?;
            check_header(&wasm)?;
            let (settings, options) = read_settings(path).await?;
            let digest = Digest::of(&wasm);
            let (prepared, origin) = self.prepared(digest, wasm).await?;
            (prepared, origin, digest, settings, options)
        };
        let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        // A plugin that needs more memory than the default just to start can be given it in its
        // settings (each of its instances describes itself under that limit too); the memory is
        // held in the budget meanwhile. The deadline is the host's: describe runs before the
        // plugin is admitted, and nothing it asks for may make it longer.
        let describe_limits = crate::manifest::Limits {
            deadline: DESCRIBE_DEADLINE,
            memory_bytes: options.memory_mib.map_or(self.policy.default_memory_bytes, |mib| mib.saturating_mul(1 << 20).min(self.policy.max_memory_bytes)),
        };
        let _held = self.budget.as_ref().map(|budget| budget.reserve(describe_limits.memory_bytes)).transpose().map_err(LoadError::DescribeMemory)?;
        let mut described = self.runtime.describe(&prepared, &file_name, &settings, &self.policy, describe_limits).await?;
        described.limits = self.apply_overrides(&described.manifest, &options)?;
        Ok(LoadedPlugin { path: path.to_path_buf(), digest, prepared, described, settings, options, origin, load_time: started.elapsed() })
    }
}

impl Loader {
    /// The limits in force: the manifest's, overridden by the operator's options, checked
    /// against the host's maxima.
    fn apply_overrides(&self, manifest: &crate::manifest::Manifest, options: &PluginOptions) -> Result<crate::manifest::Limits, LoadError> {
        if let Some(threshold) = options.rollback_threshold {
            check_rollback_threshold(threshold).map_err(LoadError::Options)?;
        }
        let mut manifest = manifest.clone();
        if let Some(ms) = options.deadline_ms {
            manifest.limits.deadline = Some(Duration::from_millis(ms));
        }
        if let Some(mib) = options.memory_mib {
            manifest.limits.memory_bytes = Some(mib.saturating_mul(1 << 20));
        }
        if let Some(workers) = options.max_concurrency {
            manifest.max_concurrency = workers;
        }
        manifest.validate(&self.policy).map_err(|e| LoadError::Options(e.to_string()))
    }
}

/// Reads a plugin file, refusing one over [`MAX_MODULE_BYTES`] without reading more of it.
async fn read_module(path: &Path) -> Result<Vec<u8>, LoadError> {
    use tokio::io::AsyncReadExt;
    let file = tokio::fs::File::open(path).await.map_err(LoadError::Read)?;
    let mut wasm = Vec::new();
    file.take(MAX_MODULE_BYTES + 1).read_to_end(&mut wasm).await.map_err(LoadError::Read)?;
    if wasm.len() as u64 > MAX_MODULE_BYTES {
        return Err(LoadError::TooLarge);
    }
    Ok(wasm)
}

/// Tells a component from a core module, and both from anything else, before compiling.
fn check_header(wasm: &[u8]) -> Result<(), LoadError> {
    const MAGIC: &[u8] = b"\0asm";
    const COMPONENT_LAYER: [u8; 2] = [1, 0];
    if !wasm.starts_with(MAGIC) {
        return Err(LoadError::NotWebAssembly);
    }
    if wasm.len() < 8 {
        return Err(LoadError::Truncated(wasm.len()));
    }
    if wasm[6..8] != COMPONENT_LAYER {
        return Err(LoadError::CoreModule);
    }
    Ok(())
}

/// What marks a candidate version: `NAME.next.wasm` beside `NAME.wasm`.
const CANDIDATE: &str = ".next";

/// The live plugin file a candidate file (`NAME.next.wasm`) is a candidate for (`NAME.wasm`).
pub fn candidate_for(wasm: &Path) -> Option<PathBuf> {
    let stem = wasm.file_stem()?.to_str()?;
    let live = stem.strip_suffix(CANDIDATE).filter(|s| !s.is_empty())?;
    Some(wasm.with_file_name(format!("{live}.wasm")))
}

/// The candidate file of a live plugin file.
pub fn candidate_of(wasm: &Path) -> PathBuf {
    let stem = wasm.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    wasm.with_file_name(format!("{stem}{CANDIDATE}.wasm"))
}

/// Where a plugin file's settings are: `NAME.toml`; for a candidate `NAME.next.toml`, or the
/// live version's `NAME.toml` when it has none of its own.
pub fn settings_path(wasm: &Path) -> PathBuf {
    let own = wasm.with_extension("toml");
    match candidate_for(wasm) {
        Some(live) if !own.exists() => live.with_extension("toml"),
        _ => own,
    }
}

/// Promotes the candidate of the plugin file `live`: its settings (if it has its own) and then
/// its module are renamed over the live version's, each atomically; the directory's watcher
/// reloads the plugin from them as from any new version.
pub fn promote(live: &Path) -> std::io::Result<()> {
    let candidate = candidate_of(live);
    if !candidate.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::NotFound, format!("there is no candidate {}", candidate.display())));
    }
    let settings = candidate.with_extension("toml");
    if settings.is_file() {
        std::fs::rename(&settings, live.with_extension("toml"))?;
    }
    std::fs::rename(&candidate, live)
}

/// The settings beside the plugin (`NAME.toml`, see [`settings_path`]): the plugin's part as
/// JSON text ("{}" when there is none), and the host's `[kubewasm]` options.
pub async fn read_settings(wasm: &Path) -> Result<(String, PluginOptions), LoadError> {
    let path = settings_path(wasm);
    let text = match tokio::fs::read_to_string(&path).await {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(("{}".into(), PluginOptions::default())),
        Err(e) => return Err(LoadError::Settings { path, message: e.to_string() }),
    };
    let fail = |message: String| LoadError::Settings { path: path.clone(), message };
    let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| fail(e.message().to_string()))?;
    let options = match table.remove(OPTIONS_TABLE) {
        Some(options) => options.try_into().map_err(|e: toml::de::Error| fail(format!("[{OPTIONS_TABLE}]: {}", e.message())))?,
        None => PluginOptions::default(),
    };
    let settings = serde_json::to_string(&table).map_err(|e| fail(e.to_string()))?;
    Ok((settings, options))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollback_thresholds_are_shares() {
        assert_eq!(check_rollback_threshold(0.5), Ok(0.5));
        assert_eq!(check_rollback_threshold(0.0), Ok(0.0));
        assert!(check_rollback_threshold(1.5).unwrap_err().contains("between 0 and 1"));
        assert!(check_rollback_threshold(-0.1).is_err());
    }

    #[tokio::test]
    async fn a_module_over_the_size_cap_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge.wasm");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(MAX_MODULE_BYTES + 1).unwrap();
        let err = read_module(&path).await.unwrap_err();
        assert!(matches!(err, LoadError::TooLarge), "{err}");
        assert_eq!(err.to_string(), "it is more than 67108864 bytes, the most a plugin may have");
        file.set_len(MAX_MODULE_BYTES).unwrap();
        assert_eq!(read_module(&path).await.unwrap().len() as u64, MAX_MODULE_BYTES);
    }

    #[test]
    fn headers_are_told_apart() {
        assert!(matches!(check_header(b"hello world"), Err(LoadError::NotWebAssembly)));
        assert!(matches!(check_header(b"\0asm\x0d"), Err(LoadError::Truncated(5))));
        assert!(matches!(check_header(b"\0asm\x01\0\0\0"), Err(LoadError::CoreModule)));
        assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
    }

    #[tokio::test]
    async fn settings_come_from_toml_beside_the_plugin() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("p.wasm");
        assert_eq!(read_settings(&wasm).await.unwrap(), ("{}".to_string(), PluginOptions::default()));
        std::fs::write(dir.path().join("p.toml"), "maxUnavailable = 2\n[nested]\nkey = \"v\"\n[kubewasm]\nqps = 5.0\nmax-concurrency = 3\n").unwrap();
        let (settings, options) = read_settings(&wasm).await.unwrap();
        let json: serde_json::Value = serde_json::from_str(&settings).unwrap();
        assert_eq!(json, serde_json::json!({"maxUnavailable": 2, "nested": {"key": "v"}}));
        assert_eq!(options, PluginOptions { qps: Some(5.0), max_concurrency: Some(3), ..Default::default() });
        std::fs::write(dir.path().join("p.toml"), "[kubewasm]\nqsp = 5.0\n").unwrap();
        let err = read_settings(&wasm).await.unwrap_err().to_string();
        assert!(err.contains("unknown field `qsp`"), "{err}");
        std::fs::write(dir.path().join("p.toml"), "[kubewasm]\nrollback-threshold = 0.3\nrollback-min-reconciles = 5\n").unwrap();
        let (_, options) = read_settings(&wasm).await.unwrap();
        assert_eq!(options, PluginOptions { rollback_threshold: Some(0.3), rollback_min_reconciles: Some(5), ..Default::default() });
        std::fs::write(dir.path().join("p.toml"), "maxUnavailable = ").unwrap();
        let err = read_settings(&wasm).await.unwrap_err().to_string();
        assert!(err.contains("p.toml"), "{err}");
    }
}
