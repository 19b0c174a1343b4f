"""The sizes the host takes from a plugin (the WIT's doc comments; README "Security model"),
checked before each host call: an over-long value raises the error the host itself gives —
`Invalid` with the message `"<field> is <n> bytes; at most <max>"` — so a plugin sees the same
thing in every SDK and under `kubewasm test`, and the value never crosses the boundary. Also
the cut of the error messages a plugin returns to what the host takes.

Sizes are UTF-8 bytes, as the host counts them.
"""

from __future__ import annotations

from .core import Gvk
from .errors import Invalid

MAX_NAME = 253
"""`metadata.name` of keys and refs, and `name` arguments."""
MAX_NAMESPACE = 63
MAX_CLUSTER = 253
"""A member cluster's name (`Context.in_cluster`)."""
MAX_GROUP = 253
MAX_VERSION = 63
MAX_KIND = 63
MAX_OBJECT = 3 << 20
"""The JSON text of an object a client call sends."""
MAX_PATCH_BODY = 3 << 20
MAX_LABEL_SELECTOR = 4096
MAX_OWNER = 253
"""The owner uid of `list_controlled` (a uid is 36 bytes)."""
MAX_EVENT_REASON = 128
"""An event's `reason` and `action` (each at least 1 byte)."""
MAX_EVENT_NOTE = 1024
MAX_ERROR_MESSAGE = 64 << 10
"""An error message a plugin returns (and a `describe` refusal): the host takes no more."""


def utf8_len(value: str) -> int:
    """The UTF-8 length of `value`, encoding only when the character count leaves it open."""
    if value.isascii():
        return len(value)
    return len(value.encode("utf-8", "surrogatepass"))


def at_most(field: str, value: str | None, limit: int) -> None:
    """Raises `Invalid` when `value` is longer than `limit` bytes, with the host's message."""
    # A character is at most 4 bytes: short strings need no count.
    if value is None or len(value) * 4 <= limit:
        return
    size = utf8_len(value)
    if size > limit:
        raise Invalid(f"{field} is {size} bytes; at most {limit}")


def gvk(resource: Gvk) -> None:
    at_most("group", resource.group, MAX_GROUP)
    at_most("version", resource.version, MAX_VERSION)
    at_most("kind", resource.kind, MAX_KIND)


def target(resource: Gvk, namespace: str | None, name: str) -> None:
    """A resource, namespace and name, in the order the host checks them."""
    gvk(resource)
    at_most("namespace", namespace, MAX_NAMESPACE)
    at_most("name", name, MAX_NAME)


def event(reason: str, action: str, note: str) -> None:
    """The text of an event's `reason`, `action` and `note`."""
    for field, value in (("event reason", reason), ("event action", action)):
        if not value:
            raise Invalid(f"{field} must not be empty")
        at_most(field, value, MAX_EVENT_REASON)
    at_most("event note", note, MAX_EVENT_NOTE)


def cut(message: str, limit: int = MAX_ERROR_MESSAGE) -> str:
    """`message` cut to at most `limit` UTF-8 bytes, at a character boundary: a longer one
    would be a fault of the plugin, and the start says what went wrong."""
    if len(message) * 4 <= limit:
        return message
    encoded = message.encode("utf-8", "surrogatepass")
    if len(encoded) <= limit:
        return message
    # Dropping a partial character at the end ("ignore") keeps the rest whole.
    return encoded[:limit].decode("utf-8", "ignore")
