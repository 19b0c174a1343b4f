//! What one call read and did. A [`Journal`] stands in front of a plugin's services for one
//! call ([`super::PluginRunner::reconcile_with`]) and keeps every read with its answer, every
//! write with what it returned, and every Event, in order, while passing each through. The
//! controller journals live reconciles that a shadow candidate replays (the candidate is then
//! asked the same questions and answered the same way), and `kubewasm record` turns a journal
//! into a table-test case.
//!
//! A journal may be bounded in bytes: what its entries hold (object texts, keys, write bodies;
//! cached objects count in full, because a journal pins the version it saw). Past the bound it
//! stops recording, passes calls through as before, and says so ([`Entries::overflowed`]).

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
    /// From the cache: a parent's children and the orphans it may adopt (a declarative plugin's
    /// claim).
    Children { resource: Gvk, namespace: Option<String>, owner: String, orphans: Option<String>, answer: Vec<(ObjectKey, Arc<str>)> },
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
    /// What the entries hold, in bytes (as [`Journal`] counts them).
    pub bytes: usize,
    /// Entries were left out: the call did more than the journal's bound.
    pub overflowed: bool,
}

/// What one entry costs besides its texts (its place in a vector, a key's two pointers).
const ENTRY_BYTES: usize = 64;

fn key_bytes(resource: &Gvk, key: &ObjectKey) -> usize {
    ENTRY_BYTES + resource.kind.len() + key.name().len() + key.namespace().map_or(0, str::len)
}

impl Read {
    fn bytes(&self) -> usize {
        match self {
            Read::Get { resource, key, answer } => key_bytes(resource, key) + answer.as_ref().map_or(0, |a| a.len()),
            Read::List { resource, answer, .. } => {
                ENTRY_BYTES
                    + resource.kind.len()
                    + answer.as_ref().map_or(0, |items| items.iter().map(|(key, json)| key_bytes(resource, key) + json.len()).sum())
            }
            Read::Children { resource, answer, owner, .. } => {
                ENTRY_BYTES + resource.kind.len() + owner.len() + answer.iter().map(|(key, json)| key_bytes(resource, key) + json.len()).sum::<usize>()
            }
            Read::Live { resource, key, answer } => key_bytes(resource, key) + answer.as_ref().and_then(Option::as_ref).map_or(0, String::len),
        }
    }
}

impl Written {
    fn bytes(&self) -> usize {
        let body = match &self.request.op {
            crate::client::WriteOp::Apply { object, .. } | crate::client::WriteOp::Create { object, .. } | crate::client::WriteOp::Update { object, .. } => {
                object.to_string().len()
            }
            crate::client::WriteOp::Patch { body, .. } => body.to_string().len(),
            _ => 0,
        };
        ENTRY_BYTES + self.request.name.len() + body + self.result.as_ref().map_or_else(String::len, |stored| stored.as_ref().map_or(0, |s| s.len()))
    }
}

impl Entries {
    /// Keeps `bytes` more, unless that passes `max`: then nothing more is kept.
    fn admit(&mut self, bytes: usize, max: usize) -> bool {
        if self.overflowed || self.bytes.saturating_add(bytes) > max {
            self.overflowed = true;
            return false;
        }
        self.bytes += bytes;
        true
    }
}

impl Entries {
    /// The recorded answer of a cache get, if the call asked it.
    pub fn get(&self, resource: &Gvk, key: &ObjectKey) -> Option<Option<Arc<str>>> {
        self.reads.iter().find_map(|read| match read {
            Read::Get { resource: r, key: k, answer } if r == resource && k == key => Some(answer.clone()),
            _ => None,
        })
    }

    /// The recorded children of `owner`, if the call asked for them (same resource, namespace
    /// and orphan selector text).
    pub fn children(&self, resource: &Gvk, namespace: Option<&str>, owner: &str, orphans: Option<&str>) -> Option<Vec<(ObjectKey, Arc<str>)>> {
        self.reads.iter().find_map(|read| match read {
            Read::Children { resource: r, namespace: n, owner: o, orphans: s, answer }
                if r == resource && n.as_deref() == namespace && o == owner && s.as_deref() == orphans =>
            {
                Some(answer.clone())
            }
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
    max_bytes: usize,
}

impl Journal {
    /// A journal of everything.
    pub fn new(inner: Services) -> Arc<Self> {
        Journal::bounded(inner, usize::MAX)
    }

    /// A journal that keeps at most `max_bytes` of entries.
    pub fn bounded(inner: Services, max_bytes: usize) -> Arc<Self> {
        Arc::new(Journal { inner, entries: Mutex::default(), max_bytes })
    }

    fn read(&self, read: Read) {
        let mut entries = self.entries.lock();
        if entries.admit(read.bytes(), self.max_bytes) {
            entries.reads.push(read);
        }
    }

    /// The services to hand the call: `inner`, journaled.
    pub fn services(self: &Arc<Self>) -> Services {
        // Calls into other clusters are not journaled: a candidate's replay reaches no other cluster.
        Services { cache: self.clone(), api: self.clone(), events: self.clone(), clock: self.inner.clock, fleet: self.inner.fleet.clone() }
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
        self.read(Read::Get { resource: resource.clone(), key: key.clone(), answer: answer.clone() });
        answer
    }

    fn list(&self, resource: &Gvk, namespace: Option<&str>, selector: Option<&LabelSelector>, max_bytes: usize) -> Result<Vec<(ObjectKey, Arc<str>)>, usize> {
        let answer = self.inner.cache.list(resource, namespace, selector, max_bytes);
        self.read(Read::List {
            resource: resource.clone(),
            namespace: namespace.map(Into::into),
            selector: selector.map(ToString::to_string),
            answer: answer.clone(),
        });
        answer
    }

    fn children(&self, resource: &Gvk, namespace: Option<&str>, owner: &str, orphans: Option<&LabelSelector>) -> Vec<(ObjectKey, Arc<str>)> {
        let answer = self.inner.cache.children(resource, namespace, owner, orphans);
        self.read(Read::Children {
            resource: resource.clone(),
            namespace: namespace.map(Into::into),
            owner: owner.into(),
            orphans: orphans.map(ToString::to_string),
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
        let written = Written { request, result: recorded };
        let mut entries = self.entries.lock();
        if entries.admit(written.bytes(), self.max_bytes) {
            entries.writes.push(written);
        }
        result
    }

    async fn get(&self, resource: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<String>, RequestError> {
        let answer = self.inner.api.get(resource, namespace, name).await;
        let key = ObjectKey::new(namespace, name);
        self.read(Read::Live { resource: resource.clone(), key, answer: answer.as_ref().ok().cloned() });
        answer
    }
}

impl EventSink for Journal {
    fn publish(&self, event: ObjectEvent) {
        let mut entries = self.entries.lock();
        if entries.admit(ENTRY_BYTES + event.note.len() + event.reason.len() + event.key.name().len(), self.max_bytes) {
            entries.events.push(event.clone());
        }
        drop(entries);
        self.inner.events.publish(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache holding 1000 objects of 1 KiB.
    struct Big;

    impl CacheReader for Big {
        fn scope(&self, _: &Gvk) -> Option<Scope> {
            Some(Scope::Namespaced)
        }
        fn get(&self, _: &Gvk, _: &ObjectKey) -> Option<Arc<str>> {
            None
        }
        fn list(&self, _: &Gvk, _: Option<&str>, _: Option<&LabelSelector>, _: usize) -> Result<Vec<(ObjectKey, Arc<str>)>, usize> {
            let object: Arc<str> = "x".repeat(1024).into();
            Ok((0..1000).map(|i| (ObjectKey::new(Some("ns"), &format!("o{i}")), object.clone())).collect())
        }
        fn children(&self, _: &Gvk, _: Option<&str>, _: &str, _: Option<&LabelSelector>) -> Vec<(ObjectKey, Arc<str>)> {
            Vec::new()
        }
    }

    #[test]
    fn a_bounded_journal_stops_keeping_at_its_bound_and_passes_calls_through() {
        let services = Services { cache: Arc::new(Big), ..Services::unreachable() };
        let journal = Journal::bounded(services, 3 << 20);
        let resource = Gvk::new("", "v1", "ConfigMap");
        for _ in 0..10 {
            // Every answer still reaches the call.
            assert_eq!(journal.list(&resource, None, None, usize::MAX).unwrap().len(), 1000);
        }
        let entries = journal.entries();
        assert!(entries.overflowed);
        assert_eq!(entries.reads.len(), 2, "two lists of ~1.1 MB fit 3 MiB, the third does not");
        assert!(entries.bytes <= 3 << 20);
        // Unbounded (kubewasm record): everything.
        let all = Journal::new(Services { cache: Arc::new(Big), ..Services::unreachable() });
        for _ in 0..10 {
            all.list(&resource, None, None, usize::MAX).unwrap();
        }
        assert!(!all.entries().overflowed && all.entries().reads.len() == 10);
    }
}
