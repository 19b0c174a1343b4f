//! Shared informers: one list+watch per (resource, namespace scope, label selector) for all
//! plugins that need it, each feeding a [`Store`] and notifying its subscribers.

pub mod store;

use std::collections::HashMap;
use std::sync::Arc;

pub use store::{Entry, ParsedObject, Store};

use crate::resource::{Gvk, ObjectKey};
use crate::runtime::host::{CacheReader, Scope};
use crate::selector::LabelSelector;

/// A plugin's view of the caches: the store of each resource it may read.
#[derive(Clone, Default)]
pub struct CacheView {
    stores: HashMap<Gvk, Arc<Store>>,
}

impl CacheView {
    pub fn insert(&mut self, store: Arc<Store>) {
        self.stores.insert(store.resource().clone(), store);
    }

    pub fn store(&self, resource: &Gvk) -> Option<&Arc<Store>> {
        self.stores.get(resource)
    }
}

impl CacheReader for CacheView {
    fn scope(&self, resource: &Gvk) -> Option<Scope> {
        self.stores.get(resource).map(|s| s.scope())
    }

    fn get(&self, resource: &Gvk, key: &ObjectKey) -> Option<Arc<str>> {
        self.stores.get(resource)?.get(key)
    }

    fn list(&self, resource: &Gvk, namespace: Option<&str>, selector: Option<&LabelSelector>) -> Vec<(ObjectKey, Arc<str>)> {
        self.stores.get(resource).map(|s| s.list(namespace, selector)).unwrap_or_default()
    }
}
