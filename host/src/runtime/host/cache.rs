//! `kubewasm:controller/cache`: reads, limited to what the plugin may read. Cached resources are
//! served from the shared informer caches (the guest receives copies of the cached JSON text),
//! bounded in size; resources the plugin may only `get` are read from the API server as the
//! plugin.

use std::sync::Arc;

use wasmtime::StoreContextMut;
use wasmtime::component::{HasData, Linker, WasmStr};

use super::super::bindings::cache::Host;
use super::super::bindings::types::{self, Error as GuestError, ErrorCode, Gvk as WitGvk};
use super::super::bindings::{PACKAGE, PACKAGE_VERSION};
use super::super::boundary::{MAX_OWNER, MAX_SELECTOR};
use super::args::{LazyGvk, Read, name, namespace, owned, settle};
use super::{HostContext, HostState, Services, error};
use crate::informer::CacheView;
use crate::manifest::Verb;
use crate::resource::{Gvk, ObjectKey, Scope};
use crate::selector::LabelSelector;

/// The cache as the runtime sees it: the informer stores of one plugin (or a test fixture).
pub trait CacheReader: Send + Sync {
    /// `None` when no cache holds this resource for the plugin.
    fn scope(&self, resource: &Gvk) -> Option<Scope>;
    fn get(&self, resource: &Gvk, key: &ObjectKey) -> Option<Arc<str>>;
    /// Objects in `namespace` (all when `None`) matching `selector`, sorted by key; `Err` with
    /// the size the answer would have had when it passes `max_bytes` (not built).
    fn list(&self, resource: &Gvk, namespace: Option<&str>, selector: Option<&LabelSelector>, max_bytes: usize) -> Result<Vec<(ObjectKey, Arc<str>)>, usize>;
    /// Objects in `namespace` (all when `None`) whose controller owner reference names the
    /// object of uid `owner`, and, with `orphans`, those without a controller owner that match
    /// it, sorted by key: what a declarative plugin's parent may claim.
    fn children(&self, resource: &Gvk, namespace: Option<&str>, owner: &str, orphans: Option<&LabelSelector>) -> Vec<(ObjectKey, Arc<str>)>;
}

impl CacheReader for CacheView {
    fn scope(&self, resource: &Gvk) -> Option<Scope> {
        CacheView::scope(self, resource)
    }

    fn get(&self, resource: &Gvk, key: &ObjectKey) -> Option<Arc<str>> {
        CacheView::get(self, resource, key)
    }

    fn list(&self, resource: &Gvk, namespace: Option<&str>, selector: Option<&LabelSelector>, max_bytes: usize) -> Result<Vec<(ObjectKey, Arc<str>)>, usize> {
        CacheView::list(self, resource, namespace, selector, max_bytes)
    }

    fn children(&self, resource: &Gvk, namespace: Option<&str>, owner: &str, orphans: Option<&LabelSelector>) -> Vec<(ObjectKey, Arc<str>)> {
        CacheView::children(self, resource, namespace, owner, orphans)
    }
}

pub struct CacheCtx<'a> {
    host: &'a HostContext,
    services: &'a Services,
    /// The plugin's memory limit: an answer may take a quarter of it.
    memory_bytes: u64,
}

pub struct CacheData;

impl HasData for CacheData {
    type Data<'a> = CacheCtx<'a>;
}

pub fn context<T: HostState>(state: &mut T) -> CacheCtx<'_> {
    CacheCtx { memory_bytes: state.memory_limit(), host: state.host(), services: state.services() }
}

impl types::Host for CacheCtx<'_> {}

/// Registers `cache.get`, `cache.list-objects` and `cache.list-controlled` with their arguments
/// read in place (`super::args`).
pub fn add_to_linker<T: HostState>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    let mut cache = linker.instance(&format!("{PACKAGE}/cache@{PACKAGE_VERSION}"))?;
    cache.func_wrap_async("get", |mut store: StoreContextMut<'_, T>, (resource, ns, object): (LazyGvk, Option<WasmStr>, WasmStr)| {
        Box::new(async move {
            let read = (|| -> Read<_> { Ok((resource.read(&store)?, namespace(&store, &ns)?, name(&store, &object)?)) })();
            match settle(read)? {
                Ok((resource, namespace, name)) => Ok((Host::get(&mut context(store.data_mut()), resource, namespace, name).await?,)),
                Err(refused) => Ok((Err(refused),)),
            }
        })
    })?;
    cache.func_wrap_async("list-objects", |mut store: StoreContextMut<'_, T>, (resource, ns, selector): (LazyGvk, Option<WasmStr>, Option<WasmStr>)| {
        Box::new(async move {
            let read = (|| -> Read<_> {
                let selector = selector.as_ref().map(|s| owned(&store, s, "label selector", MAX_SELECTOR)).transpose()?;
                Ok((resource.read(&store)?, namespace(&store, &ns)?, selector))
            })();
            match settle(read)? {
                Ok((resource, namespace, selector)) => Ok((Host::list_objects(&mut context(store.data_mut()), resource, namespace, selector).await?,)),
                Err(refused) => Ok((Err(refused),)),
            }
        })
    })?;
    cache.func_wrap_async("list-controlled", |mut store: StoreContextMut<'_, T>, (resource, ns, owner): (LazyGvk, Option<WasmStr>, WasmStr)| {
        Box::new(async move {
            let read = (|| -> Read<_> { Ok((resource.read(&store)?, namespace(&store, &ns)?, owned(&store, &owner, "owner", MAX_OWNER)?)) })();
            match settle(read)? {
                Ok((resource, namespace, owner)) => Ok((Host::list_controlled(&mut context(store.data_mut()), resource, namespace, owner).await?,)),
                Err(refused) => Ok((Err(refused),)),
            }
        })
    })?;
    Ok(())
}

/// The largest `list-objects` answer for a plugin with this memory limit.
pub fn list_bound(memory_bytes: u64) -> usize {
    usize::try_from(memory_bytes / 4).unwrap_or(usize::MAX)
}

impl<'a> CacheCtx<'a> {
    /// Reads as `host` may, from `services`, for an instance of `memory_bytes`.
    pub(crate) fn new(host: &'a HostContext, services: &'a Services, memory_bytes: u64) -> Self {
        CacheCtx { host, services, memory_bytes }
    }

    /// Checks that `resource` is cached and that `namespace` fits its scope.
    fn scope_check(&self, resource: &Gvk, namespace: Option<&str>, name: Option<&str>) -> Result<(), GuestError> {
        match (self.services.cache.scope(resource), namespace, name) {
            (None, _, _) => Err(error(
                ErrorCode::Invalid,
                format!("{resource} is not cached: the API server does not serve it, it is not ready yet, or the plugin holds no list or watch grant on it"),
            )),
            (Some(Scope::Cluster), Some(ns), _) => Err(error(ErrorCode::Invalid, format!("{resource} is cluster-scoped, but namespace {ns:?} was given"))),
            (Some(Scope::Namespaced), None, Some(name)) => Err(error(ErrorCode::Invalid, format!("{resource} is namespaced: give the namespace of {name:?}"))),
            _ => Ok(()),
        }
    }

    pub(crate) async fn get(&self, resource: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<String>, GuestError> {
        let manifest = self.host.check(Verb::Get, resource, None, namespace, Some(name))?;
        if manifest.reads_live(resource) {
            self.host.cache_only(&format!("a live read of {resource} (not cached)"))?;
            let found = self.services.api.get(resource, namespace, name).await.map_err(super::client::guest_error)?;
            return Ok(found.map(|json| self.host.as_answered(resource, &json)));
        }
        self.scope_check(resource, namespace, Some(name))?;
        let key = ObjectKey::new(namespace, name);
        Ok(self.services.cache.get(resource, &key).map(|json| json.to_string()))
    }

    fn list(&self, resource: &Gvk, namespace: Option<&str>, selector: Option<&str>) -> Result<Vec<String>, GuestError> {
        let objects = self.list_keyed(resource, namespace, selector, list_bound(self.memory_bytes))?;
        Ok(objects.into_iter().map(|(_, json)| json.to_string()).collect())
    }

    /// The namespaces a read across all of them may see (`None`: as the grant checked by
    /// `host.check` says), or the refusal of a read of `resource` in `namespace`.
    fn readable(&self, resource: &Gvk, namespace: Option<&str>) -> Result<Option<std::collections::BTreeSet<&'a str>>, GuestError> {
        // Across namespaces, a plugin granted only some namespaces sees only those.
        let visible = match (namespace, self.host.manifest.as_deref()) {
            (None, Some(manifest)) => manifest.readable_namespaces(resource, Verb::List).filter(|set| !set.is_empty()),
            _ => None,
        };
        if visible.is_none() {
            self.host.check(Verb::List, resource, None, namespace, None)?;
        }
        self.scope_check(resource, namespace, None)?;
        Ok(visible)
    }

    /// `list-controlled`: the children of `owner`, read as `list-objects` reads, bounded alike.
    fn list_controlled(&self, resource: &Gvk, namespace: Option<&str>, owner: &str) -> Result<Vec<String>, GuestError> {
        let visible = self.readable(resource, namespace)?;
        let mut children = self.services.cache.children(resource, namespace, owner, None);
        children.retain(|(key, _)| visible.as_ref().is_none_or(|set| key.namespace().is_some_and(|ns| set.contains(ns))));
        let bound = list_bound(self.memory_bytes);
        let bytes: usize = children.iter().map(|(_, json)| json.len()).sum();
        if bytes > bound {
            self.host.metrics.oversized_lists.inc();
            return Err(error(
                ErrorCode::Invalid,
                format!(
                    "the {resource} objects {owner} controls total {bytes} bytes, more than this plugin may receive at once ({bound} bytes, a quarter of its memory limit): narrow it by namespace"
                ),
            ));
        }
        Ok(children.into_iter().map(|(_, json)| json.to_string()).collect())
    }

    /// `list-objects` with the keys, its answer at most `bound` bytes.
    pub(crate) fn list_keyed(
        &self,
        resource: &Gvk,
        namespace: Option<&str>,
        selector: Option<&str>,
        bound: usize,
    ) -> Result<Vec<(ObjectKey, Arc<str>)>, GuestError> {
        let visible = self.readable(resource, namespace)?;
        let selector = selector.map(str::parse::<LabelSelector>).transpose().map_err(|e| error(ErrorCode::Invalid, e.to_string()))?;
        let objects = self.services.cache.list(resource, namespace, selector.as_ref(), bound).map_err(|bytes| {
            self.host.metrics.oversized_lists.inc();
            let scope = namespace.map_or("in every namespace".to_string(), |ns| format!("in namespace {ns}"));
            error(
                ErrorCode::Invalid,
                format!(
                    "listing {resource} {scope}{} would return {bytes} bytes, more than this plugin may receive at once ({bound} bytes, a quarter of its memory limit): narrow the list by namespace or label selector",
                    selector.as_ref().map(|s| format!(" matching {s}")).unwrap_or_default()
                ),
            )
        })?;
        Ok(objects.into_iter().filter(|(key, _)| visible.as_ref().is_none_or(|set| key.namespace().is_some_and(|ns| set.contains(ns)))).collect())
    }
}

impl Host for CacheCtx<'_> {
    async fn get(&mut self, resource: WitGvk, namespace: Option<String>, name: String) -> wasmtime::Result<Result<Option<String>, GuestError>> {
        Ok(CacheCtx::get(self, &resource.into(), namespace.as_deref(), &name).await)
    }

    async fn list_objects(
        &mut self,
        resource: WitGvk,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> wasmtime::Result<Result<Vec<String>, GuestError>> {
        Ok(self.list(&resource.into(), namespace.as_deref(), label_selector.as_deref()))
    }

    async fn list_controlled(&mut self, resource: WitGvk, namespace: Option<String>, owner: String) -> wasmtime::Result<Result<Vec<String>, GuestError>> {
        Ok(CacheCtx::list_controlled(self, &resource.into(), namespace.as_deref(), &owner))
    }
}

impl From<WitGvk> for Gvk {
    fn from(g: WitGvk) -> Self {
        Gvk { group: g.group, version: g.version, kind: g.kind }
    }
}

impl From<&Gvk> for WitGvk {
    fn from(g: &Gvk) -> Self {
        WitGvk { group: g.group.clone(), version: g.version.clone(), kind: g.kind.clone() }
    }
}
