//! One running control plane (the Go binary from `tests/controlplane/`) and its files.
//!
//! Owns the child process and a per-instance run directory under
//! `$TMPDIR/kubewasm-controlplanes-<uid>/<pid>-<random>/`:
//!
//! ```text
//! data/                     the control plane's --data-dir (etcd, certificates, logs, port)
//! admin.kubeconfig          user kubewasm-admin (system:masters)
//! unprivileged.kubeconfig   user kubewasm-unprivileged (no groups, no RBAC bindings)
//! stderr.log                the child's stderr (it logs to data/*.log; stderr is for failures)
//! sandbox/{home,tmp,cwd}    the child's $HOME, $TMPDIR and working directory, so a test can
//!                           check it writes nothing outside data/
//! kubectl-cache/            kubectl's discovery cache for this instance
//! ```
//!
//! Directories of test processes that died without cleaning up are swept at the next start.
//! Does not build the binary (see `build`) and holds no `kube::Client`: clients are bound to the
//! tokio runtime that created them, and every `#[tokio::test]` has its own runtime.

use std::fs;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

use kube::Client;
use kube::config::{Config, KubeConfigOptions, Kubeconfig, KubeconfigError};
use tempfile::TempDir;

use crate::build::{self, BuildError};
use crate::process;

/// Why a control plane could not be started, reached or stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("control-plane binary: {0}")]
    Build(#[from] BuildError),
    #[error("creating a run directory under {dir}: {source}")]
    RunDir { dir: PathBuf, source: io::Error },
    #[error("starting {bin}: {source}")]
    Spawn { bin: PathBuf, source: io::Error },
    #[error("the control plane exited before it was ready ({status})\n{logs}")]
    ExitedBeforeReady { status: String, logs: String },
    #[error("the control plane was not ready after {waited:?}; killed it\n{logs}")]
    NotReady { waited: Duration, logs: String },
    #[error("reading kubeconfig {path}: {source}")]
    Kubeconfig { path: PathBuf, source: KubeconfigError },
    #[error("kubeconfig {path} has no usable server URL: {server:?}")]
    Server { path: PathBuf, server: Option<String> },
    #[error("making a client from {path}: {source}")]
    Client { path: PathBuf, source: kube::Error },
    #[error("the control plane is not running")]
    NotRunning,
    #[error("stopping the control plane: {0}")]
    Stop(io::Error),
    #[error("creating namespace {name}: {source}")]
    CreateNamespace { name: String, source: kube::Error },
}

/// Extra command-line settings for a dedicated control plane. `Options::default()` is what
/// [`ControlPlane::shared`] uses.
#[derive(Debug, Clone)]
pub struct Options {
    compaction_interval: Option<Duration>,
    watch_cache: Option<bool>,
    controllers: Option<Vec<String>>,
    port: Option<u16>,
    args: Vec<String>,
    ready_timeout: Duration,
    stop_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            compaction_interval: None,
            watch_cache: None,
            controllers: None,
            port: None,
            args: Vec::new(),
            ready_timeout: Duration::from_secs(120),
            stop_timeout: Duration::from_secs(30),
        }
    }
}

impl Options {
    pub fn new() -> Self {
        Self::default()
    }
    /// `--etcd-compaction-interval`: how often the API server compacts etcd (default 5 min).
    pub fn etcd_compaction_interval(mut self, every: Duration) -> Self {
        self.compaction_interval = Some(every);
        self
    }
    /// `--watch-cache=false` serves watches straight from etcd (so compaction shows as 410 Gone).
    pub fn watch_cache(mut self, enabled: bool) -> Self {
        self.watch_cache = Some(enabled);
        self
    }
    /// `--controllers`: the kube-controller-manager controllers to run.
    pub fn controllers<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.controllers = Some(names.into_iter().map(Into::into).collect());
        self
    }
    /// `--port`: a fixed API server port (default: a free one, kept across restarts if free).
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }
    /// Any other argument, passed as is.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }
    /// How long to wait for `ready` (default 120 s; a start takes ~3 s).
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }
    /// How long [`ControlPlane::stop`] waits after SIGTERM before SIGKILL (default 30 s).
    pub fn stop_timeout(mut self, timeout: Duration) -> Self {
        self.stop_timeout = timeout;
        self
    }

    fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(every) = self.compaction_interval {
            args.push(format!("--etcd-compaction-interval={}ms", every.as_millis()));
        }
        if let Some(on) = self.watch_cache {
            args.push(format!("--watch-cache={on}"));
        }
        if let Some(list) = &self.controllers {
            args.push(format!("--controllers={}", list.join(",")));
        }
        if let Some(port) = self.port {
            args.push(format!("--port={port}"));
        }
        args.extend(self.args.iter().cloned());
        args
    }
}

/// The files of one control plane; see the module docs.
#[derive(Debug)]
struct Paths {
    data: PathBuf,
    kubeconfig: PathBuf,
    unprivileged: PathBuf,
    stderr: PathBuf,
    sandbox: PathBuf,
    kubectl_cache: PathBuf,
}

impl Paths {
    fn new(run: &Path) -> Self {
        Paths {
            data: run.join("data"),
            kubeconfig: run.join("admin.kubeconfig"),
            unprivileged: run.join("unprivileged.kubeconfig"),
            stderr: run.join("stderr.log"),
            sandbox: run.join("sandbox"),
            kubectl_cache: run.join("kubectl-cache"),
        }
    }
}

/// A running kube-apiserver + etcd + kube-controller-manager on 127.0.0.1.
///
/// Dropping it kills the process (SIGKILL, also while unwinding from a panic) and removes its run
/// directory; [`stop`](Self::stop) is the graceful way.
#[derive(Debug)]
pub struct ControlPlane {
    bin: PathBuf,
    options: Options,
    paths: Paths,
    child: Option<Child>,
    server: String,
    port: u16,
    /// Last: removed after `Drop::drop` has killed the child.
    run: TempDir,
}

impl ControlPlane {
    /// Starts a dedicated control plane with default options and a fresh data directory.
    pub async fn start() -> Result<ControlPlane, Error> {
        Self::start_with(Options::default()).await
    }

    /// Starts a dedicated control plane with `options` and a fresh data directory. Builds the binary
    /// first if this machine has never built it (minutes).
    pub async fn start_with(options: Options) -> Result<ControlPlane, Error> {
        let bin = tokio::task::spawn_blocking(build::controlplane_binary).await.expect("the build task panicked")?;
        Self::start_binary(bin, options).await
    }

    /// Like [`start_with`](Self::start_with) with an explicit binary.
    pub async fn start_binary(bin: PathBuf, options: Options) -> Result<ControlPlane, Error> {
        let root = runs_root();
        sweep_stale_runs(&root);
        let run = fs::create_dir_all(&root)
            .and_then(|()| tempfile::Builder::new().prefix(&format!("{}-", std::process::id())).tempdir_in(&root))
            .map_err(|source| Error::RunDir { dir: root.clone(), source })?;
        let paths = Paths::new(run.path());
        for dir in [&paths.data, &paths.sandbox.join("home"), &paths.sandbox.join("tmp"), &paths.sandbox.join("cwd")] {
            fs::create_dir_all(dir).map_err(|source| Error::RunDir { dir: dir.clone(), source })?;
        }
        let mut cp = ControlPlane { bin, options, paths, child: None, server: String::new(), port: 0, run };
        cp.launch().await?;
        Ok(cp)
    }

    /// Spawns the binary on this instance's directories and waits for `ready`.
    async fn launch(&mut self) -> Result<(), Error> {
        let p = &self.paths;
        let stderr = fs::File::options().create(true).append(true).open(&p.stderr).map_err(|source| Error::RunDir { dir: p.stderr.clone(), source })?;
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--data-dir")
            .arg(&p.data)
            .arg("--kubeconfig")
            .arg(&p.kubeconfig)
            .arg("--unprivileged-kubeconfig")
            .arg(&p.unprivileged)
            .args(self.options.to_args())
            .current_dir(p.sandbox.join("cwd"))
            .env("HOME", p.sandbox.join("home"))
            .env("TMPDIR", p.sandbox.join("tmp"))
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        let mut child = process::spawn_tied(cmd).map_err(|source| Error::Spawn { bin: self.bin.clone(), source })?;

        // A thread, not a task: it must outlive the runtime of whichever test started us, and keep
        // draining stdout so the child never writes into a closed pipe.
        let stdout = child.stdout.take().expect("piped stdout");
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name(format!("controlplane-{}-stdout", child.id()))
            .spawn(move || {
                let mut ready_tx = Some(ready_tx);
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if line.trim() == "ready"
                        && let Some(tx) = ready_tx.take()
                    {
                        let _ = tx.send(());
                    }
                }
            })
            .expect("spawn a stdout reader thread");

        let started = Instant::now();
        match tokio::time::timeout(self.options.ready_timeout, ready_rx).await {
            Ok(Ok(())) => {}
            Ok(Err(_closed)) => {
                // stdout closed without `ready`: the process is exiting.
                let status = wait_exit(&mut child, Duration::from_secs(10)).await;
                return Err(Error::ExitedBeforeReady { status, logs: self.logs() });
            }
            Err(_elapsed) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::NotReady { waited: started.elapsed(), logs: self.logs() });
            }
        }
        self.child = Some(child);

        let kubeconfig = read_kubeconfig(&self.paths.kubeconfig)?;
        let server = kubeconfig.clusters.first().and_then(|c| c.cluster.as_ref()).and_then(|c| c.server.clone());
        let port = server.as_deref().and_then(|s| s.rsplit(':').next()).and_then(|p| p.trim_end_matches('/').parse::<u16>().ok());
        match (server, port) {
            (Some(server), Some(port)) => {
                self.server = server;
                self.port = port;
                Ok(())
            }
            (server, _) => Err(Error::Server { path: self.paths.kubeconfig.clone(), server }),
        }
    }

    /// SIGTERM, then waits for a clean exit (SIGKILL after the stop timeout). Returns the exit
    /// status; a clean stop is `status.success()`.
    pub async fn stop(&mut self) -> Result<ExitStatus, Error> {
        let mut child = self.child.take().ok_or(Error::NotRunning)?;
        process::signal(child.id(), libc::SIGTERM);
        let deadline = Instant::now() + self.options.stop_timeout;
        loop {
            if let Some(status) = child.try_wait().map_err(Error::Stop)? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                return child.wait().map_err(Error::Stop);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops (if running) and starts again on the same data directory; the port stays the same
    /// when it is still free. Objects survive; existing clients reconnect.
    pub async fn restart(&mut self) -> Result<(), Error> {
        if self.child.is_some() {
            self.stop().await?;
        }
        self.launch().await
    }

    /// An admin client (user `kubewasm-admin`, group `system:masters`), bound to the calling
    /// tokio runtime.
    pub async fn client(&self) -> Result<Client, Error> {
        client_from(&self.paths.kubeconfig).await
    }

    /// A client for `kubewasm-unprivileged`: authenticated, in no group, with no RBAC bindings.
    pub async fn unprivileged_client(&self) -> Result<Client, Error> {
        client_from(&self.paths.unprivileged).await
    }

    pub fn kubeconfig_path(&self) -> &Path {
        &self.paths.kubeconfig
    }
    pub fn unprivileged_kubeconfig_path(&self) -> &Path {
        &self.paths.unprivileged
    }
    /// The `--data-dir` (etcd data, certificates, `controlplane.log`, `etcd.log`).
    pub fn data_dir(&self) -> &Path {
        &self.paths.data
    }
    /// This instance's run directory (see the module docs).
    pub fn run_dir(&self) -> &Path {
        self.run.path()
    }
    /// The child's `$HOME`, `$TMPDIR` and working directory live under here (`home/`, `tmp/`, `cwd/`).
    pub fn sandbox_dir(&self) -> &Path {
        &self.paths.sandbox
    }
    /// kubectl's `--cache-dir` for this instance.
    pub fn kubectl_cache_dir(&self) -> &Path {
        &self.paths.kubectl_cache
    }
    /// `https://127.0.0.1:PORT`.
    pub fn server(&self) -> &str {
        &self.server
    }
    pub fn port(&self) -> u16 {
        self.port
    }
    /// The process id while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
    pub fn binary(&self) -> &Path {
        &self.bin
    }

    /// The tails of the control plane's logs, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for (path, lines) in [(self.paths.stderr.clone(), 40), (self.paths.data.join("controlplane.log"), 40), (self.paths.data.join("etcd.log"), 15)] {
            out.push_str(&format!("--- {} (last {lines} lines) ---\n", path.display()));
            match fs::read_to_string(&path) {
                Ok(text) => {
                    let all: Vec<&str> = text.lines().collect();
                    for line in &all[all.len().saturating_sub(lines)..] {
                        out.push_str(line);
                        out.push('\n');
                    }
                }
                Err(e) => out.push_str(&format!("({e})\n")),
            }
        }
        out
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A client from a kubeconfig file, bound to the calling tokio runtime.
pub async fn client_from(path: &Path) -> Result<Client, Error> {
    let kubeconfig = read_kubeconfig(path)?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|source| Error::Kubeconfig { path: path.to_owned(), source })?;
    Client::try_from(config).map_err(|source| Error::Client { path: path.to_owned(), source })
}

fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, Error> {
    Kubeconfig::read_from(path).map_err(|source| Error::Kubeconfig { path: path.to_owned(), source })
}

async fn wait_exit(child: &mut Child, grace: Duration) -> String {
    let deadline = Instant::now() + grace;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.to_string(),
            Ok(None) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(20)).await,
            Ok(None) => {
                let _ = child.kill();
                return match child.wait() {
                    Ok(status) => format!("closed stdout, then killed: {status}"),
                    Err(e) => format!("closed stdout; wait failed: {e}"),
                };
            }
            Err(e) => return format!("wait failed: {e}"),
        }
    }
}

/// `$TMPDIR/kubewasm-controlplanes-<uid>`: the parent of every run directory on this machine.
pub fn runs_root() -> PathBuf {
    // SAFETY: plain syscall.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir().join(format!("kubewasm-controlplanes-{uid}"))
}

/// Removes run directories whose test process (the `<pid>-` prefix) is gone. Once per process.
fn sweep_stale_runs(root: &Path) {
    static SWEEP: Once = Once::new();
    SWEEP.call_once(|| {
        let Ok(entries) = fs::read_dir(root) else {
            return;
        };
        let me = std::process::id();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.split('-').next()).and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            if pid != me && !process::exists(pid) {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    });
}
