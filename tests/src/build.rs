//! Building the suite's Go programs once per machine: the control plane (`tests/controlplane/`),
//! the tools of `tests/tools/` (an OCI registry, `crane`, `helm`) and the controller-runtime peer
//! of the benchmarks (`tests/peers/controller-runtime/`), each from official Go modules.
//!
//! Owns the build cache outside the clone:
//! `${KUBEWASM_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/kubewasm}/<tool>/<key>/<tool>`, where
//! `<key>` is the SHA-256 of go.mod, go.sum, every `*.go` source, the package and the build
//! recipe. Building happens under an exclusive file lock into a temporary name that is renamed
//! into place, so parallel test binaries (or machines sharing a cache) build it once and never
//! see half a file. `KUBEWASM_CONTROLPLANE_BIN` names a prebuilt control plane and skips all of
//! this for it.
//!
//! Knows nothing about running the binaries.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// Bump when the way the binary is built changes in a way the sources don't show.
const RECIPE: &str = "kubewasm-controlplane-build/2 CGO_ENABLED=0 -trimpath -ldflags=-s -w";

/// A Go program the suite builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    /// kube-apiserver + etcd + parts of kube-controller-manager (`tests/controlplane/`).
    ControlPlane,
    /// An in-memory OCI registry (go-containerregistry's, `tests/tools/registry/`).
    Registry,
    /// `crane` (go-containerregistry), to push and inspect images.
    Crane,
    /// `helm` (helm.sh/helm/v4).
    Helm,
    /// An in-memory CNCF distribution registry (`tests/tools/distribution/`, a module of its own).
    Distribution,
    /// The controller-runtime peer of the e2e guest (`tests/peers/controller-runtime/`), for the
    /// density benchmark.
    ControllerRuntime,
}

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Tool::ControlPlane => "controlplane",
            Tool::Registry => "registry",
            Tool::Crane => "crane",
            Tool::Helm => "helm",
            Tool::Distribution => "distribution",
            Tool::ControllerRuntime => "controller-runtime",
        }
    }

    /// The Go module it is built in.
    pub fn module_dir(self) -> PathBuf {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        match self {
            Tool::ControlPlane => root.join("controlplane"),
            Tool::ControllerRuntime => root.join("peers/controller-runtime"),
            Tool::Distribution => root.join("tools/distribution"),
            _ => root.join("tools"),
        }
    }

    /// The package `go build` is given, in that module.
    fn package(self) -> &'static str {
        match self {
            Tool::ControlPlane | Tool::ControllerRuntime | Tool::Distribution => ".",
            Tool::Registry => "./registry",
            Tool::Crane => "github.com/google/go-containerregistry/cmd/crane",
            Tool::Helm => "helm.sh/helm/v4/cmd/helm",
        }
    }
}

/// Environment variable naming a prebuilt control-plane binary.
pub const BIN_ENV: &str = "KUBEWASM_CONTROLPLANE_BIN";
/// Environment variable overriding the cache root.
pub const CACHE_ENV: &str = "KUBEWASM_CACHE_DIR";

/// Why the control-plane binary is not available. Cloneable: a failed build is remembered for the
/// whole process so that every test reports it instead of each one rebuilding for ten minutes.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BuildError {
    #[error("${BIN_ENV} is set to {0}, which is not an executable file")]
    PrebuiltMissing(PathBuf),
    #[error("reading the Go sources in {dir}: {source}")]
    ReadSources { dir: PathBuf, source: Arc<io::Error> },
    #[error("go.mod in {0} does not require k8s.io/kubernetes vMAJOR.MINOR.PATCH")]
    KubernetesVersion(PathBuf),
    #[error("no cache directory: set ${CACHE_ENV}, $XDG_CACHE_HOME or $HOME")]
    NoCacheDir,
    #[error("preparing the cache directory {dir}: {source}")]
    CacheDir { dir: PathBuf, source: Arc<io::Error> },
    #[error("locking {path}: {source}")]
    Lock { path: PathBuf, source: Arc<io::Error> },
    #[error(
        "the Go toolchain is needed to build the suite's Go programs and `go` could not be run ({0}); \
         install Go 1.26 or newer, or set ${BIN_ENV} to a prebuilt binary"
    )]
    GoMissing(Arc<io::Error>),
    #[error("`go build` of {tool} failed ({status}) after {elapsed:?}:\n{stderr}")]
    GoBuild { tool: &'static str, status: String, elapsed: Duration, stderr: String },
    #[error("installing the built binary at {path}: {source}")]
    Install { path: PathBuf, source: Arc<io::Error> },
}

/// Where the control plane's Go module lives in this checkout.
pub fn source_dir() -> PathBuf {
    Tool::ControlPlane.module_dir()
}

/// The cache root: `$KUBEWASM_CACHE_DIR`, else `$XDG_CACHE_HOME/kubewasm`, else `~/.cache/kubewasm`.
pub fn cache_root() -> Result<PathBuf, BuildError> {
    let nonempty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = nonempty(CACHE_ENV) {
        return Ok(dir);
    }
    if let Some(dir) = nonempty("XDG_CACHE_HOME") {
        return Ok(dir.join("kubewasm"));
    }
    nonempty("HOME").map(|h| h.join(".cache").join("kubewasm")).ok_or(BuildError::NoCacheDir)
}

/// How a binary was obtained, for reports.
#[derive(Debug, Clone)]
pub enum Provenance {
    /// From `$KUBEWASM_CONTROLPLANE_BIN`.
    Prebuilt,
    /// Found in the cache (built earlier, by this or another process).
    Cached,
    /// Built by this process, taking this long.
    Built(Duration),
}

/// A usable control-plane binary.
#[derive(Debug, Clone)]
pub struct Binary {
    pub path: PathBuf,
    pub provenance: Provenance,
}

/// The control-plane binary, built if needed (once per process; the result, good or bad, is
/// remembered). Blocks for the duration of a build — about ten minutes on two cores with cold
/// Go caches; progress goes to the process's real stderr, bypassing the test harness capture.
pub fn controlplane_binary() -> Result<PathBuf, BuildError> {
    ensure_binary().map(|b| b.path)
}

/// Like [`controlplane_binary`], also saying where the binary came from.
pub fn ensure_binary() -> Result<Binary, BuildError> {
    static BINARY: OnceLock<Result<Binary, BuildError>> = OnceLock::new();
    BINARY.get_or_init(|| build_with(&BuildSettings::default())).clone()
}

/// One of the suite's tools, built if needed (once per process, remembered like the control
/// plane).
pub fn go_tool(tool: Tool) -> Result<PathBuf, BuildError> {
    static BINARIES: OnceLock<std::sync::Mutex<std::collections::HashMap<Tool, Result<PathBuf, BuildError>>>> = OnceLock::new();
    let binaries = BINARIES.get_or_init(Default::default);
    // Held across the build: a second test asking for the same tool waits for the first.
    let mut binaries = binaries.lock().unwrap_or_else(|e| e.into_inner());
    binaries.entry(tool).or_insert_with(|| build_tool(tool, &BuildSettings::default()).map(|b| b.path)).clone()
}

/// Knobs for [`build_with`]; the defaults are what [`controlplane_binary`] uses.
#[derive(Debug, Clone, Default)]
pub struct BuildSettings {
    /// Cache root instead of [`cache_root`].
    pub cache_root: Option<PathBuf>,
    /// Extra environment for `go build` (e.g. a throw-away `GOCACHE` to time a cold build).
    pub env: Vec<(String, String)>,
    /// Ignore `$KUBEWASM_CONTROLPLANE_BIN`.
    pub ignore_prebuilt: bool,
}

/// Finds or builds the control plane with explicit settings, without the per-process memo.
pub fn build_with(settings: &BuildSettings) -> Result<Binary, BuildError> {
    build_tool(Tool::ControlPlane, settings)
}

fn build_tool(tool: Tool, settings: &BuildSettings) -> Result<Binary, BuildError> {
    if tool == Tool::ControlPlane
        && !settings.ignore_prebuilt
        && let Some(bin) = std::env::var_os(BIN_ENV).filter(|v| !v.is_empty())
    {
        let path = PathBuf::from(bin);
        return if is_executable(&path) { Ok(Binary { path, provenance: Provenance::Prebuilt }) } else { Err(BuildError::PrebuiltMissing(path)) };
    }

    let src = tool.module_dir();
    let sources = Sources::read(tool, &src)?;
    let root = match &settings.cache_root {
        Some(r) => r.clone(),
        None => cache_root()?,
    };
    let dir = root.join(tool.name()).join(&sources.key);
    let bin = dir.join(tool.name());
    if is_executable(&bin) {
        return Ok(Binary { path: bin, provenance: Provenance::Cached });
    }

    fs::create_dir_all(&dir).map_err(|e| BuildError::CacheDir { dir: dir.clone(), source: e.into() })?;
    let lock_path = dir.join("build.lock");
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| BuildError::Lock { path: lock_path.clone(), source: e.into() })?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            progress(format_args!("kubewasm-tests: another process is building {} into {}; waiting", tool.name(), dir.display()));
            lock.lock().map_err(|e| BuildError::Lock { path: lock_path.clone(), source: e.into() })?;
        }
        Err(fs::TryLockError::Error(e)) => {
            return Err(BuildError::Lock { path: lock_path, source: e.into() });
        }
    }
    // Whoever held the lock before us may have finished the job.
    if is_executable(&bin) {
        return Ok(Binary { path: bin, provenance: Provenance::Cached });
    }

    let elapsed = go_build(tool, &src, &sources, &dir, &bin, &settings.env)?;
    drop(lock);
    Ok(Binary { path: bin, provenance: Provenance::Built(elapsed) })
}

/// The inputs of a build and their digest.
struct Sources {
    key: String,
    /// The control plane's, stamped into it.
    kubernetes_version: Option<(String, String, String)>,
}

/// The `*.go` files under `dir`, relative to it, sorted.
fn go_files(dir: &Path) -> io::Result<Vec<String>> {
    let mut found = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        for entry in fs::read_dir(dir.join(&rel))? {
            let entry = entry?;
            let path = rel.join(entry.file_name());
            if entry.file_type()?.is_dir() {
                // A directory with a go.mod is another module, built (and keyed) apart.
                if !dir.join(&path).join("go.mod").exists() {
                    pending.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "go") {
                found.push(path.to_string_lossy().into_owned());
            }
        }
    }
    found.sort();
    Ok(found)
}

impl Sources {
    fn read(tool: Tool, dir: &Path) -> Result<Self, BuildError> {
        let err = |e: io::Error| BuildError::ReadSources { dir: dir.to_owned(), source: e.into() };
        let mut names: Vec<String> = vec!["go.mod".into(), "go.sum".into()];
        names.extend(go_files(dir).map_err(err)?);

        let mut hasher = Sha256::new();
        hasher.update(RECIPE.as_bytes());
        hasher.update([0]);
        hasher.update(tool.package().as_bytes());
        hasher.update([0]);
        let mut go_mod = String::new();
        for name in &names {
            let data = fs::read(dir.join(name)).map_err(err)?;
            if name == "go.mod" {
                go_mod = String::from_utf8_lossy(&data).into_owned();
            }
            hasher.update(name.as_bytes());
            hasher.update([0]);
            hasher.update((data.len() as u64).to_le_bytes());
            hasher.update(&data);
        }
        let key = format!("{:x}", hasher.finalize());
        let kubernetes_version = match tool {
            Tool::ControlPlane => Some(kubernetes_version(&go_mod).ok_or_else(|| BuildError::KubernetesVersion(dir.to_owned()))?),
            _ => None,
        };
        Ok(Sources { key, kubernetes_version })
    }

    /// `-X` flags stamping the Kubernetes version the module builds, so `/version` and
    /// `kubectl version` report e.g. v1.37.2 instead of `v0.0.0-master+$Format:%H$`.
    fn ldflags(&self) -> String {
        let mut flags = vec!["-s".to_owned(), "-w".to_owned()];
        let Some((major, minor, patch)) = &self.kubernetes_version else {
            return flags.join(" ");
        };
        let git_version = format!("v{major}.{minor}.{patch}");
        for pkg in ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"] {
            for (var, value) in [("gitVersion", git_version.as_str()), ("gitMajor", major), ("gitMinor", minor)] {
                flags.push(format!("-X={pkg}.{var}={value}"));
            }
        }
        flags.join(" ")
    }
}

/// `k8s.io/kubernetes v1.37.2` in go.mod → ("1", "37", "2").
fn kubernetes_version(go_mod: &str) -> Option<(String, String, String)> {
    go_mod.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        let first = words.next()?;
        let (module, version) = if first == "require" { (words.next()?, words.next()?) } else { (first, words.next()?) };
        if module != "k8s.io/kubernetes" {
            return None;
        }
        let mut parts = version.strip_prefix('v')?.splitn(3, '.');
        let (major, minor, patch) = (parts.next()?, parts.next()?, parts.next()?);
        let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        (numeric(major) && numeric(minor) && numeric(patch)).then(|| (major.to_owned(), minor.to_owned(), patch.to_owned()))
    })
}

fn go_build(tool: Tool, src: &Path, sources: &Sources, dir: &Path, bin: &Path, env: &[(String, String)]) -> Result<Duration, BuildError> {
    let tmp = dir.join(format!("{}.tmp-{}", tool.name(), std::process::id()));
    let started = Instant::now();
    progress(format_args!(
        "kubewasm-tests: building {} from {} into {} — the first build of the control plane or \
         helm takes minutes on 2 cores",
        tool.name(),
        src.display(),
        bin.display()
    ));
    let go = std::env::var_os("GO").filter(|v| !v.is_empty()).unwrap_or_else(|| "go".into());
    let mut cmd = Command::new(go);
    cmd.current_dir(src)
        .args(["build", "-trimpath", "-ldflags", &sources.ldflags(), "-o"])
        .arg(&tmp)
        .arg(tool.package())
        .env("CGO_ENABLED", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(|e| BuildError::GoMissing(e.into()))?;
    let mut stderr_pipe = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr_pipe.read_to_string(&mut s);
        s
    });
    let mut next_note = Duration::from_secs(30);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                return Err(BuildError::GoBuild {
                    tool: tool.name(),
                    status: format!("waiting for go failed: {e}"),
                    elapsed: started.elapsed(),
                    stderr: String::new(),
                });
            }
        }
        if started.elapsed() >= next_note {
            progress(format_args!("kubewasm-tests: still building {} ({} s)", tool.name(), next_note.as_secs()));
            next_note += Duration::from_secs(30);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let stderr = reader.join().unwrap_or_default();
    let elapsed = started.elapsed();
    if !status.success() {
        let _ = fs::remove_file(&tmp);
        return Err(BuildError::GoBuild { tool: tool.name(), status: status.to_string(), elapsed, stderr });
    }
    fs::rename(&tmp, bin).map_err(|e| BuildError::Install { path: bin.to_owned(), source: e.into() })?;
    let _ = fs::write(dir.join("build-info.txt"), format!("build_seconds={:.1}\nldflags={}\n", elapsed.as_secs_f64(), sources.ldflags()));
    progress(format_args!("kubewasm-tests: {} built in {:.0} s", tool.name(), elapsed.as_secs_f64()));
    Ok(elapsed)
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// Writes straight to the process's stderr: the test harness captures `eprintln!`, and a ten-minute
/// build without a word looks like a hang.
pub(crate) fn progress(args: std::fmt::Arguments<'_>) {
    let mut err = io::stderr().lock();
    let _ = writeln!(err, "{args}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kubernetes_version_from_go_mod() {
        let go_mod = "module x\n\nrequire (\n\tgithub.com/a/b v1.0.0\n\tk8s.io/kubernetes v1.37.2\n)\n";
        assert_eq!(kubernetes_version(go_mod), Some(("1".into(), "37".into(), "2".into())));
        assert_eq!(kubernetes_version("require k8s.io/kubernetes v1.30.0\n"), Some(("1".into(), "30".into(), "0".into())));
        assert_eq!(kubernetes_version("require k8s.io/kubernetes-foo v1.30.0\n"), None);
    }

    #[test]
    fn the_real_go_mod_has_a_version_and_the_key_is_stable() {
        let a = Sources::read(Tool::ControlPlane, &source_dir()).unwrap();
        let b = Sources::read(Tool::ControlPlane, &source_dir()).unwrap();
        assert_eq!(a.key, b.key);
        assert_eq!(a.key.len(), 64);
        assert!(a.ldflags().contains("k8s.io/component-base/version.gitVersion=v"));
    }
}
