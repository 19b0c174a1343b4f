//! Plugins without a cluster: a cache filled from fixtures and a recorder that remembers every
//! write and event. A write is either only recorded (answered with the object as given, the
//! cache left as it was: the benchmarks call a plugin on one state again and again) or also
//! stored the way an API server stores it, so that the plugin reads its own writes as the WIT
//! promises and the host does (`kubewasm test`, `kubewasm record`). The runtime's own tests run
//! plugins against these too.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::client::{PatchKind, RequestError, WriteOp, WriteRequest};
use crate::events::ObjectEvent;
use crate::informer::{CacheView, ParsedObject, Writer, store::ParseError};
use crate::manifest::ClusterScope;
use crate::resource::{Gvk, ObjectKey, Scope};
use crate::runtime::host::{Alone, Api, ClusterInfo, EventSink, Fleet, Services, Target, Unreached};

/// An in-memory cache: one store per resource, filled by hand.
#[derive(Default)]
pub struct FixtureCache {
    view: CacheView,
    writers: Vec<Arc<Writer>>,
}

/// What the offline API does with a write besides recording it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// Nothing: answered with the object as given; every call sees the cache as it was filled.
    Recorded,
    /// Stored in the fixture cache as an API server stores it (see [`Stored`]).
    Stored,
}

impl FixtureCache {
    /// Makes `resource` cached (empty) with the given scope.
    pub fn add_resource(&mut self, resource: Gvk, scope: Scope) -> &Writer {
        let writer = Writer::new(resource, scope, None);
        self.view.insert(writer.store().clone(), None);
        self.writers.push(Arc::new(writer));
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

    /// Adds an object parsed already to `resource`'s store, which must have been added.
    pub fn insert_parsed(&self, resource: &Gvk, object: ParsedObject) {
        if let Some(writer) = self.writers.iter().find(|w| w.store().resource() == resource) {
            writer.insert(object);
        }
    }

    pub fn view(&self) -> &CacheView {
        &self.view
    }

    /// Hands out what `manifest` reads of each kind, as the host does for the plugin
    /// (`views.metadata-only`, `projections`).
    pub fn hand_as(&mut self, manifest: &crate::manifest::Manifest) {
        self.view.hand_as(manifest);
    }
}

/// Records writes and events, answering each write with the object it was given.
#[derive(Default)]
pub struct Recorder {
    /// Each write with the member cluster it was made in (`None`: the host's own).
    writes: Mutex<Vec<(Option<String>, WriteRequest)>>,
    events: Mutex<Vec<ObjectEvent>>,
}

impl Recorder {
    pub fn writes(&self) -> Vec<WriteRequest> {
        self.writes.lock().iter().map(|(_, w)| w.clone()).collect()
    }

    /// The writes with the member cluster each was made in (`None`: the host's own).
    pub fn writes_in_clusters(&self) -> Vec<(Option<String>, WriteRequest)> {
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

    fn record(&self, cluster: Option<&str>, request: WriteRequest) -> Option<Arc<str>> {
        let answer = match &request.op {
            WriteOp::Apply { object, .. } | WriteOp::Create { object, .. } | WriteOp::Update { object, .. } => Some(object.to_string().into()),
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
        self.writes.lock().push((cluster.map(str::to_string), request));
        answer
    }
}

impl EventSink for Recorder {
    fn publish(&self, event: ObjectEvent) {
        self.events.lock().push(event);
    }
}

/// The API of a plugin run offline: writes go to the recorder (and, when stored, into the
/// cache), reads of objects the plugin may only `get` come from the fixture cache.
struct FixtureApi {
    cache: CacheView,
    recorder: Arc<Recorder>,
    stored: Option<Stored>,
    /// The member cluster it writes in; `None` for the host's own.
    cluster: Option<String>,
}

#[async_trait::async_trait]
impl Api for FixtureApi {
    async fn write(&self, request: WriteRequest) -> Result<Option<Arc<str>>, RequestError> {
        let outcome = match &self.stored {
            Some(stored) => stored.write(&request),
            None => None,
        };
        let answer = self.recorder.record(self.cluster.as_deref(), request);
        outcome.unwrap_or(Ok(answer))
    }

    async fn get(&self, resource: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<String>, RequestError> {
        Ok(self.cache.get(resource, &ObjectKey::new(namespace, name)).map(|json| json.to_string()))
    }
}

/// Services for a plugin run offline: reads from `cache`, writes and events into `recorder`;
/// writes also into `cache` when they are [`Writes::Stored`].
pub fn services(cache: &FixtureCache, recorder: &Arc<Recorder>, writes: Writes) -> Services {
    Services::new(target(cache, recorder, writes, None), Arc::new(Alone))
}

/// What calls into one cluster of an offline fleet reach: its fixture cache, its writes recorded
/// (tagged with the cluster) into the shared `recorder`.
pub fn target(cache: &FixtureCache, recorder: &Arc<Recorder>, writes: Writes, cluster: Option<&str>) -> Target {
    let stored = (writes == Writes::Stored).then(|| Stored::new(cache));
    let api = FixtureApi { cache: cache.view().clone(), recorder: recorder.clone(), stored, cluster: cluster.map(str::to_string) };
    Target { cache: Arc::new(cache.view().clone()), api: Arc::new(api), events: recorder.clone() }
}

/// The clusters of a plugin run offline: the host's own and members with their labels, each
/// with its [`target`], seen from the cluster `here`.
pub struct OfflineFleet {
    pub here: Option<String>,
    pub scope: ClusterScope,
    /// Every cluster's target (`None`: the host's own), with a member's labels.
    pub targets: BTreeMap<Option<String>, (Target, BTreeMap<String, String>)>,
}

impl Fleet for OfflineFleet {
    fn here(&self) -> Option<&str> {
        self.here.as_deref()
    }

    fn clusters(&self) -> Vec<ClusterInfo> {
        self.targets
            .iter()
            .filter_map(|(name, (_, labels))| Some(ClusterInfo { name: name.clone()?, labels: labels.clone() }))
            .filter(|c| self.scope.role(&c.labels).is_some())
            .collect()
    }

    fn target(&self, cluster: Option<&str>) -> Result<Target, Unreached> {
        match self.targets.get(&cluster.map(str::to_string)) {
            None => Err(Unreached::NotEngaged),
            Some((_, labels)) if cluster.is_some() && self.scope.role(labels).is_none() => Err(Unreached::OutOfReach),
            Some((target, _)) => Ok(target.clone()),
        }
    }
}

/// Writes stored in the fixture cache the way an API server stores them, as far as a plugin can
/// tell from its answers and its next reads (the SDKs' fake hosts do the same):
///
/// - every stored write gets the next `resourceVersion`, counting on from the highest in the
///   cache; a created object gets `uid-N` unless it names a uid, and `generation` 1; a change
///   of `spec` adds one to `generation`;
/// - apply creates, or merges the object (without `status`) into the stored one — maps merge,
///   anything else replaces; apply-status merges `status` into an existing object;
/// - create refuses an existing object (`AlreadyExists`); update and update-status refuse a
///   missing one (`NotFound`) and a stale `resourceVersion` (`Conflict`), keep `uid`,
///   `generation` and the other half (status, or all but status);
/// - merge and strategic patches merge (`null` removes), JSON patches apply (RFC 6902), each
///   refusing a missing object; a merge patch naming a `resourceVersion` must name the stored one;
/// - delete removes (`NotFound` when missing; `Conflict` when its uid precondition fails).
///
/// A write to a kind the case does not cache is only recorded. Field ownership (managed fields,
/// apply conflicts), defaulting and admission are an API server's and not modelled.
struct Stored {
    writers: Vec<Arc<Writer>>,
    /// The next `resourceVersion` and the next generated uid.
    counters: Mutex<(u64, u64)>,
}

impl Stored {
    fn new(cache: &FixtureCache) -> Self {
        let highest = cache.writers.iter().flat_map(|w| w.store().entries()).map(|(_, entry)| entry.version()).max().unwrap_or(0);
        Stored { writers: cache.writers.clone(), counters: Mutex::new((highest + 1, 1)) }
    }

    /// `None` when the kind is not cached (the write is only recorded).
    fn write(&self, request: &WriteRequest) -> Option<Result<Option<Arc<str>>, RequestError>> {
        let writer = self.writers.iter().find(|w| w.store().resource() == &request.resource)?;
        let key = ObjectKey::new(request.namespace.as_deref(), &request.name);
        let current: Option<Value> = writer.store().get(&key).and_then(|json| serde_json::from_str(&json).ok());
        let what = format!("{} {key}", request.resource);
        let missing = || refusal(404, "NotFound", format!("{what} not found"));
        let stale = |object: &Value, current: &Value| {
            let version = &object["metadata"]["resourceVersion"];
            (!version.is_null() && *version != current["metadata"]["resourceVersion"]).then(|| {
                refusal(409, "Conflict", format!("{what}: the object has been modified; please apply your changes to the latest version and try again"))
            })
        };
        let next = match (&request.op, current) {
            (WriteOp::Delete { uid }, Some(current)) => {
                if uid.as_ref().is_some_and(|uid| current["metadata"]["uid"] != json!(uid)) {
                    return Some(Err(refusal(409, "Conflict", format!("{what}: the UID in the precondition does not match"))));
                }
                writer.forget(&key);
                return Some(Ok(None));
            }
            (WriteOp::Create { object, .. }, None) | (WriteOp::Apply { object, status: false, .. }, None) => self.created(object.clone()),
            (WriteOp::Create { .. }, Some(_)) => return Some(Err(refusal(409, "AlreadyExists", format!("{what} already exists")))),
            (WriteOp::Apply { object, status: false, .. }, Some(current)) => {
                let mut patch = object.clone();
                if let Some(fields) = patch.as_object_mut() {
                    fields.remove("status");
                }
                self.changed(&current, merge(current.clone(), &patch, false))
            }
            (WriteOp::Apply { object, status: true, .. }, Some(mut current)) => {
                let status = merge(current.get("status").cloned().unwrap_or(json!({})), &object["status"], false);
                current["status"] = status;
                self.changed(&current.clone(), current)
            }
            (WriteOp::Update { object, status }, Some(current)) => {
                if let Some(conflict) = stale(object, &current) {
                    return Some(Err(conflict));
                }
                let mut next = object.clone();
                if *status {
                    next = current.clone();
                    next["status"] = object.get("status").cloned().unwrap_or(Value::Null);
                } else {
                    for field in ["uid", "generation"] {
                        if let Some(kept) = current["metadata"].get(field) {
                            next["metadata"][field] = kept.clone();
                        }
                    }
                    match current.get("status") {
                        Some(status) => next["status"] = status.clone(),
                        None => drop(next.as_object_mut().and_then(|o| o.remove("status"))),
                    }
                }
                self.changed(&current, next)
            }
            (WriteOp::Patch { patch_type: PatchKind::Json, body }, Some(current)) => {
                let patch: json_patch::Patch = match serde_json::from_value(body.clone()) {
                    Ok(patch) => patch,
                    Err(e) => return Some(Err(RequestError::Body(e))),
                };
                let mut next = current.clone();
                if let Err(e) = json_patch::patch(&mut next, &patch) {
                    return Some(Err(refusal(422, "Invalid", format!("{what}: the JSON patch does not apply: {e}"))));
                }
                self.changed(&current, next)
            }
            (WriteOp::Patch { body, .. }, Some(current)) => {
                if let Some(conflict) = stale(body, &current) {
                    return Some(Err(conflict));
                }
                self.changed(&current, merge(current.clone(), body, true))
            }
            (_, None) => return Some(Err(missing())),
        };
        let json: Arc<str> = next.to_string().into();
        Some(match ParsedObject::from_json(json.clone()) {
            Ok(parsed) => {
                writer.insert(parsed);
                Ok(Some(json))
            }
            Err(e) => Err(refusal(422, "Invalid", format!("{what}: {e}"))),
        })
    }

    fn next_version(&self) -> String {
        let mut counters = self.counters.lock();
        counters.0 += 1;
        (counters.0 - 1).to_string()
    }

    fn created(&self, mut object: Value) -> Value {
        if object["metadata"]["uid"].is_null() {
            let mut counters = self.counters.lock();
            counters.1 += 1;
            object["metadata"]["uid"] = json!(format!("uid-{}", counters.1 - 1));
        }
        object["metadata"]["generation"] = json!(1);
        object["metadata"]["resourceVersion"] = json!(self.next_version());
        object
    }

    fn changed(&self, current: &Value, mut next: Value) -> Value {
        if next.get("spec") != current.get("spec") {
            next["metadata"]["generation"] = json!(current["metadata"]["generation"].as_u64().unwrap_or(1).max(1) + 1);
        }
        next["metadata"]["resourceVersion"] = json!(self.next_version());
        next
    }
}

/// `patch` merged into `into`: maps merge, anything else replaces; with `remove_nulls` (RFC 7386)
/// a `null` removes the field.
fn merge(mut into: Value, patch: &Value, remove_nulls: bool) -> Value {
    let (Some(target), Some(fields)) = (into.as_object_mut(), patch.as_object()) else { return patch.clone() };
    for (key, value) in fields {
        if value.is_null() && remove_nulls {
            target.remove(key);
        } else if value.is_object() {
            let base = target.remove(key).filter(Value::is_object).unwrap_or(json!({}));
            target.insert(key.clone(), merge(base, value, remove_nulls));
        } else {
            target.insert(key.clone(), value.clone());
        }
    }
    into
}

/// An API server's refusal, as a plugin receives it.
fn refusal(code: u16, reason: &str, message: String) -> RequestError {
    RequestError::Api(kube::Error::Api(kube::core::Status::failure(&message, reason).with_code(code).boxed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configmap() -> Gvk {
        Gvk::new("", "v1", "ConfigMap")
    }

    fn write(name: &str, op: WriteOp) -> WriteRequest {
        WriteRequest { resource: configmap(), namespace: Some("ns".into()), name: name.into(), op }
    }

    fn object(name: &str, rest: Value) -> Value {
        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}});
        merge(object.take(), &rest, false)
    }

    fn stored() -> (Services, Arc<Recorder>) {
        let mut cache = FixtureCache::default();
        cache
            .insert(&configmap(), &object("a", json!({"metadata": {"uid": "ua", "resourceVersion": "41", "generation": 3}, "spec": {"x": 1}})).to_string())
            .unwrap();
        let recorder = Arc::new(Recorder::default());
        (services(&cache, &recorder, Writes::Stored), recorder)
    }

    fn read(services: &Services, name: &str) -> Option<Value> {
        services.cache.get(&configmap(), &ObjectKey::new(Some("ns"), name)).map(|json| serde_json::from_str(&json).unwrap())
    }

    fn reason(result: Result<Option<Arc<str>>, RequestError>) -> String {
        result.expect_err("refused").reason().unwrap_or_default().to_string()
    }

    #[tokio::test]
    async fn a_stored_write_is_read_back_at_the_next_resource_version() {
        let (services, recorder) = stored();
        let created =
            services.api.write(write("b", WriteOp::Create { object: object("b", json!({"data": {"k": "v"}})), applied: false })).await.unwrap().unwrap();
        let created: Value = serde_json::from_str(&created).unwrap();
        assert_eq!(created["metadata"]["resourceVersion"], "42", "after the highest in the cache");
        assert_eq!((&created["metadata"]["uid"], &created["metadata"]["generation"]), (&json!("uid-1"), &json!(1)));
        assert_eq!(read(&services, "b").unwrap(), created, "the answer is what the next read returns");
        assert_eq!(reason(services.api.write(write("b", WriteOp::Create { object: object("b", json!({})), applied: false })).await), "AlreadyExists");

        let applied = services
            .api
            .write(write("a", WriteOp::Apply { object: object("a", json!({"spec": {"y": 2}, "status": {"s": 1}})), force: true, status: false }))
            .await;
        let a = read(&services, "a").unwrap();
        assert_eq!(a["spec"], json!({"x": 1, "y": 2}), "an apply merges maps");
        assert!(a.get("status").is_none(), "an apply leaves status alone");
        assert_eq!((&a["metadata"]["generation"], &a["metadata"]["resourceVersion"], &a["metadata"]["uid"]), (&json!(4), &json!("43"), &json!("ua")));
        assert_eq!(serde_json::from_str::<Value>(&applied.unwrap().unwrap()).unwrap(), a);

        let stale = object("a", json!({"metadata": {"resourceVersion": "41"}, "spec": {}}));
        assert_eq!(reason(services.api.write(write("a", WriteOp::Update { object: stale, status: false })).await), "Conflict");
        assert_eq!(reason(services.api.write(write("gone", WriteOp::Update { object: object("gone", json!({})), status: true })).await), "NotFound");
        let status = object("a", json!({"metadata": {"resourceVersion": "43"}, "status": {"ready": true}, "spec": {"ignored": true}}));
        services.api.write(write("a", WriteOp::Update { object: status, status: true })).await.unwrap();
        let a = read(&services, "a").unwrap();
        assert_eq!(
            (&a["status"], &a["spec"], &a["metadata"]["generation"]),
            (&json!({"ready": true}), &json!({"x": 1, "y": 2}), &json!(4)),
            "update-status changes status alone"
        );

        let patch = json!([{"op": "add", "path": "/metadata/labels", "value": {"l": "v"}}]);
        services.api.write(write("a", WriteOp::Patch { patch_type: PatchKind::Json, body: patch })).await.unwrap();
        services.api.write(write("a", WriteOp::Patch { patch_type: PatchKind::Merge, body: json!({"spec": {"x": null}}) })).await.unwrap();
        let a = read(&services, "a").unwrap();
        assert_eq!((&a["metadata"]["labels"], &a["spec"]), (&json!({"l": "v"}), &json!({"y": 2})), "a merge patch's null removes");

        assert_eq!(reason(services.api.write(write("a", WriteOp::Delete { uid: Some("other".into()) })).await), "Conflict");
        assert_eq!(services.api.write(write("a", WriteOp::Delete { uid: Some("ua".into()) })).await.unwrap(), None);
        assert!(read(&services, "a").is_none());
        assert_eq!(reason(services.api.write(write("a", WriteOp::Delete { uid: None })).await), "NotFound");
        assert_eq!(recorder.write_count(), 11, "refused writes are recorded too: the plugin made them");
    }

    #[tokio::test]
    async fn recorded_writes_and_kinds_not_cached_leave_the_cache_as_it_was() {
        let mut cache = FixtureCache::default();
        cache.insert(&configmap(), &object("a", json!({"metadata": {"resourceVersion": "41"}})).to_string()).unwrap();
        let recorder = Arc::new(Recorder::default());
        let recorded = services(&cache, &recorder, Writes::Recorded);
        let given = object("b", json!({}));
        let answer = recorded.api.write(write("b", WriteOp::Create { object: given.clone(), applied: false })).await.unwrap().unwrap();
        assert_eq!(serde_json::from_str::<Value>(&answer).unwrap(), given, "answered with the object as given");
        assert!(read(&recorded, "b").is_none());
        let stored = services(&cache, &recorder, Writes::Stored);
        let secret = WriteRequest { resource: Gvk::new("", "v1", "Secret"), namespace: Some("ns".into()), name: "s".into(), op: WriteOp::Delete { uid: None } };
        assert_eq!(stored.api.write(secret).await.unwrap(), None, "a kind the case does not cache is only recorded");
    }
}
