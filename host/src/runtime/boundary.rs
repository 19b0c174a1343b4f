//! What may cross the WIT boundary: the size bound of every string and list a guest hands the
//! host (the table the WIT docs state), the `invalid` message a value over its bound gets, and
//! how much the host may lift out of guest memory at each step (wasmtime's "hostcall fuel").
//!
//! The canonical ABI lets a guest point any number of list entries at the same bytes, so what a
//! lift copies is not bounded by the guest's memory. Wasmtime charges fuel for every string
//! (its bytes) and list (entries × the size of the lifted type) before it copies anything, and
//! fails the lift once the fuel runs out. The host sets that fuel at each crossing
//! ([`Transfer::on_crossing`]):
//!
//! - while a host call lifts its arguments, [`Transfer::import`]: the kubewasm imports read
//!   their arguments in place and copy nothing before checking them here (`runtime::host`),
//!   so this fuel only has to stay out of reach of a guest that does not alias;
//! - while the host lifts what an export returned, the fuel of that export
//!   ([`Export::fuel`]): exactly the largest value within the bounds. Results must be lifted
//!   whole (wasmtime frees them right after), so they are checked after the lift, within it.

use std::mem::size_of;

use wasmtime::{AsContextMut, CallHook, StoreContextMut};

use super::bindings::access_exports::Rule as WitRule;
use super::bindings::clusters_exports::ClusterScope as WitScope;
use super::bindings::composite_exports::{ChildRule as WitChildRule, RelatedRule as WitRelatedRule, SyncResponse as WitSyncResponse};
use super::bindings::plugin_exports::{Gvk as WitGvk, Permission as WitPermission, Verb as WitVerb, Watch as WitWatch};
use super::bindings::projections_exports::Projection as WitProjection;
use super::bindings::types::{Error as GuestError, ErrorCode, ObjectKey as WitKey};
use super::bindings::webhooks_exports::{
    AdmissionHook as WitAdmissionHook, ConversionHook as WitConversionHook, Denial as WitDenial, MatchCondition as WitMatchCondition, Operation as WitOperation,
};
use crate::hooks::{
    MAX_ADMISSION_HOOKS, MAX_CONDITION_NAME, MAX_CONVERSION_HOOKS, MAX_CONVERT_OBJECTS, MAX_CONVERTED_BYTES, MAX_DENIAL_MESSAGE, MAX_EXPRESSION,
    MAX_HOOK_KINDS, MAX_HOOK_NAME, MAX_MATCH_CONDITIONS, MAX_WARNING, MAX_WARNINGS,
};

/// `metadata.name` of an object (a DNS subdomain at most).
pub const MAX_NAME: usize = 253;
/// A namespace (a DNS label).
pub const MAX_NAMESPACE: usize = 63;
pub const MAX_GROUP: usize = 253;
pub const MAX_VERSION: usize = 63;
pub const MAX_KIND: usize = 63;
/// An object a client call sends, and a patch body: what the API server accepts (3 MiB).
pub const MAX_OBJECT: usize = 3 << 20;
pub const MAX_PATCH: usize = 3 << 20;
pub const MAX_SELECTOR: usize = 4096;
/// The owner uid `cache.list-controlled` takes (a uid is 36 bytes; a name's bound leaves room).
pub const MAX_OWNER: usize = 253;
/// An Event's `reason` and `action` (Kubernetes' own limit); the note's is
/// [`crate::events::MAX_NOTE`].
pub const MAX_REASON: usize = 128;
/// The message of an error a guest returns.
pub const MAX_ERROR_MESSAGE: usize = 64 << 10;
/// Keys one `map-related` call may return.
pub const MAX_MAPPED_KEYS: usize = 100_000;
/// Children one `sync` or `finalize` may answer, and the bytes of its children and status.
pub const MAX_CHILDREN: usize = 1000;
pub const MAX_DESIRED_BYTES: usize = 32 << 20;
/// Rules one `customize` may answer, and names per rule.
pub const MAX_RELATED_RULES: usize = 100;
pub const MAX_RELATED_NAMES: usize = 100;
/// A field name in a projection's path: a map key (a ConfigMap's, say) may be as long as a name.
pub const MAX_FIELD_NAME: usize = 253;

pub use crate::manifest::{MAX_ENTRIES, MAX_PERMISSION_NAMES as MAX_RULE_NAMES, MAX_PERMISSION_NAMESPACES as MAX_RULE_NAMESPACES};
/// Entries in any list of a manifest (`owns`, `watches`, `permissions`, `access.rules`,
/// `views.metadata-only`), and per
/// permission or rule namespaces and resource names: the manifest's own bounds, so a manifest
/// lifted whole is one the host may admit.
pub use crate::manifest::{MAX_PATH_NAMES, MAX_PROJECTED_PATHS, MAX_PROJECTIONS};
/// Verbs per permission or rule (RBAC has 14).
pub const MAX_RULE_VERBS: usize = crate::manifest::Verb::ALL.len();
/// The other strings of a manifest: its name (a DNS label), its version, label keys and
/// finalizers (qualified names: a 253-byte prefix, '/', a 63-byte name), subresources (DNS
/// labels) and RBAC verbs ("deletecollection" is the longest).
pub const MAX_PLUGIN_NAME: usize = 63;
pub use crate::manifest::MAX_VERSION as MAX_PLUGIN_VERSION;
pub const MAX_QUALIFIED_NAME: usize = 253 + 1 + 63;
pub const MAX_SUBRESOURCE: usize = 63;
pub const MAX_VERB: usize = 16;

/// The `invalid` message for a value of `len` bytes over its bound `max`, as the SDKs word it.
pub fn too_long(field: &str, len: usize, max: usize) -> Option<String> {
    (len > max).then(|| format!("{field} is {len} bytes; at most {max}"))
}

/// The `invalid` error value for a value of `len` bytes over its bound.
pub fn check(field: &str, len: usize, max: usize) -> Result<(), GuestError> {
    too_long(field, len, max).map_or(Ok(()), |message| Err(GuestError { code: ErrorCode::Invalid, message }))
}

/// An Event's reason or action: 1 to [`MAX_REASON`] bytes.
pub fn check_reason(field: &str, len: usize) -> Result<(), GuestError> {
    if len == 0 {
        return Err(GuestError { code: ErrorCode::Invalid, message: format!("{field} must not be empty") });
    }
    check(field, len, MAX_REASON)
}

/// The strings of a gvk, at most.
const GVK_TEXT: usize = MAX_GROUP + MAX_VERSION + MAX_KIND;
/// A lifted list of strings costs a `String` per entry besides its bytes.
const STRING: usize = size_of::<String>();

/// The exports whose results the host lifts, each with the fuel of its largest valid result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Export {
    /// `reconcile`, `finalize`, `released`: an action, or an error whose message is bounded.
    Call,
    MapRelated,
    /// `describe`: a manifest, or the message refusing the settings.
    Describe,
    /// `access.rules`.
    Rules,
    /// `views.metadata-only`.
    MetadataOnly,
    /// `projections.fields`.
    Projections,
    /// `composite.describe-composition`.
    Composition,
    /// `clusters.scope`.
    Scope,
    /// `composite.customize`: related rules, or an error.
    Customize,
    /// `composite.sync` and `composite.finalize`: the desired state, or an error.
    Sync,
    /// `webhooks.declare`.
    Hooks,
    /// `webhooks.validate`: warnings, or a denial.
    Validate,
    /// `webhooks.mutate`: an object and warnings, or a denial.
    Mutate,
    /// `webhooks.convert`: the converted objects, or why not.
    Convert,
}

impl Export {
    pub(super) const fn fuel(self) -> usize {
        match self {
            Export::Call => MAX_ERROR_MESSAGE,
            Export::MapRelated => MAX_MAPPED_KEYS * (size_of::<WitKey>() + MAX_NAMESPACE + MAX_NAME),
            Export::Describe => max(MAX_ERROR_MESSAGE, MANIFEST),
            Export::Rules => {
                MAX_ENTRIES
                    * (size_of::<WitRule>()
                        + GVK_TEXT
                        + MAX_SUBRESOURCE
                        + MAX_RULE_VERBS * (STRING + MAX_VERB)
                        + MAX_RULE_NAMESPACES * (STRING + MAX_NAMESPACE)
                        + MAX_RULE_NAMES * (STRING + MAX_NAME))
            }
            Export::MetadataOnly => MAX_ENTRIES * (size_of::<WitGvk>() + GVK_TEXT),
            Export::Projections => {
                MAX_PROJECTIONS
                    * (size_of::<WitProjection>() + GVK_TEXT + MAX_PROJECTED_PATHS * (size_of::<Vec<String>>() + MAX_PATH_NAMES * (STRING + MAX_FIELD_NAME)))
            }
            Export::Composition => MAX_ENTRIES * (size_of::<WitChildRule>() + GVK_TEXT),
            Export::Scope => size_of::<WitScope>() + 2 * MAX_SELECTOR,
            Export::Customize => max(
                MAX_ERROR_MESSAGE,
                MAX_RELATED_RULES * (size_of::<WitRelatedRule>() + GVK_TEXT + MAX_NAMESPACE + MAX_SELECTOR + MAX_RELATED_NAMES * (STRING + MAX_NAME)),
            ),
            Export::Sync => max(MAX_ERROR_MESSAGE, size_of::<WitSyncResponse>() + MAX_CHILDREN * STRING + MAX_DESIRED_BYTES),
            Export::Hooks => {
                MAX_ADMISSION_HOOKS
                    * (size_of::<WitAdmissionHook>()
                        + MAX_HOOK_NAME
                        + MAX_HOOK_KINDS * (size_of::<WitGvk>() + GVK_TEXT)
                        + 4 * size_of::<WitOperation>()
                        + MAX_MATCH_CONDITIONS * (size_of::<WitMatchCondition>() + MAX_CONDITION_NAME + MAX_EXPRESSION))
                    + MAX_CONVERSION_HOOKS * (size_of::<WitConversionHook>() + GVK_TEXT)
            }
            Export::Validate => size_of::<WitDenial>() + MAX_DENIAL_MESSAGE + WARNINGS,
            Export::Mutate => max(size_of::<WitDenial>() + MAX_DENIAL_MESSAGE, MAX_OBJECT) + WARNINGS,
            Export::Convert => max(MAX_DENIAL_MESSAGE, MAX_CONVERT_OBJECTS * STRING + MAX_CONVERTED_BYTES),
        }
    }

    /// What the export is called in a fault's message.
    pub(super) fn name(self) -> &'static str {
        match self {
            Export::Call => "the call",
            Export::MapRelated => "map-related",
            Export::Describe => "describe",
            Export::Rules => "access.rules",
            Export::MetadataOnly => "views.metadata-only",
            Export::Projections => "projections.fields",
            Export::Composition => "composite.describe-composition",
            Export::Scope => "clusters.scope",
            Export::Customize => "customize",
            Export::Sync => "sync",
            Export::Hooks => "webhooks.declare",
            Export::Validate => "validate",
            Export::Mutate => "mutate",
            Export::Convert => "convert",
        }
    }
}

/// A hook's warnings at their bounds, lifted.
const WARNINGS: usize = MAX_WARNINGS * (STRING + MAX_WARNING);

/// The largest manifest within the bounds, lifted.
const MANIFEST: usize = MAX_PLUGIN_NAME
    + MAX_PLUGIN_VERSION
    + GVK_TEXT
    + MAX_SELECTOR
    + MAX_QUALIFIED_NAME
    + MAX_ENTRIES * (size_of::<WitGvk>() + GVK_TEXT)
    + MAX_ENTRIES * (size_of::<WitWatch>() + GVK_TEXT + MAX_QUALIFIED_NAME + MAX_SELECTOR)
    + MAX_ENTRIES
        * (size_of::<WitPermission>() + GVK_TEXT + MAX_SUBRESOURCE + MAX_RULE_VERBS * size_of::<WitVerb>() + MAX_RULE_NAMESPACES * (STRING + MAX_NAMESPACE));

const fn max(a: usize, b: usize) -> usize {
    if a > b { a } else { b }
}

/// A host call's lift charges a guest that does not alias at most this much fuel per byte of its
/// memory: its strings byte for byte, and a lazily lifted list (`WasmList`) its entries × the
/// lifted type, which for a log field is 80 bytes of `WasmStr`s for 16 in the guest.
const IMPORT_FUEL_PER_BYTE: usize = 8;

/// The hostcall fuel of one instance's store, switched at each crossing of the boundary.
#[derive(Debug, Clone, Copy)]
pub(super) struct Transfer {
    /// While a host call lifts its arguments.
    pub(super) import: usize,
    /// While the host lifts what the running export returns.
    pub(super) export: Export,
}

impl Transfer {
    /// For an instance of `memory_bytes` of linear memory.
    pub(super) fn new(memory_bytes: u64) -> Self {
        let memory = usize::try_from(memory_bytes).unwrap_or(usize::MAX);
        Transfer { import: memory.saturating_mul(IMPORT_FUEL_PER_BYTE), export: Export::Describe }
    }

    /// Sets the fuel for what `export` returns; call before calling it.
    pub(super) fn expect<T: AsMut<Transfer> + 'static>(mut store: impl AsContextMut<Data = T>, export: Export) {
        let mut store = store.as_context_mut();
        store.data_mut().as_mut().export = export;
        store.set_hostcall_fuel(export.fuel());
    }

    /// The store's call hook: a host call lifts its arguments under the import fuel; once it
    /// returns, what is lifted next (the export's result, unless the guest calls again) gets the
    /// export's.
    pub(super) fn on_crossing<T: AsMut<Transfer>>(mut store: StoreContextMut<'_, T>, crossing: CallHook) -> wasmtime::Result<()> {
        let transfer = *store.data_mut().as_mut();
        match crossing {
            CallHook::CallingHost => store.set_hostcall_fuel(transfer.import),
            CallHook::ReturningFromHost => store.set_hostcall_fuel(transfer.export.fuel()),
            CallHook::CallingWasm | CallHook::ReturningFromWasm => {}
        }
        Ok(())
    }
}

/// Whether `error` is wasmtime refusing a lift that ran out of hostcall fuel (its type is
/// private: it is known by its message).
pub(super) fn fuel_exhausted(error: &wasmtime::Error) -> bool {
    error.chain().any(|cause| cause.to_string().contains("fuel allocated for hostcalls has been exhausted"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_the_size_and_the_bound() {
        assert_eq!(too_long("name", 254, MAX_NAME).as_deref(), Some("name is 254 bytes; at most 253"));
        assert_eq!(too_long("name", 253, MAX_NAME), None);
        assert_eq!(check_reason("event reason", 0).unwrap_err().message, "event reason must not be empty");
        assert_eq!(check_reason("event action", 129).unwrap_err().message, "event action is 129 bytes; at most 128");
        assert!(check_reason("event action", 128).is_ok());
    }

    #[test]
    fn results_are_lifted_within_a_few_tens_of_megabytes() {
        // The largest valid result of each export, as wasmtime counts it; an attacker's result
        // is cut off at the same point.
        for (export, at_most) in [
            (Export::Call, 64 << 10),
            (Export::MapRelated, 40 << 20),
            (Export::Describe, 16 << 20),
            (Export::Rules, 40 << 20),
            (Export::Projections, 16 << 20),
            (Export::Customize, 4 << 20),
            (Export::Sync, 33 << 20),
        ] {
            assert!(export.fuel() <= at_most, "{export:?}: {} bytes", export.fuel());
        }
        assert!(Export::Describe.fuel() >= MAX_ENTRIES * MAX_RULE_NAMESPACES * MAX_NAMESPACE);
    }
}
