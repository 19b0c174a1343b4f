//! A guest's arguments, read in place. The kubewasm imports are registered by hand with these
//! lazily lifted types instead of the generated owned ones, so that each string is measured in
//! guest memory and copied only once it is within its bound (`runtime::boundary`): an 8 MiB name
//! costs the host a UTF-8 check of the guest's bytes, then an `invalid` error value, never a copy.
//! Once read, the arguments go to the generated `Host` traits, as the generated registration
//! would pass them.

use std::borrow::Cow;

use wasmtime::AsContext;
use wasmtime::component::{ComponentType, Lift, WasmStr};

use super::super::bindings::types::{Error as GuestError, Gvk as WitGvk, ObjectRef as WitRef};
use super::super::boundary::{self, MAX_GROUP, MAX_KIND, MAX_NAME, MAX_NAMESPACE, MAX_VERSION};

/// Why an argument was not read: an error value for the guest, or a trap (a string that is not
/// UTF-8 breaks the canonical ABI).
pub enum Refusal {
    Invalid(GuestError),
    Trap(wasmtime::Error),
}

impl From<wasmtime::Error> for Refusal {
    fn from(e: wasmtime::Error) -> Self {
        Refusal::Trap(e)
    }
}

impl From<GuestError> for Refusal {
    fn from(e: GuestError) -> Self {
        Refusal::Invalid(e)
    }
}

pub type Read<T> = Result<T, Refusal>;

/// A host call's answer to arguments that were read, or to a refusal: the error value goes back
/// to the guest, a trap traps.
pub fn settle<T>(read: Read<T>) -> wasmtime::Result<Result<T, GuestError>> {
    match read {
        Ok(value) => Ok(Ok(value)),
        Err(Refusal::Invalid(e)) => Ok(Err(e)),
        Err(Refusal::Trap(e)) => Err(e),
    }
}

/// The text of `s`, borrowed from guest memory, if it is at most `max` bytes.
pub fn borrowed<'a>(store: &'a impl AsContext, s: &WasmStr, field: &str, max: usize) -> Read<Cow<'a, str>> {
    let text = s.to_str(store)?;
    boundary::check(field, text.len(), max)?;
    Ok(text)
}

/// A copy of `s` if it is at most `max` bytes.
pub fn owned(store: &impl AsContext, s: &WasmStr, field: &str, max: usize) -> Read<String> {
    borrowed(store, s, field, max).map(Cow::into_owned)
}

/// A namespace argument, at most [`MAX_NAMESPACE`] bytes.
pub fn namespace(store: &impl AsContext, s: &Option<WasmStr>) -> Read<Option<String>> {
    s.as_ref().map(|s| owned(store, s, "namespace", MAX_NAMESPACE)).transpose()
}

/// A name argument, at most [`MAX_NAME`] bytes.
pub fn name(store: &impl AsContext, s: &WasmStr) -> Read<String> {
    owned(store, s, "name", MAX_NAME)
}

/// `types.gvk`, in place.
#[derive(ComponentType, Lift)]
#[component(record)]
pub struct LazyGvk {
    group: WasmStr,
    version: WasmStr,
    kind: WasmStr,
}

impl LazyGvk {
    pub fn read(&self, store: &impl AsContext) -> Read<WitGvk> {
        Ok(WitGvk {
            group: owned(store, &self.group, "group", MAX_GROUP)?,
            version: owned(store, &self.version, "version", MAX_VERSION)?,
            kind: owned(store, &self.kind, "kind", MAX_KIND)?,
        })
    }
}

/// `types.object-ref`, in place.
#[derive(ComponentType, Lift)]
#[component(record)]
pub struct LazyRef {
    resource: LazyGvk,
    namespace: Option<WasmStr>,
    name: WasmStr,
}

impl LazyRef {
    pub fn read(&self, store: &impl AsContext) -> Read<WitRef> {
        Ok(WitRef { resource: self.resource.read(store)?, namespace: namespace(store, &self.namespace)?, name: name(store, &self.name)? })
    }
}
