//! [`Context`]: everything the host offers a call — cache reads, API writes, events, logs —
//! typed.

use crate::bindings::kubewasm::controller::{cache, client, events, fleet, log, types as wit};
use crate::bounds;
use crate::error::Result;
use crate::object::{DynamicObject, Gvk, Object, ObjectKey, ResourceExt, gvk_of};

pub use client::PatchType;
pub use events::EventType;
pub use log::Level as LogLevel;

/// The host, as seen from one call.
///
/// Every method checks the sizes the host takes before calling it (names, namespaces, kinds,
/// objects, patches, selectors, Event texts: see `wit/`): an over-long value is an
/// [`ErrorCode::Invalid`](crate::ErrorCode::Invalid) error with the host's own message, e.g.
/// `name is 254 bytes; at most 253`.
#[derive(Clone)]
pub struct Context {
    key: ObjectKey,
    retries: u32,
    /// Where reads and writes go: the call's own cluster, or one named with
    /// [`Context::in_cluster`].
    target: Target,
}

/// A cluster reads and writes go to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// The cluster of the call's object (the `cache` and `client` imports).
    Here,
    /// A named cluster, `None` for the host's own (the `fleet` import).
    Named(Option<String>),
}

/// A member cluster the plugin serves or reaches, as [`Context::clusters`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    pub name: String,
    pub labels: std::collections::BTreeMap<String, String>,
}

fn parse<T: serde::de::DeserializeOwned>(json: &str) -> Result<T> {
    Ok(serde_json::from_str(json)?)
}

/// An object's JSON text for a client call, within the host's bound.
fn json(object: &impl serde::Serialize) -> Result<String> {
    let text = serde_json::to_string(object)?;
    bounds::at_most("object", &text, bounds::MAX_OBJECT)?;
    Ok(text)
}

impl Context {
    pub(crate) fn new(key: wit::ObjectKey, retries: u32) -> Self {
        Context { key: key.into(), retries, target: Target::Here }
    }

    // --- clusters (contract 0.1.4) ---

    /// The member cluster the call's object lives in; `None` for the host's own cluster (always,
    /// in a plugin that serves no member).
    pub fn cluster(&self) -> Option<String> {
        fleet::current()
    }

    /// The member clusters engaged now that the plugin serves or reaches, sorted by name.
    pub fn clusters(&self) -> Vec<Cluster> {
        fleet::clusters().into_iter().map(|c| Cluster { name: c.name, labels: c.labels.into_iter().collect() }).collect()
    }

    /// This context with its reads and writes in `cluster` (`None`: the host's own), e.g.
    /// `ctx.in_cluster(Some("eu")).apply(&copy)?`. The plugin acts as its own identity there;
    /// a cluster outside its `clusters` scope answers `forbidden`, one not engaged (or not
    /// synced yet) `unavailable`. Events and logs stay with the call.
    pub fn in_cluster(&self, cluster: Option<&str>) -> Result<Context> {
        if let Some(name) = cluster {
            bounds::at_most("cluster", name, bounds::MAX_NAME)?;
        }
        Ok(Context { target: Target::Named(cluster.map(str::to_string)), ..self.clone() })
    }

    /// The cluster named by [`Context::in_cluster`], for the `fleet` import.
    fn named(&self) -> Option<Option<&str>> {
        match &self.target {
            Target::Here => None,
            Target::Named(cluster) => Some(cluster.as_deref()),
        }
    }

    /// The key being reconciled.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// How many times in a row this key failed before this call.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    // --- the cache: reads without an API round trip ---

    /// An object from the cache, if there.
    pub fn get<K: Object + k8s_openapi::Resource>(&self, namespace: Option<&str>, name: &str) -> Result<Option<K>> {
        self.get_raw(&gvk_of::<K>(), namespace, name)
    }

    pub fn get_dynamic(&self, gvk: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<DynamicObject>> {
        self.get_raw(gvk, namespace, name)
    }

    fn get_raw<T: serde::de::DeserializeOwned>(&self, gvk: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<T>> {
        bounds::target(gvk, namespace, name)?;
        let found = match self.named() {
            None => cache::get(&gvk.into(), namespace, name)?,
            Some(cluster) => fleet::get(cluster, &gvk.into(), namespace, name)?,
        };
        found.map(|j| parse(&j)).transpose()
    }

    /// Objects from the cache, in `namespace` (all readable when `None`), matching a label
    /// selector such as `"app=web"`.
    pub fn list<K: Object + k8s_openapi::Resource>(&self, namespace: Option<&str>, label_selector: Option<&str>) -> Result<Vec<K>> {
        self.list_raw(&gvk_of::<K>(), namespace, label_selector)
    }

    pub fn list_dynamic(&self, gvk: &Gvk, namespace: Option<&str>, label_selector: Option<&str>) -> Result<Vec<DynamicObject>> {
        self.list_raw(gvk, namespace, label_selector)
    }

    /// Objects from the cache whose controller owner reference names the object of uid `owner`
    /// (`controller: true`), in `namespace` (all readable when `None`), sorted by namespace then
    /// name: a parent's children, served from the host's index of controller owners (the cost is
    /// the children's, not the namespace's) — controller-runtime's
    /// `MatchingFields{".metadata.controller": uid}`.
    pub fn list_controlled<K: Object + k8s_openapi::Resource>(&self, namespace: Option<&str>, owner: &str) -> Result<Vec<K>> {
        self.list_controlled_raw(&gvk_of::<K>(), namespace, owner)
    }

    pub fn list_controlled_dynamic(&self, gvk: &Gvk, namespace: Option<&str>, owner: &str) -> Result<Vec<DynamicObject>> {
        self.list_controlled_raw(gvk, namespace, owner)
    }

    fn list_controlled_raw<T: serde::de::DeserializeOwned>(&self, gvk: &Gvk, namespace: Option<&str>, owner: &str) -> Result<Vec<T>> {
        if self.named().is_some() {
            return Err(crate::Error::new(crate::ErrorCode::Invalid, "list_controlled reads the call's own cluster only: list by label in another"));
        }
        bounds::gvk(gvk)?;
        bounds::at_most("namespace", namespace.unwrap_or_default(), bounds::MAX_NAMESPACE)?;
        bounds::at_most("owner", owner, bounds::MAX_OWNER)?;
        cache::list_controlled(&gvk.into(), namespace, owner)?.iter().map(|j| parse(j)).collect()
    }

    fn list_raw<T: serde::de::DeserializeOwned>(&self, gvk: &Gvk, namespace: Option<&str>, selector: Option<&str>) -> Result<Vec<T>> {
        bounds::gvk(gvk)?;
        bounds::at_most("namespace", namespace.unwrap_or_default(), bounds::MAX_NAMESPACE)?;
        bounds::at_most("label selector", selector.unwrap_or_default(), bounds::MAX_LABEL_SELECTOR)?;
        let found = match self.named() {
            None => cache::list_objects(&gvk.into(), namespace, selector)?,
            Some(cluster) => fleet::list_objects(cluster, &gvk.into(), namespace, selector)?,
        };
        found.iter().map(|j| parse(j)).collect()
    }

    // --- the client: writes as field manager `kubewasm/<plugin>` ---

    /// Server-side apply, taking over fields other managers set (what controllers usually want).
    pub fn apply<K: Object>(&self, object: &K) -> Result<K> {
        self.write(object, client::apply, fleet::apply, Some(true))
    }

    /// Server-side apply that answers `conflict` instead of taking over others' fields.
    pub fn apply_without_force<K: Object>(&self, object: &K) -> Result<K> {
        self.write(object, client::apply, fleet::apply, Some(false))
    }

    /// Server-side apply of the status subresource.
    pub fn apply_status<K: Object>(&self, object: &K) -> Result<K> {
        self.write(object, client::apply_status, fleet::apply_status, Some(true))
    }

    pub fn create<K: Object>(&self, object: &K) -> Result<K> {
        self.write(object, |o, _| client::create(o), |c, o, _| fleet::create(c, o), None)
    }

    /// Replaces the object; `conflict` if its resourceVersion is stale.
    pub fn update<K: Object>(&self, object: &K) -> Result<K> {
        self.write(object, |o, _| client::update(o), |c, o, _| fleet::update(c, o), None)
    }

    /// Replaces the status; `conflict` if the resourceVersion is stale.
    pub fn update_status<K: Object>(&self, object: &K) -> Result<K> {
        self.write(object, |o, _| client::update_status(o), |c, o, _| fleet::update_status(c, o), None)
    }

    /// A write of `object` through `here` (the `client` import) or, in a named cluster, `named`
    /// (the `fleet` import's twin), with the `force` flag of an apply.
    fn write<K: Object>(
        &self,
        object: &K,
        here: fn(&str, bool) -> std::result::Result<String, wit::Error>,
        named: fn(Option<&str>, &str, bool) -> std::result::Result<String, wit::Error>,
        force: Option<bool>,
    ) -> Result<K> {
        let json = json(object)?;
        let force = force.unwrap_or_default();
        let stored = match self.named() {
            None => here(&json, force)?,
            Some(cluster) => named(cluster, &json, force)?,
        };
        parse(&stored)
    }

    pub fn patch(&self, gvk: &Gvk, namespace: Option<&str>, name: &str, patch_type: PatchType, body: &serde_json::Value) -> Result<DynamicObject> {
        bounds::target(gvk, namespace, name)?;
        let body = body.to_string();
        bounds::at_most("patch body", &body, bounds::MAX_PATCH_BODY)?;
        let stored = match self.named() {
            None => client::patch(&gvk.into(), namespace, name, patch_type, &body)?,
            Some(cluster) => fleet::patch(cluster, &gvk.into(), namespace, name, patch_type, &body)?,
        };
        parse(&stored)
    }

    pub fn delete<K: k8s_openapi::Resource>(&self, namespace: Option<&str>, name: &str) -> Result<()> {
        self.delete_dynamic(&gvk_of::<K>(), namespace, name)
    }

    pub fn delete_dynamic(&self, gvk: &Gvk, namespace: Option<&str>, name: &str) -> Result<()> {
        bounds::target(gvk, namespace, name)?;
        match self.named() {
            None => Ok(client::delete(&gvk.into(), namespace, name)?),
            Some(cluster) => Ok(fleet::delete(cluster, &gvk.into(), namespace, name)?),
        }
    }

    /// Deletes the objects of `kinds` that `owner` controls (in its namespace), skipping kinds
    /// the plugin may not delete (`false`), with a warning. What the default
    /// [`crate::Controller::released`] does.
    pub fn delete_controlled(&self, owner: &impl Object, kinds: &[(Gvk, bool)]) -> Result<()> {
        let Some(uid) = owner.meta().uid.clone() else { return Ok(()) };
        for (gvk, may_delete) in kinds {
            if !may_delete {
                self.warn(&format!("leaving the {} objects of {} in place: the manifest grants no delete on them", gvk.kind, owner.name()));
                continue;
            }
            for child in self.list_controlled_dynamic(gvk, owner.namespace(), &uid)? {
                match self.delete_dynamic(gvk, child.namespace(), child.name()) {
                    Ok(()) => {}
                    Err(e) if e.code == crate::ErrorCode::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    // --- events and logs ---

    /// Records a Kubernetes Event about `regarding`.
    pub fn event(&self, regarding: &impl Object, event_type: EventType, reason: &str, action: &str, note: &str) -> Result<()> {
        let resource = regarding.gvk();
        bounds::target(&resource, regarding.namespace(), regarding.name())?;
        bounds::event(reason, action, note)?;
        Ok(events::publish(&events::Event {
            regarding: wit::ObjectRef { resource: (&resource).into(), namespace: regarding.namespace().map(Into::into), name: regarding.name().into() },
            event_type,
            reason: reason.into(),
            action: action.into(),
            note: note.into(),
        })?)
    }

    pub fn log(&self, level: log::Level, message: &str, fields: &[(&str, &str)]) {
        let fields: Vec<log::Field> = fields.iter().map(|(k, v)| log::Field { key: k.to_string(), value: v.to_string() }).collect();
        log::emit(level, message, &fields);
    }

    pub fn debug(&self, message: &str) {
        self.log(log::Level::Debug, message, &[]);
    }

    pub fn info(&self, message: &str) {
        self.log(log::Level::Info, message, &[]);
    }

    pub fn warn(&self, message: &str) {
        self.log(log::Level::Warn, message, &[]);
    }

    pub fn error(&self, message: &str) {
        self.log(log::Level::Error, message, &[]);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;
    use crate::ErrorCode;

    /// Natively the WIT imports cannot be called (they abort): each call here returns before it
    /// would reach the host.
    fn refused<T: std::fmt::Debug>(result: Result<T>) -> String {
        let e = result.unwrap_err();
        assert_eq!(e.code, ErrorCode::Invalid, "{e}");
        e.message
    }

    fn ctx() -> Context {
        Context::new(wit::ObjectKey { namespace: None, name: "a".into() }, 0)
    }

    #[test]
    fn over_long_arguments_are_refused_before_the_host_is_called() {
        let ctx = ctx();
        let long = "a".repeat(254);
        assert_eq!(refused(ctx.get::<ConfigMap>(Some("ns"), &long)), "name is 254 bytes; at most 253");
        assert_eq!(refused(ctx.get::<ConfigMap>(Some(&"n".repeat(64)), "a")), "namespace is 64 bytes; at most 63");
        assert_eq!(refused(ctx.list::<ConfigMap>(None, Some(&"a".repeat(4097)))), "label selector is 4097 bytes; at most 4096");
        let gvk = Gvk::new("", "v1", &"K".repeat(64));
        assert_eq!(refused(ctx.list_dynamic(&gvk, None, None)), "kind is 64 bytes; at most 63");
        assert_eq!(refused(ctx.delete_dynamic(&gvk_of::<ConfigMap>(), Some("ns"), &long)), "name is 254 bytes; at most 253");
        let body = serde_json::json!({"data": {"k": "x".repeat(3 << 20)}});
        let message = refused(ctx.patch(&gvk_of::<ConfigMap>(), Some("ns"), "a", PatchType::Merge, &body));
        assert_eq!(message, format!("patch body is {} bytes; at most 3145728", body.to_string().len()));
    }

    #[test]
    fn over_long_objects_and_event_texts_are_refused_before_the_host_is_called() {
        let ctx = ctx();
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("a".into());
        cm.metadata.namespace = Some("ns".into());
        cm.data = Some([("k".to_string(), "x".repeat(3 << 20))].into());
        let size = serde_json::to_string(&cm).unwrap().len();
        for result in [ctx.apply(&cm), ctx.create(&cm), ctx.update(&cm), ctx.update_status(&cm), ctx.apply_status(&cm)] {
            assert_eq!(refused(result), format!("object is {size} bytes; at most 3145728"));
        }
        cm.data = None;
        assert_eq!(refused(ctx.event(&cm, EventType::Normal, "", "Reconcile", "")), "event reason must not be empty");
        assert_eq!(refused(ctx.event(&cm, EventType::Normal, "Made", &"A".repeat(129), "")), "event action is 129 bytes; at most 128");
        assert_eq!(refused(ctx.event(&cm, EventType::Normal, "Made", "Reconcile", &"n".repeat(1025))), "event note is 1025 bytes; at most 1024");
        cm.metadata.name = Some("a".repeat(254));
        assert_eq!(refused(ctx.event(&cm, EventType::Normal, "Made", "Reconcile", "")), "name is 254 bytes; at most 253");
    }
}
