//! What one call read and did. A [`Journal`] stands in front of a plugin's services for one
//! call ([`super::PluginRunner::reconcile_with`]) and keeps every read with its answer, every
//! write with what it returned, and every Event, in order, while passing each through. The
//! controller journals live reconciles that a shadow candidate replays (the candidate is then
//! asked the same questions and answered the same way), and `kubewasm record` turns a journal
//! into a table-test case.

use std::sync::Arc;

use parking_lot::Mutex;

use super::host::{Api, CacheReader, EventSink, Services};
use crate::client::{RequestError, WriteRequest};
use crate::events::ObjectEvent;
use crate::resource::{Gvk, ObjectKey, Scope};
use crate::selector::LabelSelector;

/// What a list answered: the objects by key, or the size of an answer too large to give.
pub type ListAnswer = Result<Vec<(ObjectKey, Arc<str>)>, usize>;

/// One read and the answer it got.
#[derive(Debug, Clone)]
pub enum Read {
    /// From the cache.
    Get { resource: Gvk, key: ObjectKey, answer: Option<Arc<str>> },
    /// From the cache; `Err` is the size of an answer too large to give.
    List { resource: Gvk, namespace: Option<String>, selector: Option<String>, answer: ListAnswer },
    /// From the API server (a resource the plugin may `get` but that is not cached); `None`
    /// when the request failed.
    Live { resource: Gvk, key: ObjectKey, answer: Option<Option<String>> },
}

/// One write and what it returned: the stored object, or the error's text.
#[derive(Debug, Clone)]
pub struct Written {
    pub request: WriteRequest,
    pub result: Result<Option<Arc<str>>, String>,
}

/// Everything one call read, wrote and recorded, in order.
#[derive(Debug, Clone, Default)]
pub struct Entries {
    pub reads: Vec<Read>,
    pub writes: Vec<Written>,
    pub events: Vec<ObjectEvent>,
}

impl Entries {
    /// The recorded answer of a cache get, if the call asked it.
    pub fn get(&self, resource: &Gvk, key: &ObjectKey) -> Option<Option<Arc<str>>> {
        self.reads.iter().find_map(|read| match read {
            Read::Get { resource: r, key: k, answer } if r == resource && k == key => Some(answer.clone()),
            _ => None,
        })
    }

    /// The recorded answer of a list, if the call asked it (same resource, namespace and
    /// selector text).
    pub fn list(&self, resource: &Gvk, namespace: Option<&str>, selector: Option<&str>) -> Option<ListAnswer> {
        self.reads.iter().find_map(|read| match read {
            Read::List { resource: r, namespace: n, selector: s, answer } if r == resource && n.as_deref() == namespace && s.as_deref() == selector => {
                Some(answer.clone())
            }
            _ => None,
        })
    }

    /// The recorded answer of a read from the API server, if the call made it and it succeeded.
    pub fn live(&self, resource: &Gvk, key: &ObjectKey) -> Option<Option<String>> {
        self.reads.iter().find_map(|read| match read {
            Read::Live { resource: r, key: k, answer: Some(answer) } if r == resource && k == key => Some(answer.clone()),
            _ => None,
        })
    }
}

/// Records one call's traffic to `inner` while passing it through.
pub struct Journal {
    inner: Services,
    entries: Mutex<Entries>,
}

impl Journal {
    pub fn new(inner: Services) -> Arc<Self> {
        Arc::new(Journal { inner, entries: Mutex::default() })
    }

    /// The services to hand the call: `inner`, journaled.
    pub fn services(self: &Arc<Self>) -> Services {
        Services { cache: self.clone(), api: self.clone(), events: self.clone() }
    }

    /// What was recorded so far.
    pub fn entries(&self) -> Entries {
        self.entries.lock().clone()
    }
}

impl CacheReader for Journal {
    fn scope(&self, resource: &Gvk) -> Option<Scope> {
        self.inner.cache.scope(resource)
    }

    fn get(&self, resource: &Gvk, key: &ObjectKey) -> Option<Arc<str>> {
        let answer = self.inner.cache.get(resource, key);
        self.entries.lock().reads.push(Read::Get { resource: resource.clone(), key: key.clone(), answer: answer.clone() });
        answer
    }

    fn list(&self, resource: &Gvk, namespace: Option<&str>, selector: Option<&LabelSelector>, max_bytes: usize) -> Result<Vec<(ObjectKey, Arc<str>)>, usize> {
        let answer = self.inner.cache.list(resource, namespace, selector, max_bytes);
        self.entries.lock().reads.push(Read::List {
            resource: resource.clone(),
            namespace: namespace.map(Into::into),
            selector: selector.map(ToString::to_string),
            answer: answer.clone(),
        });
        answer
    }
}

#[async_trait::async_trait]
impl Api for Journal {
    async fn write(&self, request: WriteRequest) -> Result<Option<Arc<str>>, RequestError> {
        let result = self.inner.api.write(request.clone()).await;
        let recorded = result.as_ref().map(Clone::clone).map_err(ToString::to_string);
        self.entries.lock().writes.push(Written { request, result: recorded });
        result
    }

    async fn get(&self, resource: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<String>, RequestError> {
        let answer = self.inner.api.get(resource, namespace, name).await;
        let key = ObjectKey::new(namespace, name);
        self.entries.lock().reads.push(Read::Live { resource: resource.clone(), key, answer: answer.as_ref().ok().cloned() });
        answer
    }
}

impl EventSink for Journal {
    fn publish(&self, event: ObjectEvent) {
        self.entries.lock().events.push(event.clone());
        self.inner.events.publish(event);
    }
}
