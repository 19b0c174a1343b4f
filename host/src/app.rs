//! `kubewasm run`, wired in numbered phases. Owns shutdown: the first SIGTERM/SIGINT stops
//! gracefully (no new reconciles, running ones finish, the leader releases its lease, queued
//! events are sent); a second signal, or the grace period running out, stops at once.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::controller::{Controller, Environment};
use crate::discovery::Discovery;
use crate::events::EventRecorder;
use crate::informer::Informers;
use crate::leader::{LeaderConfig, LeaderElector, Leadership};
use crate::manifest::LimitPolicy;
use crate::metrics::Metrics;
use crate::plugin::artifact::ArtifactCache;
use crate::plugin::{LoadError, Loader};
use crate::runtime::{Runtime, RuntimeConfig};

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

/// The plugins of the host: running controllers, and loaded plugins still waiting to start.
#[derive(Clone, Default)]
pub struct Controllers(Arc<Mutex<Plugins>>);

#[derive(Default)]
struct Plugins {
    running: BTreeMap<String, Arc<Controller>>,
    starting: BTreeMap<String, ()>,
}

impl Controllers {
    /// `Ok` when every plugin runs with synced caches; else which do not.
    pub fn readiness(&self) -> Result<(), String> {
        let plugins = self.0.lock();
        let waiting: Vec<&str> = plugins
            .starting
            .keys()
            .map(String::as_str)
            .chain(plugins.running.values().filter(|c| !c.is_synced()).map(|c| c.name()))
            .collect();
        if waiting.is_empty() { Ok(()) } else { Err(format!("not ready: {}", waiting.join(", "))) }
    }

    fn contains(&self, name: &str) -> bool {
        let plugins = self.0.lock();
        plugins.running.contains_key(name) || plugins.starting.contains_key(name)
    }

    fn contains_any(&self) -> bool {
        let plugins = self.0.lock();
        !plugins.running.is_empty() || !plugins.starting.is_empty()
    }

    fn all(&self) -> Vec<Arc<Controller>> {
        self.0.lock().running.values().cloned().collect()
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
    let shutdown = CancellationToken::new();

    // 1. Kubernetes and the host's own endpoints.
    let client = connect(config.kubeconfig.as_deref()).await?;
    let metrics = Arc::new(Metrics::new());
    let controllers = Controllers::default();
    let ready = {
        let controllers = controllers.clone();
        Arc::new(move || controllers.readiness())
    };
    let (metrics_at, health_at) = crate::server::serve(config.metrics_addr, config.health_addr, metrics.clone(), ready, shutdown.clone()).await?;
    tracing::info!(metrics = %metrics_at, health = %health_at, "serving /metrics, /healthz and /readyz");

    // 2. Leadership: standbys keep warm caches, only the leader's workers run and write.
    let identity = identity();
    let (leadership, elector) = if config.leader_elect {
        let lease = LeaderConfig::new(&config.lease_name, &config.lease_namespace, &identity);
        let (elector, leadership) = LeaderElector::new(client.clone(), lease, metrics.leader(&config.lease_name));
        (leadership, Some(tokio::spawn(elector.run(shutdown.clone()))))
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

    // 4. Plugins: load each file; one that fails is reported and skipped, the others run.
    for path in plugin_files(&config.plugins)? {
        start_plugin(&env, &loader, &controllers, &config.controllers, &path, &shutdown).await;
    }
    if !controllers.contains_any() {
        tracing::warn!(dir = %config.plugins.display(), "no plugin is running");
    }

    // 5. Serve until told to stop.
    wait_for_signal().await;
    tracing::info!("shutting down: finishing running reconciles (Ctrl-C again to stop at once)");
    shutdown.cancel();
    let graceful = async {
        for controller in controllers.all() {
            controller.stopped().await;
        }
        if let Some(elector) = elector {
            let _ = elector.await;
        }
        events_shutdown.cancel();
        let _ = events_task.await;
    };
    tokio::select! {
        _ = graceful => tracing::info!("stopped"),
        _ = wait_for_signal() => tracing::warn!("second signal: stopping now"),
        _ = tokio::time::sleep(config.grace_period) => tracing::warn!("grace period of {:?} over: stopping now", config.grace_period),
    }
    Ok(())
}

async fn start_plugin(
    env: &Arc<Environment>,
    loader: &Loader,
    controllers: &Controllers,
    filter: &ControllerFilter,
    path: &Path,
    shutdown: &CancellationToken,
) {
    let plugin = match loader.load(path).await {
        Ok(plugin) => plugin,
        Err(e) => {
            report_load_failure(path, &e);
            return;
        }
    };
    let name = plugin.described.manifest.name.clone();
    if !filter.enables(&name) {
        tracing::info!(plugin = %name, file = %path.display(), "disabled by --controllers");
        return;
    }
    if controllers.contains(&name) {
        tracing::error!(plugin = %name, file = %path.display(), "another file already provides a plugin of this name; skipped");
        return;
    }
    let (version, digest, took, origin) = (plugin.described.manifest.version.clone(), plugin.digest, plugin.load_time, plugin.origin);
    tracing::info!(plugin = %name, %version, digest = %digest, took_ms = took.as_millis() as u64, ?origin, "loaded");
    // A resource the plugin needs may not be served yet (its CRD is installed later): keep
    // trying in the background, with backoff, rather than giving up on the plugin.
    controllers.0.lock().starting.insert(name.clone(), ());
    let (env, controllers, shutdown) = (env.clone(), controllers.clone(), shutdown.clone());
    tokio::spawn(async move {
        let mut delay = Duration::from_secs(1);
        loop {
            match Controller::start(env.clone(), plugin.clone(), shutdown.child_token()).await {
                Ok(controller) => {
                    let mut plugins = controllers.0.lock();
                    plugins.starting.remove(&name);
                    plugins.running.insert(name, controller);
                    return;
                }
                Err(e) => tracing::warn!(plugin = %name, "cannot start yet, retrying in {delay:?}: {e}"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(delay) => delay = (delay * 2).min(Duration::from_secs(30)),
            }
        }
    });
}

fn report_load_failure(path: &Path, error: &LoadError) {
    tracing::error!(file = %path.display(), "not loaded: {error}");
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
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
