//! Running the real `kubewasm` binary (`kubewasm run`) against a control plane.
//!
//! Owns the host child processes of a test and their log files: [`kubewasm_binary`] builds the
//! binary once per test process (`cargo build -p kubewasm`, or `$KUBEWASM_BIN`); [`Host::start`]
//! runs it on free loopback ports with stdout and stderr captured to a log file, and hands out
//! its `/readyz` and `/metrics`; signals and exit waits work on the child. A host dropped
//! without a clean [`Host::stop`] is killed and prints the tail of its log (libtest shows it
//! with the failing test's output).

use std::fs;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::guests::{target_dir, workspace_root};
use crate::process;

/// Names a prebuilt `kubewasm` binary, skipping the build.
pub const BIN_ENV: &str = "KUBEWASM_BIN";
/// Names a directory where every host's whole log is kept (`<name>-<pid>.log`) when it is
/// dropped; by default logs go with the host and only a failing one's tail is printed.
pub const LOGS_ENV: &str = "KUBEWASM_E2E_LOGS";

/// Why a host could not be built, started, probed or stopped.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HostError {
    #[error("${BIN_ENV} is set to {0}, which is not a file")]
    BinEnv(PathBuf),
    #[error("`cargo build -p kubewasm` failed: {0}")]
    Build(String),
    #[error("{what}: {source}")]
    Io { what: String, source: std::sync::Arc<io::Error> },
    #[error("host {name} exited ({status}) {when}\n{log}")]
    Exited { name: String, status: String, when: String, log: String },
    #[error("host {name}: timed out after {waited:?} waiting for {what}; last: {last}\n{log}")]
    TimedOut { name: String, what: String, waited: Duration, last: String, log: String },
    #[error("kubewasm rbac failed: {0}")]
    Rbac(String),
    #[error("host {name}: GET {path}: {message}")]
    Http { name: String, path: String, message: String },
}

fn io_error(what: impl Into<String>) -> impl FnOnce(io::Error) -> HostError {
    let what = what.into();
    move |source| HostError::Io { what, source: source.into() }
}

/// The release `kubewasm` binary, built now (cargo decides whether anything is rebuilt), for the
/// benchmarks. Panics if the build fails.
pub fn release_binary() -> PathBuf {
    let status = std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(crate::guests::workspace_root())
        .args(["build", "--quiet", "--release", "-p", "kubewasm", "--bin", "kubewasm"])
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the release host failed");
    crate::guests::target_dir().join("release/kubewasm")
}

/// `kubewasm rbac ARGS`: the YAML it prints (the ServiceAccounts, Roles and bindings a host
/// and its plugins need).
pub async fn rbac(args: &[String]) -> Result<String, HostError> {
    let bin = tokio::task::spawn_blocking(kubewasm_binary).await.expect("the build does not panic")?;
    let output = tokio::process::Command::new(&bin).arg("rbac").args(args).output().await.map_err(io_error(format!("running {} rbac", bin.display())))?;
    if !output.status.success() {
        return Err(HostError::Rbac(String::from_utf8_lossy(&output.stderr).into_owned()));
    }
    String::from_utf8(output.stdout).map_err(|e| HostError::Rbac(format!("printed what is not UTF-8: {e}")))
}

/// The `kubewasm` binary: `$KUBEWASM_BIN` if set, else `target/debug/kubewasm` after
/// `cargo build -p kubewasm` (once per process; cargo decides whether anything is rebuilt).
/// Blocking: call it from a blocking thread.
pub fn kubewasm_binary() -> Result<PathBuf, HostError> {
    static BUILT: Mutex<Option<Result<PathBuf, HostError>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(result) = built.as_ref() {
        return result.clone();
    }
    let result = build_binary();
    *built = Some(result.clone());
    result
}

fn build_binary() -> Result<PathBuf, HostError> {
    if let Some(bin) = std::env::var_os(BIN_ENV).filter(|v| !v.is_empty()) {
        let bin = PathBuf::from(bin);
        return if bin.is_file() { Ok(bin) } else { Err(HostError::BinEnv(bin)) };
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(workspace_root())
        .args(["build", "--quiet", "-p", "kubewasm", "--bin", "kubewasm"])
        .stdin(Stdio::null())
        .output()
        .map_err(io_error("running cargo to build kubewasm"))?;
    if !output.status.success() {
        return Err(HostError::Build(String::from_utf8_lossy(&output.stderr).into_owned()));
    }
    let bin = target_dir().join("debug/kubewasm");
    if !bin.is_file() {
        return Err(HostError::Build(format!("it succeeded, but {} is missing", bin.display())));
    }
    Ok(bin)
}

/// What to run: `kubewasm run` with these flags.
#[derive(Debug, Clone)]
pub struct HostConfig {
    name: String,
    /// `--plugins`; `None` for a host serving only Plugin resources.
    plugins: Option<PathBuf>,
    kubeconfig: PathBuf,
    namespaces: Vec<String>,
    leader: Option<(String, String)>,
    status_configmap: Option<String>,
    grace_period: Option<Duration>,
    watch: Option<bool>,
    args: Vec<String>,
    log_filter: String,
    artifacts: Option<PathBuf>,
    /// `None`: plugins act as the host (`--plugin-identity=host`); `Some(ns)`: each as its own
    /// ServiceAccount in `ns`.
    identity_namespace: Option<String>,
    /// Serve the Plugin resources of this namespace (the plugins' identity namespace).
    resources: Option<String>,
    /// `POD_NAME`; by default `NAME-<unique>`.
    instance: Option<String>,
}

impl HostConfig {
    /// A host called `name` (in failure messages) running the plugins in `plugins` against the
    /// cluster of `kubeconfig`.
    pub fn new(name: &str, plugins: &Path, kubeconfig: &Path) -> Self {
        HostConfig {
            name: name.into(),
            plugins: Some(plugins.into()),
            kubeconfig: kubeconfig.into(),
            namespaces: Vec::new(),
            leader: None,
            status_configmap: None,
            grace_period: None,
            watch: None,
            args: Vec::new(),
            log_filter: "info,kubewasm=debug,kube=warn,hyper=warn,tower=warn".into(),
            artifacts: None,
            identity_namespace: None,
            resources: None,
            instance: None,
        }
    }
    /// A host serving only the Plugin resources of `namespace` (`--plugin-source=resources
    /// --identity-namespace`), with no plugin directory.
    pub fn resources(name: &str, namespace: &str, kubeconfig: &Path) -> Self {
        let mut config = HostConfig::new(name, Path::new(""), kubeconfig);
        config.plugins = None;
        config.resources = Some(namespace.into());
        config
    }
    /// `--namespace` (repeatable).
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespaces.push(namespace.into());
        self
    }
    /// `--leader-elect --lease-name NAME --lease-namespace NAMESPACE`.
    pub fn leader_elect(mut self, lease_namespace: &str, lease_name: &str) -> Self {
        self.leader = Some((lease_namespace.into(), lease_name.into()));
        self
    }
    /// Each plugin acts as its own ServiceAccount in `namespace` (`--plugin-identity=
    /// serviceaccount --identity-namespace`), the host's default. Without this, the harness runs
    /// plugins as the host (`--plugin-identity=host`): suites about other things need no RBAC
    /// per plugin; the identity, rbac and examples suites use this.
    pub fn service_accounts(mut self, namespace: &str) -> Self {
        self.identity_namespace = Some(namespace.into());
        self
    }
    /// `--status-configmap NAMESPACE/NAME`.
    pub fn status_configmap(mut self, namespace: &str, name: &str) -> Self {
        self.status_configmap = Some(format!("{namespace}/{name}"));
        self
    }
    /// `--grace-period`.
    pub fn grace_period(mut self, grace: Duration) -> Self {
        self.grace_period = Some(grace);
        self
    }
    /// `--watch=BOOL`.
    pub fn watch(mut self, watch: bool) -> Self {
        self.watch = Some(watch);
        self
    }
    /// Any other argument of `kubewasm run`.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }
    /// `--cache-dir`: compiled plugins kept in `dir` (by default the host's own directory).
    pub fn artifacts(mut self, dir: &Path) -> Self {
        self.artifacts = Some(dir.into());
        self
    }
    /// The host's identity (`POD_NAME`: its Lease names, its shard name): unique within the
    /// test's namespace, e.g. fixed names so that a ring places a test's objects the same way on
    /// every run.
    pub fn instance(mut self, instance: &str) -> Self {
        self.instance = Some(instance.into());
        self
    }
    /// `--shard-ring RING` (with leader election in `lease_namespace`, Lease `lease_name`).
    pub fn shard_ring(self, lease_namespace: &str, lease_name: &str, ring: &str) -> Self {
        self.leader_elect(lease_namespace, lease_name).arg(format!("--shard-ring={ring}"))
    }
    /// `RUST_LOG` for the host.
    pub fn log_filter(mut self, filter: &str) -> Self {
        self.log_filter = filter.into();
        self
    }

    /// The arguments of `kubewasm run`; compiled plugins are cached in `artifacts` unless
    /// [`HostConfig::artifacts`] says otherwise (the host's own directory: a test never reuses
    /// another's, nor the user's).
    fn command(&self, metrics: SocketAddr, health: SocketAddr, artifacts: &Path) -> Vec<String> {
        let mut args = vec![
            "run".to_string(),
            format!("--kubeconfig={}", self.kubeconfig.display()),
            format!("--metrics-addr={metrics}"),
            format!("--health-addr={health}"),
            format!("--cache-dir={}", self.artifacts.as_deref().unwrap_or(artifacts).display()),
        ];
        args.extend(self.plugins.iter().map(|dir| format!("--plugins={}", dir.display())));
        args.extend(self.namespaces.iter().map(|ns| format!("--namespace={ns}")));
        match (&self.identity_namespace, &self.resources) {
            (Some(ns), resources) => {
                assert!(resources.as_ref().is_none_or(|r| r == ns), "Plugin resources are served from the identity namespace");
                args.extend(["--plugin-identity=serviceaccount".into(), format!("--identity-namespace={ns}")]);
            }
            (None, Some(ns)) => args.extend(["--plugin-identity=host".into(), format!("--identity-namespace={ns}")]),
            (None, None) => args.push("--plugin-identity=host".into()),
        }
        if self.resources.is_some() {
            args.push("--plugin-source=resources".into());
        }
        if let Some((namespace, name)) = &self.leader {
            args.extend(["--leader-elect".into(), format!("--lease-name={name}"), format!("--lease-namespace={namespace}")]);
        }
        if let Some(status) = &self.status_configmap {
            args.push(format!("--status-configmap={status}"));
        }
        if let Some(grace) = self.grace_period {
            args.push(format!("--grace-period={}ms", grace.as_millis()));
        }
        if let Some(watch) = self.watch {
            args.push(format!("--watch={watch}"));
        }
        args.extend(self.args.iter().cloned());
        args
    }
}

/// One running `kubewasm run`.
pub struct Host {
    name: String,
    /// `POD_NAME`: the Lease holder name, and in the User-Agent of every request it makes.
    instance: String,
    child: Option<Child>,
    /// The child's pid (kept after it exited, to name its log).
    started_pid: u32,
    status: Option<ExitStatus>,
    metrics: SocketAddr,
    health: SocketAddr,
    log: PathBuf,
    /// Holds the log file; last, so it goes after the child is gone.
    _dir: tempfile::TempDir,
    /// Set by a clean [`Host::stop`]: nothing to report when dropped.
    quiet: bool,
}

fn free_port() -> Result<SocketAddr, HostError> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io_error("finding a free port"))?;
    listener.local_addr().map_err(io_error("finding a free port"))
}

impl Host {
    /// Starts the host and waits until its endpoints answer (`/healthz`; not yet `/readyz`).
    /// Retries on fresh ports if the ones picked were taken in the meantime.
    pub async fn start(config: HostConfig) -> Result<Host, HostError> {
        let bin = tokio::task::spawn_blocking(kubewasm_binary).await.expect("the build task panicked")?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut host = Self::spawn(&bin, &config)?;
            match host.wait_serving(Duration::from_secs(60)).await {
                Ok(()) => return Ok(host),
                Err(HostError::Exited { .. }) if attempt < 3 && host.log_text().contains("cannot listen") => {
                    host.quiet = true;
                    continue;
                }
                Err(e) => {
                    host.quiet = true;
                    return Err(e);
                }
            }
        }
    }

    fn spawn(bin: &Path, config: &HostConfig) -> Result<Host, HostError> {
        let (metrics, health) = (free_port()?, free_port()?);
        let dir = tempfile::Builder::new().prefix(&format!("kubewasm-host-{}-", config.name)).tempdir().map_err(io_error("creating a log directory"))?;
        let log = dir.path().join("host.log");
        let file = fs::File::create(&log).map_err(io_error(format!("creating {}", log.display())))?;
        let err = file.try_clone().map_err(io_error("cloning the log file handle"))?;
        // The host's identity: its Lease holder name and its User-Agent's `(INSTANCE)`.
        let instance = config.instance.clone().unwrap_or_else(|| format!("{}-{}", config.name, crate::unique_name("host")));
        let mut cmd = Command::new(bin);
        cmd.args(config.command(metrics, health, &dir.path().join("artifacts")))
            .env("RUST_LOG", &config.log_filter)
            // The panic message, not pages of frames, in the log tail a failure prints.
            .env("RUST_BACKTRACE", "0")
            .env_remove("KUBECONFIG")
            .env("POD_NAME", &instance)
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err);
        let child = process::spawn_tied(cmd).map_err(io_error(format!("starting {}", bin.display())))?;
        Ok(Host {
            name: config.name.clone(),
            instance,
            started_pid: child.id(),
            child: Some(child),
            status: None,
            metrics,
            health,
            log,
            _dir: dir,
            quiet: false,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process id while it runs.
    /// The identity it runs as (`POD_NAME`): its Lease holder name; its requests' User-Agent
    /// ends with `(INSTANCE)`.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn metrics_addr(&self) -> SocketAddr {
        self.metrics
    }

    pub fn health_addr(&self) -> SocketAddr {
        self.health
    }

    /// The whole log so far.
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_else(|e| format!("(cannot read {}: {e})", self.log.display()))
    }

    /// The last `lines` lines of the log, headed with where it is.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = self.log_text();
        let all: Vec<&str> = text.lines().collect();
        let mut out = format!("--- host {} log ({}), last {lines} of {} lines ---\n", self.name, self.log.display(), all.len());
        for line in &all[all.len().saturating_sub(lines)..] {
            out.push_str(line);
            out.push('\n');
        }
        out
    }

    /// The exit status if the process has ended (reaping it).
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none()
            && let Some(child) = self.child.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            self.status = Some(status);
            self.child = None;
        }
        self.status
    }

    fn exited(&mut self, when: &str) -> Option<HostError> {
        let status = self.try_status()?;
        Some(HostError::Exited { name: self.name.clone(), status: status.to_string(), when: when.into(), log: self.log_tail(60) })
    }

    fn timed_out(&self, what: &str, waited: Duration, last: String) -> HostError {
        HostError::TimedOut { name: self.name.clone(), what: what.into(), waited, last, log: self.log_tail(60) }
    }

    /// `GET path` on `addr`: (status code, body).
    async fn get(&self, addr: SocketAddr, path: &str) -> Result<(u16, String), HostError> {
        http_get(&self.name, addr, path).await
    }

    async fn wait_serving(&mut self, timeout: Duration) -> Result<(), HostError> {
        let started = Instant::now();
        loop {
            if let Some(e) = self.exited("before serving /healthz") {
                return Err(e);
            }
            let last = match self.get(self.health, "/healthz").await {
                Ok((200, _)) => return Ok(()),
                Ok((code, body)) => format!("{code} {body}"),
                Err(e) => e.to_string(),
            };
            if started.elapsed() >= timeout {
                return Err(self.timed_out("/healthz", started.elapsed(), last));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `/readyz` answers 200 (every plugin's caches synced).
    pub async fn wait_ready(&mut self, timeout: Duration) -> Result<(), HostError> {
        let started = Instant::now();
        loop {
            if let Some(e) = self.exited("before it was ready") {
                return Err(e);
            }
            let last = match self.get(self.health, "/readyz").await {
                Ok((200, _)) => return Ok(()),
                Ok((code, body)) => format!("{code} {body}"),
                Err(e) => e.to_string(),
            };
            if started.elapsed() >= timeout {
                return Err(self.timed_out("/readyz to answer 200", started.elapsed(), last));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The Prometheus text of `/metrics`.
    pub async fn metrics(&self) -> Result<String, HostError> {
        scrape(&self.name, self.metrics).await
    }

    /// The sum of the series of metric `name` whose labels include `labels` (0 when none does).
    pub async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> Result<f64, HostError> {
        Ok(crate::prom::sum(&self.metrics().await?, name, labels))
    }

    /// Polls metric `name{labels}` until `check` accepts its value.
    pub async fn wait_metric(&mut self, name: &str, labels: &[(&str, &str)], timeout: Duration, check: impl Fn(f64) -> bool) -> Result<f64, HostError> {
        let started = Instant::now();
        loop {
            if let Some(e) = self.exited(&format!("while waiting for {name}")) {
                return Err(e);
            }
            let last = match self.metric(name, labels).await {
                Ok(value) if check(value) => return Ok(value),
                Ok(value) => format!("{name}{labels:?} = {value}"),
                Err(e) => e.to_string(),
            };
            if started.elapsed() >= timeout {
                return Err(self.timed_out(&format!("{name}{labels:?}"), started.elapsed(), last));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends `signal` (no-op once the process is gone).
    pub fn signal(&mut self, signal: libc::c_int) {
        if self.try_status().is_none()
            && let Some(pid) = self.pid()
        {
            process::signal(pid, signal);
        }
    }

    pub fn terminate(&mut self) {
        self.signal(libc::SIGTERM);
    }

    pub fn kill(&mut self) {
        self.signal(libc::SIGKILL);
    }

    /// Waits for the process to end, at most `timeout` (then kills it and says so).
    pub async fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus, HostError> {
        let started = Instant::now();
        loop {
            if let Some(status) = self.try_status() {
                return Ok(status);
            }
            if started.elapsed() >= timeout {
                let error = self.timed_out("the process to exit", started.elapsed(), "still running; killed it".into());
                self.kill();
                let _ = self.child.take().map(|mut c| c.wait());
                return Err(error);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Graceful stop: SIGTERM, then waits for a successful exit. The host's log is not printed
    /// when it is dropped afterwards.
    pub async fn stop(mut self) -> Result<ExitStatus, HostError> {
        self.terminate();
        let status = self.wait_exit(Duration::from_secs(40)).await?;
        if !status.success() {
            return Err(HostError::Exited { name: self.name.clone(), status: status.to_string(), when: "after SIGTERM".into(), log: self.log_tail(60) });
        }
        self.quiet = true;
        Ok(status)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(dir) = std::env::var_os(LOGS_ENV).filter(|d| !d.is_empty()) {
            let dir = PathBuf::from(dir);
            let keep = dir.join(format!("{}-{}.log", self.name, self.started_pid));
            let _ = fs::create_dir_all(&dir).and_then(|()| fs::copy(&self.log, keep));
        }
        if !self.quiet {
            // Shown by libtest only when the test fails.
            eprintln!("{}", self.log_tail(80));
        }
    }
}

/// `GET path` on a host's endpoint at `addr` (`name` for errors): the status code and body.
async fn http_get(name: &str, addr: SocketAddr, path: &str) -> Result<(u16, String), HostError> {
    let fail = |message: String| HostError::Http { name: name.to_string(), path: path.into(), message };
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, io::Error>(response)
    };
    let response =
        tokio::time::timeout(Duration::from_secs(10), exchange).await.map_err(|_| fail("no answer in 10 s".into()))?.map_err(|e| fail(e.to_string()))?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| fail(format!("not an HTTP response: {text:?}")))?;
    let code = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).ok_or_else(|| fail(format!("no status code in {head:?}")))?;
    Ok((code, body.to_string()))
}

/// The `/metrics` text of host `name` at `addr`; for tasks that sample a host while the test
/// holds it (see [`Host::metrics_addr`]).
pub async fn scrape(name: &str, addr: SocketAddr) -> Result<String, HostError> {
    match http_get(name, addr, "/metrics").await? {
        (200, body) => Ok(body),
        (code, body) => Err(HostError::Http { name: name.to_string(), path: "/metrics".into(), message: format!("{code}: {body}") }),
    }
}
