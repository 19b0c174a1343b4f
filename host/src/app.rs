//! `kubewasm run`, wired in numbered phases. Owns shutdown: the first SIGTERM/SIGINT stops
//! gracefully (no new reconciles, running ones finish, the leader releases its lease, queued
//! events are sent); a second signal, or the grace period running out, stops at once.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::controller::Environment;
use crate::discovery::Discovery;
use crate::events::EventRecorder;
use crate::informer::Informers;
use crate::leader::{LeaderConfig, LeaderElector, Leadership};
use crate::manifest::LimitPolicy;
use crate::metrics::Metrics;
use crate::plugin::artifact::ArtifactCache;
use crate::plugin::Loader;
use crate::runtime::{Runtime, RuntimeConfig};
use crate::supervisor::{StatusObject, Supervisor};

/// Everything `kubewasm run` takes from its flags.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub plugins: PathBuf,
    pub kubeconfig: Option<PathBuf>,
    pub namespaces: Vec<String>,
    pub controllers: ControllerFilter,
    pub metrics_addr: SocketAddr,
    pub health_addr: SocketAddr,
    pub leader_elect: bool,
    pub lease_name: String,
    pub lease_namespace: String,
    pub artifacts: Option<PathBuf>,
    pub grace_period: Duration,
    /// Follow the plugin directory and hot-reload changes.
    pub watch: bool,
    /// The ConfigMap listing the running plugins, which plugin load Events are about.
    pub status_namespace: String,
    pub status_name: String,
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("cannot read the plugin directory {path}: {source}")]
    PluginDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot connect to Kubernetes: {0}")]
    Connect(String),
    #[error(transparent)]
    Runtime(#[from] crate::runtime::RuntimeError),
    #[error(transparent)]
    Server(#[from] crate::server::ServerError),
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
                Some(name) if crate::manifest::is_dns_label(name) => filter.disabled.push(name.into()),
                None if item == "*" => filter.all = true,
                None if crate::manifest::is_dns_label(item) => filter.enabled.push(item.into()),
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

async fn connect(kubeconfig: Option<&Path>) -> Result<Client, AppError> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path).map_err(|e| AppError::Connect(format!("{}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(file, &Default::default()).await.map_err(|e| AppError::Connect(e.to_string()))?
        }
        None => kube::Config::infer().await.map_err(|e| AppError::Connect(e.to_string()))?,
    };
    Client::try_from(config).map_err(|e| AppError::Connect(e.to_string()))
}

/// This host's name in leases and events: the pod's name when set (Downward API), else the
/// hostname with the process id.
fn identity() -> String {
    std::env::var("POD_NAME").unwrap_or_else(|_| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "kubewasm".into());
        format!("{}-{}", host.trim(), std::process::id())
    })
}

/// The `*.wasm` files of the plugin directory, sorted.
pub fn plugin_files(dir: &Path) -> Result<Vec<PathBuf>, AppError> {
    let entries = std::fs::read_dir(dir).map_err(|source| AppError::PluginDir { path: dir.into(), source })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

pub async fn run(config: RunConfig) -> Result<(), AppError> {
    // The first signal starts a graceful shutdown, from any phase on; a second one forces it.
    let (shutdown, forced) = (CancellationToken::new(), CancellationToken::new());
    {
        let (shutdown, forced) = (shutdown.clone(), forced.clone());
        let mut signals = Signals::new();
        tokio::spawn(async move {
            signals.next().await;
            shutdown.cancel();
            signals.next().await;
            forced.cancel();
        });
    }

    // 1. Kubernetes and the host's own endpoints.
    let client = connect(config.kubeconfig.as_deref()).await?;
    let metrics = Arc::new(Metrics::new());
    // Ready once the supervisor exists and every plugin's caches have synced.
    let ready_source: Arc<Mutex<Option<Arc<Supervisor>>>> = Arc::default();
    let ready = {
        let source = ready_source.clone();
        Arc::new(move || source.lock().as_ref().map_or(Err("starting".to_string()), |s| s.readiness()))
    };
    let (metrics_at, health_at) = crate::server::serve(config.metrics_addr, config.health_addr, metrics.clone(), ready, shutdown.clone()).await?;
    tracing::info!(metrics = %metrics_at, health = %health_at, "serving /metrics, /healthz and /readyz");

    // 2. Leadership: standbys keep warm caches, only the leader's workers run and write.
    let identity = identity();
    // The lease is released only after the workers have stopped, so that the next leader never
    // overlaps with reconciles still finishing here.
    let leading = CancellationToken::new();
    let (leadership, elector) = if config.leader_elect {
        let lease = LeaderConfig::new(&config.lease_name, &config.lease_namespace, &identity);
        let (elector, leadership) = LeaderElector::new(client.clone(), lease, metrics.leader(&config.lease_name));
        (leadership, Some(tokio::spawn(elector.run(leading.clone()))))
    } else {
        (Leadership::always(), None)
    };

    // 3. The shared machinery: runtime, informers, events.
    let runtime = Arc::new(Runtime::new(RuntimeConfig::default())?);
    let loader = Loader::new(runtime.clone(), config.artifacts.clone().map(ArtifactCache::new), LimitPolicy::default());
    let discovery = Arc::new(Discovery::new(client.clone()));
    let events_shutdown = CancellationToken::new();
    let (events, events_task) = EventRecorder::start(client.clone(), identity, metrics.events_dropped(), events_shutdown.clone());
    let env = Arc::new(Environment {
        client: client.clone(),
        discovery: discovery.clone(),
        informers: Informers::new(client, discovery, shutdown.clone()),
        runtime,
        events,
        leadership,
        namespaces: config.namespaces.clone(),
        metrics: metrics.clone(),
    });

    // 4. Plugins: one controller per file of the plugin directory, followed for changes.
    let status = StatusObject { namespace: config.status_namespace.clone(), name: config.status_name.clone() };
    let supervisor = Supervisor::new(env, loader, config.controllers.clone(), config.plugins.clone(), status, shutdown.clone());
    *ready_source.lock() = Some(supervisor.clone());
    supervisor.clone().run(config.watch).await?;

    // 5. Serve until told to stop.
    shutdown.cancelled().await;
    tracing::info!("shutting down: finishing running reconciles (signal again to stop at once)");
    let graceful = async {
        supervisor.stopped().await;
        leading.cancel();
        if let Some(elector) = elector {
            let _ = elector.await;
        }
        events_shutdown.cancel();
        let _ = events_task.await;
    };
    tokio::select! {
        _ = graceful => tracing::info!("stopped"),
        _ = forced.cancelled() => tracing::warn!("second signal: stopping now"),
        _ = tokio::time::sleep(config.grace_period) => tracing::warn!("grace period of {:?} over: stopping now", config.grace_period),
    }
    Ok(())
}

/// SIGTERM and SIGINT, installed once (so none is missed between two waits).
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        Signals {
            term: signal(SignalKind::terminate()).expect("installing a SIGTERM handler"),
            int: signal(SignalKind::interrupt()).expect("installing a SIGINT handler"),
        }
    }

    async fn next(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
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
}
