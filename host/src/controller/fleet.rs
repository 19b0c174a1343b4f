//! A plugin's member clusters: one controller of the plugin per member cluster it serves or
//! reaches (its `clusters` scope), besides the one in the host's own cluster.
//!
//! Each member controller is a whole [`Controller`] over that member's [`Environment`] — its
//! caches, its API server, the plugin's identity there — with its own queue and workers, so a
//! member's resync storm or outage waits in its own queue, never in another cluster's (the
//! host shares its executor and the plugin's instances' CPU between the controllers as it does
//! between plugins). One that only reaches a member reconciles nothing there: it keeps the
//! caches the plugin's grants ask for and its API client, for `fleet` calls.
//!
//! [`Members`] belongs to the plugin's controller in the host's own cluster: it follows the
//! engaged members and the plugin's scope, admits the plugin's identity in each member (an
//! access review there) before starting its controller, retries a refused or unreachable member
//! now and then, hands a new version to each, and stops a member's controller when the member
//! goes (its queue and keys with it). Every controller of the plugin publishes what calls into
//! its cluster reach in the shared [`Targets`], which each version's [`PluginFleet`] reads.
//!
//! Leader election and shards stay in the host's own cluster: member controllers reconcile and
//! write while this host leads, and are not sharded (a ring's followers serve their shards of
//! the host's own cluster only).

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Controller, Environment};
use crate::cluster::{Fleet as ClusterFleet, Member};
use crate::excerpt::excerpt;
use crate::manifest::{ClusterScope, Role};
use crate::plugin::LoadedPlugin;
use crate::runtime::host::{ClusterInfo, Fleet, Target, Unreached};

/// How long a member the plugin could not start in waits before it is tried again.
const RETRY: Duration = Duration::from_secs(10);
/// The most of why a plugin is not running in a member kept for the log and the status.
const REASON_BYTES: usize = 2048;

/// What calls into each of a plugin's clusters reach (`None`: the host's own), and whether
/// its caches there have synced.
#[derive(Default)]
pub struct Targets(RwLock<BTreeMap<Option<String>, Published>>);

struct Published {
    target: Target,
    labels: BTreeMap<String, String>,
    synced: tokio::sync::watch::Receiver<bool>,
}

impl Targets {
    pub(super) fn publish(&self, cluster: Option<String>, target: Target, labels: BTreeMap<String, String>, synced: tokio::sync::watch::Receiver<bool>) {
        self.0.write().insert(cluster, Published { target, labels, synced });
    }

    fn withdraw(&self, cluster: &str) {
        self.0.write().remove(&Some(cluster.to_string()));
    }
}

/// A plugin version's view of its clusters, from one of them.
pub struct PluginFleet {
    pub(super) here: Option<String>,
    pub(super) targets: Arc<Targets>,
    pub(super) scope: ClusterScope,
    pub(super) engaged: Option<Arc<ClusterFleet>>,
}

impl Fleet for PluginFleet {
    fn here(&self) -> Option<&str> {
        self.here.as_deref()
    }

    fn clusters(&self) -> Vec<ClusterInfo> {
        // Those whose caches have synced: a call into one still syncing could only wait.
        let targets = self.targets.0.read();
        targets.iter().filter(|(_, p)| *p.synced.borrow()).filter_map(|(name, p)| Some(ClusterInfo { name: name.clone()?, labels: p.labels.clone() })).collect()
    }

    fn target(&self, cluster: Option<&str>) -> Result<Target, Unreached> {
        let key = cluster.map(str::to_string);
        if let Some(published) = self.targets.0.read().get(&key) {
            return match *published.synced.borrow() {
                true => Ok(published.target.clone()),
                false => Err(Unreached::NotSynced),
            };
        }
        let Some(name) = cluster else {
            // The host's own cluster always has the plugin's controller, which published first.
            return Err(Unreached::NotSynced);
        };
        match self.engaged.as_ref().and_then(|fleet| fleet.engaged().get(name).cloned()) {
            Some(member) if self.scope.role(&member.labels).is_none() => Err(Unreached::OutOfReach),
            // In reach, but refused there (retried) or starting.
            Some(_) => Err(Unreached::NotSynced),
            None => Err(Unreached::NotEngaged),
        }
    }
}

/// Asks `member` whether the plugin's identity may do there all that `plugin` declares.
async fn admit(member: &Member, plugin: &LoadedPlugin) -> Result<(), String> {
    member.identities.admit(&plugin.described.manifest, false).await.map_err(|e| format!("admission in cluster {:?}: {e}", member.name))
}

/// A controller of the plugin in one member.
struct Running {
    controller: Arc<Controller>,
    role: Role,
    member: Arc<Member>,
    stop: CancellationToken,
}

/// The plugin's controllers in member clusters: owned by its controller in the host's own.
pub struct Members {
    env: Arc<Environment>,
    fleet: Arc<ClusterFleet>,
    pub(super) targets: Arc<Targets>,
    running: Mutex<BTreeMap<String, Running>>,
    /// Members in the plugin's scope it does not run in, and why.
    refused: Mutex<BTreeMap<String, String>>,
    /// A new version serves: its scope may differ, and each member gets it.
    changed: Notify,
}

impl Members {
    pub(super) fn new(env: Arc<Environment>, fleet: Arc<ClusterFleet>, targets: Arc<Targets>) -> Arc<Self> {
        Arc::new(Members { env, fleet, targets, running: Mutex::default(), refused: Mutex::default(), changed: Notify::new() })
    }

    /// Has each member look at the version serving now.
    pub(super) fn version_changed(&self) {
        self.changed.notify_one();
    }

    /// Follows the engaged members until `shutdown`, then stops every member controller and
    /// waits for them.
    pub(super) async fn run(self: Arc<Self>, local: Weak<Controller>, shutdown: CancellationToken) {
        let mut engaged = self.fleet.subscribe();
        loop {
            let Some(controller) = local.upgrade() else { break };
            let now = engaged.borrow_and_update().clone();
            let retry = self.follow(&controller, &now).await;
            drop(controller);
            tokio::select! {
                _ = shutdown.cancelled() => break,
                changed = engaged.changed() => if changed.is_err() { break },
                _ = self.changed.notified() => {}
                _ = tokio::time::sleep(RETRY), if retry => {}
            }
        }
        let running = std::mem::take(&mut *self.running.lock());
        for (name, member) in running {
            self.stop(&name, member).await;
        }
    }

    /// Starts, swaps and stops member controllers to match the engaged members and the serving
    /// version's scope; whether a member is left to try again.
    async fn follow(&self, local: &Arc<Controller>, engaged: &BTreeMap<String, Arc<Member>>) -> bool {
        let version = local.version();
        let scope = &version.manifest.clusters;
        let gone: Vec<String> = {
            let running = self.running.lock();
            running
                .iter()
                .filter(|(name, r)| engaged.get(*name).is_none_or(|m| !Arc::ptr_eq(m, &r.member) || scope.role(&m.labels) != Some(r.role)))
                .map(|(name, _)| name.clone())
                .collect()
        };
        for name in gone {
            let running = self.running.lock().remove(&name);
            if let Some(running) = running {
                self.stop(&name, running).await;
            }
        }
        self.refused.lock().retain(|name, _| engaged.get(name).is_some_and(|m| scope.role(&m.labels).is_some()));
        // Members are admitted and started side by side: one that does not answer delays no other.
        let work: Vec<_> = engaged
            .iter()
            .filter_map(|(name, member)| {
                let role = scope.role(&member.labels)?;
                let current = self.running.lock().get(name).map(|r| r.controller.clone());
                let (plugin, member, local) = (version.plugin.clone(), member.clone(), local.clone());
                let work: futures::future::BoxFuture<'_, (String, Result<(), String>)> = match current {
                    Some(controller) if controller.version().plugin.digest == plugin.digest => return None,
                    Some(controller) => Box::pin(async move { (member.name.clone(), self.swap(&member, &controller, plugin).await) }),
                    None => Box::pin(async move { (member.name.clone(), self.start(&local, &member, role, plugin).await) }),
                };
                Some(work)
            })
            .collect();
        let mut retry = false;
        for (name, outcome) in futures::future::join_all(work).await {
            match outcome {
                Ok(()) => {
                    self.refused.lock().remove(&name);
                }
                Err(why) => {
                    // What the member answered may be in it: kept to a few KiB.
                    let why = excerpt(&why, REASON_BYTES).into_owned();
                    tracing::warn!(plugin = %version.manifest.name, cluster = %name, "not running in cluster {name:?}: {why}");
                    self.env.metrics.member_refused(&version.manifest.name, &name).inc();
                    self.refused.lock().insert(name.clone(), why);
                    let stopped = self.running.lock().remove(&name);
                    if let Some(running) = stopped {
                        self.stop(&name, running).await;
                    }
                    retry = true;
                }
            }
        }
        retry
    }

    /// Admits the plugin in `member` and starts its controller there.
    async fn start(&self, local: &Arc<Controller>, member: &Arc<Member>, role: Role, plugin: LoadedPlugin) -> Result<(), String> {
        admit(member, &plugin).await?;
        let stop = CancellationToken::new();
        let env = Arc::new(self.env.in_member(member));
        let controller = Controller::start_member(env, plugin, role, self.targets.clone(), stop.clone()).await.map_err(|e| {
            stop.cancel();
            format!("cluster {:?}: {e}", member.name)
        })?;
        tracing::info!(plugin = %local.name, cluster = %member.name, ?role, "started in cluster");
        self.running.lock().insert(member.name.clone(), Running { controller: controller.clone(), role, member: member.clone(), stop: stop.clone() });
        if role == Role::Reach {
            // A member the plugin writes into: once its caches there have synced, every primary
            // it has elsewhere is reconciled once.
            let mut serving = self.serving();
            serving.push(Arc::downgrade(local));
            tokio::spawn(async move {
                tokio::select! {
                    _ = stop.cancelled() => {}
                    synced = controller.first_sync() => if synced.is_ok() {
                        for controller in serving.iter().filter_map(Weak::upgrade) {
                            controller.enqueue_primaries();
                        }
                    },
                }
            });
        }
        Ok(())
    }

    /// Admits a new version in `member` and hands it to the controller there.
    async fn swap(&self, member: &Arc<Member>, controller: &Arc<Controller>, plugin: LoadedPlugin) -> Result<(), String> {
        admit(member, &plugin).await?;
        controller.swap(plugin).await.map(drop).map_err(|e| format!("cluster {:?}: {e}", member.name))
    }

    /// The plugin's controllers that reconcile, besides the one in the host's own cluster.
    fn serving(&self) -> Vec<Weak<Controller>> {
        self.running.lock().values().filter(|r| r.role == Role::Serve).map(|r| Arc::downgrade(&r.controller)).collect()
    }

    async fn stop(&self, name: &str, running: Running) {
        self.targets.withdraw(name);
        running.stop.cancel();
        running.controller.stopped().await;
        tracing::info!(plugin = %running.controller.name, cluster = %name, "stopped in cluster");
    }

    /// The status listing's entries of the plugin's members: running, or why not.
    pub(super) fn entries(&self, plugin: &str) -> Vec<(String, String)> {
        let key = |cluster: &str| format!("{plugin}.cluster.{cluster}");
        let mut entries: Vec<(String, String)> = self
            .running
            .lock()
            .iter()
            .map(|(name, r)| {
                let role = match r.role {
                    Role::Serve => "serve",
                    Role::Reach => "reach",
                };
                let mut entry = format!("cluster={name} role={role} synced={}", r.controller.is_synced());
                if let Some(why) = r.member.answers.unreachable() {
                    entry.push_str(&format!(" unreachable: {why}"));
                }
                (key(name), entry)
            })
            .collect();
        entries.extend(self.refused.lock().iter().map(|(name, why)| (key(name), format!("cluster={name} refused: {why}"))));
        entries
    }
}
