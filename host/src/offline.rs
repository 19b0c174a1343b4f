//! Plugins without a cluster: a cache filled from fixtures and a recorder that answers and
//! remembers every write and event. `kubewasm test`, the benchmarks and the runtime's own tests
//! run plugins against these.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::informer::{CacheView, ParsedObject, Store, store::ParseError};
use crate::resource::Gvk;
use crate::runtime::host::{ApiWriter, EventSink, PluginEvent, Scope, Services, WriteOp, WriteRequest};
use crate::runtime::bindings::types::Error as GuestError;

/// An in-memory cache: one store per resource, filled by hand.
#[derive(Default)]
pub struct FixtureCache {
    view: CacheView,
}

impl FixtureCache {
    /// Makes `resource` cached (empty) with the given scope.
    pub fn add_resource(&mut self, resource: Gvk, scope: Scope) -> Arc<Store> {
        let store = Arc::new(Store::new(resource, scope, None));
        self.view.insert(store.clone());
        store
    }

    /// Adds an object to its resource's store, creating one (scoped as the object is) if needed.
    pub fn insert(&mut self, resource: &Gvk, json: &str) -> Result<(), ParseError> {
        let object = ParsedObject::from_json(json.into())?;
        let store = match self.view.stores(resource).first() {
            Some(store) => store.clone(),
            None => self.add_resource(resource.clone(), if object.key.namespace().is_some() { Scope::Namespaced } else { Scope::Cluster }),
        };
        store.insert(object);
        Ok(())
    }

    pub fn view(&self) -> &CacheView {
        &self.view
    }
}

/// Records writes and events, answering each write with the object it was given.
#[derive(Default)]
pub struct Recorder {
    writes: Mutex<Vec<WriteRequest>>,
    events: Mutex<Vec<PluginEvent>>,
}

impl Recorder {
    pub fn writes(&self) -> Vec<WriteRequest> {
        self.writes.lock().clone()
    }

    /// How many writes are recorded (without copying them, unlike [`Recorder::writes`]).
    pub fn write_count(&self) -> usize {
        self.writes.lock().len()
    }

    pub fn events(&self) -> Vec<PluginEvent> {
        self.events.lock().clone()
    }

    pub fn clear(&self) {
        self.writes.lock().clear();
        self.events.lock().clear();
    }
}

#[async_trait::async_trait]
impl ApiWriter for Recorder {
    async fn write(&self, request: WriteRequest) -> Result<Option<String>, GuestError> {
        let answer = match &request.op {
            WriteOp::Apply { object, .. } | WriteOp::Create { object } | WriteOp::Update { object, .. } => Some(object.to_string()),
            WriteOp::Patch { .. } => Some(
                serde_json::json!({
                    "apiVersion": request.resource.api_version(),
                    "kind": request.resource.kind,
                    "metadata": { "name": request.name, "namespace": request.namespace },
                })
                .to_string(),
            ),
            WriteOp::Delete => None,
        };
        self.writes.lock().push(request);
        Ok(answer)
    }
}

impl EventSink for Recorder {
    fn publish(&self, event: PluginEvent) {
        self.events.lock().push(event);
    }
}

/// Services for a plugin run offline: reads from `cache`, writes and events into `recorder`.
pub fn services(cache: &FixtureCache, recorder: &Arc<Recorder>) -> Services {
    Services { cache: Arc::new(cache.view().clone()), writer: recorder.clone(), events: recorder.clone() }
}
