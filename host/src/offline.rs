//! Plugins without a cluster: a cache filled from fixtures and a recorder that answers and
//! remembers every write and event. `kubewasm test`, the benchmarks and the runtime's own tests
//! run plugins against these.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::client::{RequestError, WriteOp, WriteRequest};
use crate::events::ObjectEvent;
use crate::informer::{CacheView, ParsedObject, Writer, store::ParseError};
use crate::resource::{Gvk, ObjectKey, Scope};
use crate::runtime::host::{Api, EventSink, Services};

/// An in-memory cache: one store per resource, filled by hand.
#[derive(Default)]
pub struct FixtureCache {
    view: CacheView,
    writers: Vec<Writer>,
}

impl FixtureCache {
    /// Makes `resource` cached (empty) with the given scope.
    pub fn add_resource(&mut self, resource: Gvk, scope: Scope) -> &Writer {
        let writer = Writer::new(resource, scope, None);
        self.view.insert(writer.store().clone(), None);
        self.writers.push(writer);
        self.writers.last().expect("just pushed")
    }

    /// Adds an object to its resource's store, creating one (scoped as the object is) if needed.
    pub fn insert(&mut self, resource: &Gvk, json: &str) -> Result<(), ParseError> {
        let object = ParsedObject::from_json(json.into())?;
        let writer = match self.writers.iter().position(|w| w.store().resource() == resource) {
            Some(i) => &self.writers[i],
            None => self.add_resource(resource.clone(), if object.key.namespace().is_some() { Scope::Namespaced } else { Scope::Cluster }),
        };
        writer.insert(object);
        Ok(())
    }

    pub fn view(&self) -> &CacheView {
        &self.view
    }

    /// Hands out only the metadata of these kinds, as the host does for a plugin declaring them
    /// (`views.metadata-only`).
    pub fn metadata_only(&mut self, kinds: &[Gvk]) {
        for kind in kinds {
            self.view.metadata_only(kind);
        }
    }
}

/// Records writes and events, answering each write with the object it was given.
#[derive(Default)]
pub struct Recorder {
    writes: Mutex<Vec<WriteRequest>>,
    events: Mutex<Vec<ObjectEvent>>,
}

impl Recorder {
    pub fn writes(&self) -> Vec<WriteRequest> {
        self.writes.lock().clone()
    }

    /// How many writes are recorded (without copying them, unlike [`Recorder::writes`]).
    pub fn write_count(&self) -> usize {
        self.writes.lock().len()
    }

    pub fn events(&self) -> Vec<ObjectEvent> {
        self.events.lock().clone()
    }

    pub fn clear(&self) {
        self.writes.lock().clear();
        self.events.lock().clear();
    }

    fn record(&self, request: WriteRequest) -> Option<Arc<str>> {
        let answer = match &request.op {
            WriteOp::Apply { object, .. } | WriteOp::Create { object } | WriteOp::Update { object, .. } => Some(object.to_string().into()),
            WriteOp::Patch { .. } => Some(
                serde_json::json!({
                    "apiVersion": request.resource.api_version(),
                    "kind": request.resource.kind,
                    "metadata": { "name": request.name, "namespace": request.namespace },
                })
                .to_string()
                .into(),
            ),
            WriteOp::Delete { .. } => None,
        };
        self.writes.lock().push(request);
        answer
    }
}

impl EventSink for Recorder {
    fn publish(&self, event: ObjectEvent) {
        self.events.lock().push(event);
    }
}

/// The API of a plugin run offline: writes go to the recorder, reads of objects the plugin may
/// only `get` come from the fixture cache.
struct FixtureApi {
    cache: CacheView,
    recorder: Arc<Recorder>,
}

#[async_trait::async_trait]
impl Api for FixtureApi {
    async fn write(&self, request: WriteRequest) -> Result<Option<Arc<str>>, RequestError> {
        Ok(self.recorder.record(request))
    }

    async fn get(&self, resource: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<String>, RequestError> {
        Ok(self.cache.get(resource, &ObjectKey::new(namespace, name)).map(|json| json.to_string()))
    }
}

/// Services for a plugin run offline: reads from `cache`, writes and events into `recorder`.
pub fn services(cache: &FixtureCache, recorder: &Arc<Recorder>) -> Services {
    let api = FixtureApi { cache: cache.view().clone(), recorder: recorder.clone() };
    Services { cache: Arc::new(cache.view().clone()), api: Arc::new(api), events: recorder.clone() }
}
