//! `kubewasm:controller/fleet`: the cluster the current call's object lives in, the member
//! clusters within the plugin's reach, and `cache` and `client` calls in a named cluster. A
//! named cluster's services come from the plugin's [`Fleet`]; the call then goes through the
//! very checks of `cache` and `client` (bounds, grants, then RBAC of the plugin's identity in
//! that cluster), so reaching another cluster adds no way around them.

use std::collections::BTreeMap;
use std::sync::Arc;

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, WasmStr};

use super::super::bindings::cache::Host as CacheHost;
use super::super::bindings::client::{Host as _, PatchType};
use super::super::bindings::fleet::Cluster as WitCluster;
use super::super::bindings::types::{Error as GuestError, ErrorCode};
use super::super::bindings::{PACKAGE, PACKAGE_VERSION};
use super::super::boundary::{MAX_NAME, MAX_OBJECT, MAX_PATCH, MAX_SELECTOR};
use super::args::{LazyGvk, Read, name, namespace, owned, settle};
use super::cache::CacheCtx;
use super::client::ClientCtx;
use super::{Api, CacheReader, EventSink, HostContext, HostState, Services, error};

/// An engaged member cluster, as a plugin is told of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterInfo {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// What calls into one cluster reach: the plugin's caches, API client and Event recorder there.
#[derive(Clone)]
pub struct Target {
    pub cache: Arc<dyn CacheReader>,
    pub api: Arc<dyn Api>,
    pub events: Arc<dyn EventSink>,
}

/// Why calls into a cluster cannot be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreached {
    /// The cluster is engaged but outside the plugin's `clusters` scope.
    OutOfReach,
    /// No such cluster is engaged now.
    NotEngaged,
    /// The plugin's caches there have not listed yet (or the cluster's API server never
    /// answered since it was engaged).
    NotSynced,
}

/// The clusters one plugin works with, from where a call's object lives.
pub trait Fleet: Send + Sync {
    /// The cluster of the objects these services serve; `None` for the host's own.
    fn here(&self) -> Option<&str>;
    /// The members engaged now within the plugin's reach, sorted by name.
    fn clusters(&self) -> Vec<ClusterInfo>;
    /// What calls into `cluster` (`None`: the host's own) reach; never asked for [`Fleet::here`].
    fn target(&self, cluster: Option<&str>) -> Result<Target, Unreached>;
}

/// The fleet of a plugin that serves the host's own cluster alone: there are no others.
pub struct Alone;

impl Fleet for Alone {
    fn here(&self) -> Option<&str> {
        None
    }
    fn clusters(&self) -> Vec<ClusterInfo> {
        Vec::new()
    }
    fn target(&self, _: Option<&str>) -> Result<Target, Unreached> {
        Err(Unreached::NotEngaged)
    }
}

/// The services of calls into `cluster`, or the error value refusing them.
fn services_in(host: &HostContext, services: &Services, cluster: Option<&str>) -> Result<Services, GuestError> {
    if cluster == services.fleet.here() {
        return Ok(services.clone());
    }
    let named = cluster.map_or_else(|| "the host's own cluster".to_string(), |c| format!("cluster {c:?}"));
    match services.fleet.target(cluster) {
        Ok(Target { cache, api, events }) => Ok(Services { cache, api, events, ..services.clone() }),
        Err(Unreached::OutOfReach) => Err(host.refuse(format!("{named} is not within the plugin's clusters (its `clusters` scope)"))),
        Err(Unreached::NotEngaged) => Err(error(ErrorCode::Unavailable, format!("{named} is not engaged by this host now"))),
        Err(Unreached::NotSynced) => Err(error(ErrorCode::Unavailable, format!("the plugin's caches in {named} have not synced yet"))),
    }
}

/// A `cluster` argument, at most [`MAX_NAME`] bytes.
fn cluster(store: &impl wasmtime::AsContext, s: &Option<WasmStr>) -> Read<Option<String>> {
    s.as_ref().map(|s| owned(store, s, "cluster", MAX_NAME)).transpose()
}

/// The plugin's context, the services of the named cluster (or the refusal) and the instance's
/// memory limit, taken from the store so that the call may hold them across its await.
fn reach<T: HostState>(state: &T, named: Option<&str>) -> (Arc<HostContext>, Result<Services, GuestError>, u64) {
    let host = state.host().clone();
    let services = services_in(&host, state.services(), named);
    (host, services, state.memory_limit())
}

/// Registers a fleet function taking a cluster and an object (and then `$arg`s, lifted as they
/// are), mirroring the client function `$method`.
macro_rules! with_object {
    ($fleet:ident, $name:literal, $method:ident $(, $arg:ident: $ty:ty)*) => {
        $fleet.func_wrap_async($name, |store: StoreContextMut<'_, T>, (named, json, $($arg,)*): (Option<WasmStr>, WasmStr, $($ty,)*)| {
            Box::new(async move {
                let read = (|| -> Read<_> { Ok((cluster(&store, &named)?, owned(&store, &json, "object", MAX_OBJECT)?)) })();
                let (named, json) = match settle(read)? {
                    Ok(read) => read,
                    Err(refused) => return Ok((Err(refused),)),
                };
                let (host, services, _) = reach(store.data(), named.as_deref());
                match services {
                    Ok(services) => Ok((ClientCtx::new(&host, &services).$method(json $(, $arg)*).await?,)),
                    Err(refused) => Ok((Err(refused),)),
                }
            })
        })?;
    };
}

/// Registers the fleet's functions with their arguments read in place (`super::args`).
pub fn add_to_linker<T: HostState>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    let mut fleet = linker.instance(&format!("{PACKAGE}/fleet@{PACKAGE_VERSION}"))?;
    fleet.func_wrap("current", |store: StoreContextMut<'_, T>, (): ()| Ok((store.data().services().fleet.here().map(str::to_owned),)))?;
    fleet.func_wrap("clusters", |store: StoreContextMut<'_, T>, (): ()| {
        let clusters = store.data().services().fleet.clusters();
        Ok((clusters.into_iter().map(|c| WitCluster { name: c.name, labels: c.labels.into_iter().collect() }).collect::<Vec<_>>(),))
    })?;
    fleet.func_wrap_async("get", |store: StoreContextMut<'_, T>, (named, resource, ns, object): (Option<WasmStr>, LazyGvk, Option<WasmStr>, WasmStr)| {
        Box::new(async move {
            let read = (|| -> Read<_> { Ok((cluster(&store, &named)?, resource.read(&store)?, namespace(&store, &ns)?, name(&store, &object)?)) })();
            let (named, resource, namespace, name) = match settle(read)? {
                Ok(read) => read,
                Err(refused) => return Ok((Err(refused),)),
            };
            let (host, services, memory) = reach(store.data(), named.as_deref());
            match services {
                Ok(services) => Ok((CacheHost::get(&mut CacheCtx::new(&host, &services, memory), resource, namespace, name).await?,)),
                Err(refused) => Ok((Err(refused),)),
            }
        })
    })?;
    fleet.func_wrap_async(
        "list-objects",
        |store: StoreContextMut<'_, T>, (named, resource, ns, selector): (Option<WasmStr>, LazyGvk, Option<WasmStr>, Option<WasmStr>)| {
            Box::new(async move {
                let read = (|| -> Read<_> {
                    let selector = selector.as_ref().map(|s| owned(&store, s, "label selector", MAX_SELECTOR)).transpose()?;
                    Ok((cluster(&store, &named)?, resource.read(&store)?, namespace(&store, &ns)?, selector))
                })();
                let (named, resource, namespace, selector) = match settle(read)? {
                    Ok(read) => read,
                    Err(refused) => return Ok((Err(refused),)),
                };
                let (host, services, memory) = reach(store.data(), named.as_deref());
                match services {
                    Ok(services) => Ok((CacheHost::list_objects(&mut CacheCtx::new(&host, &services, memory), resource, namespace, selector).await?,)),
                    Err(refused) => Ok((Err(refused),)),
                }
            })
        },
    )?;
    with_object!(fleet, "apply", apply, force: bool);
    with_object!(fleet, "apply-status", apply_status, force: bool);
    with_object!(fleet, "create", create);
    with_object!(fleet, "update", update);
    with_object!(fleet, "update-status", update_status);
    fleet.func_wrap_async(
        "patch",
        |store: StoreContextMut<'_, T>,
         (named, resource, ns, object, patch_type, body): (Option<WasmStr>, LazyGvk, Option<WasmStr>, WasmStr, PatchType, WasmStr)| {
            Box::new(async move {
                let read = (|| -> Read<_> {
                    Ok((
                        cluster(&store, &named)?,
                        resource.read(&store)?,
                        namespace(&store, &ns)?,
                        name(&store, &object)?,
                        owned(&store, &body, "patch body", MAX_PATCH)?,
                    ))
                })();
                let (named, resource, namespace, name, body) = match settle(read)? {
                    Ok(read) => read,
                    Err(refused) => return Ok((Err(refused),)),
                };
                let (host, services, _) = reach(store.data(), named.as_deref());
                match services {
                    Ok(services) => Ok((ClientCtx::new(&host, &services).patch(resource, namespace, name, patch_type, body).await?,)),
                    Err(refused) => Ok((Err(refused),)),
                }
            })
        },
    )?;
    fleet.func_wrap_async("delete", |store: StoreContextMut<'_, T>, (named, resource, ns, object): (Option<WasmStr>, LazyGvk, Option<WasmStr>, WasmStr)| {
        Box::new(async move {
            let read = (|| -> Read<_> { Ok((cluster(&store, &named)?, resource.read(&store)?, namespace(&store, &ns)?, name(&store, &object)?)) })();
            let (named, resource, namespace, name) = match settle(read)? {
                Ok(read) => read,
                Err(refused) => return Ok((Err(refused),)),
            };
            let (host, services, _) = reach(store.data(), named.as_deref());
            match services {
                Ok(services) => Ok((ClientCtx::new(&host, &services).delete(resource, namespace, name).await?,)),
                Err(refused) => Ok((Err(refused),)),
            }
        })
    })?;
    Ok(())
}
