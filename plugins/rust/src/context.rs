//! [`Context`]: everything the host offers a call — cache reads, API writes, events, logs —
//! typed.

use crate::bindings::kubewasm::controller::{cache, client, events, log, types as wit};
use crate::error::Result;
use crate::object::{DynamicObject, Gvk, Object, ObjectKey, ResourceExt, gvk_of};

pub use client::PatchType;
pub use events::EventType;
pub use log::Level as LogLevel;

/// The host, as seen from one call.
pub struct Context {
    key: ObjectKey,
    retries: u32,
}

fn parse<T: serde::de::DeserializeOwned>(json: &str) -> Result<T> {
    Ok(serde_json::from_str(json)?)
}

fn json(object: &impl serde::Serialize) -> Result<String> {
    Ok(serde_json::to_string(object)?)
}

impl Context {
    pub(crate) fn new(key: wit::ObjectKey, retries: u32) -> Self {
        Context { key: key.into(), retries }
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
        cache::get(&gvk.into(), namespace, name)?.map(|j| parse(&j)).transpose()
    }

    /// Objects from the cache, in `namespace` (all readable when `None`), matching a label
    /// selector such as `"app=web"`.
    pub fn list<K: Object + k8s_openapi::Resource>(&self, namespace: Option<&str>, label_selector: Option<&str>) -> Result<Vec<K>> {
        self.list_raw(&gvk_of::<K>(), namespace, label_selector)
    }

    pub fn list_dynamic(&self, gvk: &Gvk, namespace: Option<&str>, label_selector: Option<&str>) -> Result<Vec<DynamicObject>> {
        self.list_raw(gvk, namespace, label_selector)
    }

    fn list_raw<T: serde::de::DeserializeOwned>(&self, gvk: &Gvk, namespace: Option<&str>, selector: Option<&str>) -> Result<Vec<T>> {
        cache::list_objects(&gvk.into(), namespace, selector)?.iter().map(|j| parse(j)).collect()
    }

    // --- the client: writes as field manager `kubewasm/<plugin>` ---

    /// Server-side apply, taking over fields other managers set (what controllers usually want).
    pub fn apply<K: Object>(&self, object: &K) -> Result<K> {
        parse(&client::apply(&json(object)?, true)?)
    }

    /// Server-side apply that answers `conflict` instead of taking over others' fields.
    pub fn apply_without_force<K: Object>(&self, object: &K) -> Result<K> {
        parse(&client::apply(&json(object)?, false)?)
    }

    /// Server-side apply of the status subresource.
    pub fn apply_status<K: Object>(&self, object: &K) -> Result<K> {
        parse(&client::apply_status(&json(object)?, true)?)
    }

    pub fn create<K: Object>(&self, object: &K) -> Result<K> {
        parse(&client::create(&json(object)?)?)
    }

    /// Replaces the object; `conflict` if its resourceVersion is stale.
    pub fn update<K: Object>(&self, object: &K) -> Result<K> {
        parse(&client::update(&json(object)?)?)
    }

    /// Replaces the status; `conflict` if the resourceVersion is stale.
    pub fn update_status<K: Object>(&self, object: &K) -> Result<K> {
        parse(&client::update_status(&json(object)?)?)
    }

    pub fn patch(&self, gvk: &Gvk, namespace: Option<&str>, name: &str, patch_type: PatchType, body: &serde_json::Value) -> Result<DynamicObject> {
        parse(&client::patch(&gvk.into(), namespace, name, patch_type, &body.to_string())?)
    }

    pub fn delete<K: k8s_openapi::Resource>(&self, namespace: Option<&str>, name: &str) -> Result<()> {
        self.delete_dynamic(&gvk_of::<K>(), namespace, name)
    }

    pub fn delete_dynamic(&self, gvk: &Gvk, namespace: Option<&str>, name: &str) -> Result<()> {
        Ok(client::delete(&gvk.into(), namespace, name)?)
    }

    /// Deletes the objects of `kinds` that `owner` controls (in its namespace), skipping kinds
    /// the plugin may not delete (`false`), with a warning. What the default
    /// [`crate::Controller::released`] does.
    pub fn delete_controlled(&self, owner: &impl Object, kinds: &[(Gvk, bool)]) -> Result<()> {
        for (gvk, may_delete) in kinds {
            if !may_delete {
                self.warn(&format!("leaving the {} objects of {} in place: the manifest grants no delete on them", gvk.kind, owner.name()));
                continue;
            }
            for child in self.list_dynamic(gvk, owner.namespace(), None)? {
                if child.is_controlled_by(owner) {
                    match self.delete_dynamic(gvk, child.namespace(), child.name()) {
                        Ok(()) => {}
                        Err(e) if e.code == crate::ErrorCode::NotFound => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        Ok(())
    }

    // --- events and logs ---

    /// Records a Kubernetes Event about `regarding`.
    pub fn event(&self, regarding: &impl Object, event_type: EventType, reason: &str, action: &str, note: &str) -> Result<()> {
        Ok(events::publish(&events::Event {
            regarding: wit::ObjectRef { resource: (&regarding.gvk()).into(), namespace: regarding.namespace().map(Into::into), name: regarding.name().into() },
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
