//! `kubewasm:controller/cache`: reads from the shared informer caches, limited to what the
//! plugin may read. The guest receives copies of the cached JSON text.

use std::sync::Arc;

use wasmtime::component::HasData;

use super::super::bindings::cache::Host;
use super::super::bindings::types::{self, Error as GuestError, ErrorCode, Gvk as WitGvk};
use super::super::instance::InstanceState;
use super::{HostContext, error};
use crate::manifest::Verb;
use crate::resource::{Gvk, ObjectKey};
use crate::selector::LabelSelector;

/// Whether a resource's objects live in namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Namespaced,
    Cluster,
}

/// The cache as the runtime sees it: the informer stores of one plugin (or a test fixture).
pub trait CacheReader: Send + Sync {
    /// `None` when no cache holds this resource for the plugin.
    fn scope(&self, resource: &Gvk) -> Option<Scope>;
    fn get(&self, resource: &Gvk, key: &ObjectKey) -> Option<Arc<str>>;
    /// Objects in `namespace` (all when `None`) matching `selector`, sorted by key.
    fn list(&self, resource: &Gvk, namespace: Option<&str>, selector: Option<&LabelSelector>) -> Vec<(ObjectKey, Arc<str>)>;
}

pub struct CacheCtx<'a> {
    host: &'a HostContext,
}

pub struct CacheData;

impl HasData for CacheData {
    type Data<'a> = CacheCtx<'a>;
}

pub fn context(state: &mut InstanceState) -> CacheCtx<'_> {
    CacheCtx { host: &state.host }
}

impl types::Host for CacheCtx<'_> {}

impl CacheCtx<'_> {
    /// Checks that `resource` is cached and that `namespace` fits its scope.
    fn scope_check(&self, resource: &Gvk, namespace: Option<&str>, name: Option<&str>) -> Result<(), GuestError> {
        match (self.host.services.cache.scope(resource), namespace, name) {
            (None, _, _) => Err(error(
                ErrorCode::Invalid,
                format!("{resource} is not cached: the API server does not serve it, or it is not ready yet"),
            )),
            (Some(Scope::Cluster), Some(ns), _) => {
                Err(error(ErrorCode::Invalid, format!("{resource} is cluster-scoped, but namespace {ns:?} was given")))
            }
            (Some(Scope::Namespaced), None, Some(name)) => {
                Err(error(ErrorCode::Invalid, format!("{resource} is namespaced: give the namespace of {name:?}")))
            }
            _ => Ok(()),
        }
    }

    fn get(&self, resource: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<String>, GuestError> {
        self.host.check(Verb::Get, resource, None, namespace)?;
        self.scope_check(resource, namespace, Some(name))?;
        let key = ObjectKey::new(namespace, name);
        Ok(self.host.services.cache.get(resource, &key).map(|json| json.to_string()))
    }

    fn list(&self, resource: &Gvk, namespace: Option<&str>, selector: Option<&str>) -> Result<Vec<String>, GuestError> {
        // Across namespaces, a plugin granted only some namespaces sees only those.
        let visible = match (namespace, self.host.manifest.as_deref()) {
            (None, Some(manifest)) => manifest.readable_namespaces(resource, Verb::List).filter(|set| !set.is_empty()),
            _ => None,
        };
        if visible.is_none() {
            self.host.check(Verb::List, resource, None, namespace)?;
        }
        self.scope_check(resource, namespace, None)?;
        let selector = selector
            .map(str::parse::<LabelSelector>)
            .transpose()
            .map_err(|e| error(ErrorCode::Invalid, e.to_string()))?;
        let objects = self.host.services.cache.list(resource, namespace, selector.as_ref());
        Ok(objects
            .into_iter()
            .filter(|(key, _)| visible.as_ref().is_none_or(|set| key.namespace().is_some_and(|ns| set.contains(ns))))
            .map(|(_, json)| json.to_string())
            .collect())
    }
}

impl Host for CacheCtx<'_> {
    fn get(&mut self, resource: WitGvk, namespace: Option<String>, name: String) -> wasmtime::Result<Result<Option<String>, GuestError>> {
        Ok(CacheCtx::get(self, &resource.into(), namespace.as_deref(), &name))
    }

    fn list_objects(
        &mut self,
        resource: WitGvk,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> wasmtime::Result<Result<Vec<String>, GuestError>> {
        Ok(self.list(&resource.into(), namespace.as_deref(), label_selector.as_deref()))
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
