//! The sizes the host takes from a plugin (the WIT's doc comments; README "Security model"),
//! checked before each host call: an over-long value is refused here with the error the host
//! itself gives — code `invalid`, message `"<field> is <n> bytes; at most <max>"` — so a plugin
//! sees the same thing in every SDK and under `kubewasm test`, and the value never crosses the
//! boundary. Also the cut of the error messages a plugin returns to what the host takes.

use crate::error::{Error, ErrorCode, Result};
use crate::object::Gvk;

/// `metadata.name` of keys and refs, and `name` arguments.
pub const MAX_NAME: usize = 253;
/// Namespaces of keys, refs and arguments.
pub const MAX_NAMESPACE: usize = 63;
/// The uid `list-controlled` takes (a uid is 36 bytes).
pub const MAX_OWNER: usize = 253;
pub const MAX_GROUP: usize = 253;
pub const MAX_VERSION: usize = 63;
pub const MAX_KIND: usize = 63;
/// The JSON text of an object a client call sends.
pub const MAX_OBJECT: usize = 3 << 20;
/// The body of a patch.
pub const MAX_PATCH_BODY: usize = 3 << 20;
pub const MAX_LABEL_SELECTOR: usize = 4096;
/// An event's `reason` and `action` (each at least 1 byte).
pub const MAX_EVENT_REASON: usize = 128;
pub const MAX_EVENT_NOTE: usize = 1024;
pub use crate::error::MAX_ERROR_MESSAGE;

/// `invalid` when `value` is longer than `max` bytes, with the host's message.
pub fn at_most(field: &str, value: &str, max: usize) -> Result<()> {
    if value.len() > max {
        return Err(Error::new(ErrorCode::Invalid, format!("{field} is {} bytes; at most {max}", value.len())));
    }
    Ok(())
}

pub fn gvk(gvk: &Gvk) -> Result<()> {
    at_most("group", &gvk.group, MAX_GROUP)?;
    at_most("version", &gvk.version, MAX_VERSION)?;
    at_most("kind", &gvk.kind, MAX_KIND)
}

/// A resource, namespace and name, in the order the host checks them.
pub fn target(resource: &Gvk, namespace: Option<&str>, name: &str) -> Result<()> {
    gvk(resource)?;
    at_most("namespace", namespace.unwrap_or_default(), MAX_NAMESPACE)?;
    at_most("name", name, MAX_NAME)
}

/// The text of an event's `reason`, `action` and `note`.
pub fn event(reason: &str, action: &str, note: &str) -> Result<()> {
    for (field, value) in [("event reason", reason), ("event action", action)] {
        if value.is_empty() {
            return Err(Error::new(ErrorCode::Invalid, format!("{field} must not be empty")));
        }
        at_most(field, value, MAX_EVENT_REASON)?;
    }
    at_most("event note", note, MAX_EVENT_NOTE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(result: Result<()>) -> String {
        let e = result.unwrap_err();
        assert_eq!(e.code, ErrorCode::Invalid);
        e.message
    }

    #[test]
    fn names_and_namespaces_at_the_bound_pass_and_past_it_get_the_hosts_message() {
        let pods = Gvk::new("", "v1", "Pod");
        assert!(target(&pods, Some(&"n".repeat(63)), &"a".repeat(253)).is_ok());
        assert_eq!(message(target(&pods, None, &"a".repeat(254))), "name is 254 bytes; at most 253");
        assert_eq!(message(target(&pods, Some(&"n".repeat(64)), "a")), "namespace is 64 bytes; at most 63");
        // Bytes, not characters: 127 two-byte characters are 254 bytes.
        assert_eq!(message(target(&pods, None, &"é".repeat(127))), "name is 254 bytes; at most 253");
    }

    #[test]
    fn gvk_parts_have_their_own_bounds() {
        assert!(gvk(&Gvk::new(&"g".repeat(253), &"v".repeat(63), &"K".repeat(63))).is_ok());
        assert_eq!(message(gvk(&Gvk::new(&"g".repeat(254), "v1", "K"))), "group is 254 bytes; at most 253");
        assert_eq!(message(gvk(&Gvk::new("", &"v".repeat(64), "K"))), "version is 64 bytes; at most 63");
        assert_eq!(message(gvk(&Gvk::new("", "v1", &"K".repeat(64)))), "kind is 64 bytes; at most 63");
    }

    #[test]
    fn event_texts_are_bounded_and_reason_and_action_not_empty() {
        assert!(event(&"R".repeat(128), &"A".repeat(128), &"n".repeat(1024)).is_ok());
        assert!(event("R", "A", "").is_ok());
        assert_eq!(message(event("", "A", "")), "event reason must not be empty");
        assert_eq!(message(event("R", "", "")), "event action must not be empty");
        assert_eq!(message(event(&"R".repeat(129), "A", "")), "event reason is 129 bytes; at most 128");
        assert_eq!(message(event("R", &"A".repeat(129), "")), "event action is 129 bytes; at most 128");
        assert_eq!(message(event("R", "A", &"n".repeat(1025))), "event note is 1025 bytes; at most 1024");
    }

    #[test]
    fn objects_patches_and_selectors() {
        assert!(at_most("object", &"x".repeat(MAX_OBJECT), MAX_OBJECT).is_ok());
        assert_eq!(message(at_most("object", &"x".repeat(MAX_OBJECT + 1), MAX_OBJECT)), "object is 3145729 bytes; at most 3145728");
        assert_eq!(message(at_most("patch body", &"x".repeat(MAX_PATCH_BODY + 1), MAX_PATCH_BODY)), "patch body is 3145729 bytes; at most 3145728");
        assert_eq!(message(at_most("label selector", &"x".repeat(4097), MAX_LABEL_SELECTOR)), "label selector is 4097 bytes; at most 4096");
    }
}
