"""`Context`: everything the host offers one call — cache reads, API writes, events, logs —
with objects as dicts and failures as `KubewasmError` exceptions.

A `Context` talks to a `Host`: inside a component that is the WIT imports (`kubewasm._guest`);
in unit tests it is `kubewasm.testing.FakeHost`. Both see the same JSON text, so a controller
behaves the same in both.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from . import bounds
from .core import EventType, Gvk, LogLevel, ObjectKey, PatchType
from .errors import Invalid, NotFound
from .objects import Object, gvk, name, namespace, uid


class Host(Protocol):
    """The host calls of the WIT world, in Python types. Objects are JSON text; failures raise
    `KubewasmError`."""

    def cache_get(self, resource: Gvk, namespace: str | None, name: str) -> str | None: ...
    def cache_list(self, resource: Gvk, namespace: str | None, label_selector: str | None) -> list[str]: ...
    def cache_list_controlled(self, resource: Gvk, namespace: str | None, owner: str) -> list[str]: ...
    def apply(self, obj: str, force: bool) -> str: ...
    def apply_status(self, obj: str, force: bool) -> str: ...
    def create(self, obj: str) -> str: ...
    def update(self, obj: str) -> str: ...
    def update_status(self, obj: str) -> str: ...
    def patch(self, resource: Gvk, namespace: str | None, name: str, patch_type: PatchType, body: str) -> str: ...
    def delete(self, resource: Gvk, namespace: str | None, name: str) -> None: ...
    def publish_event(self, regarding: tuple[Gvk, str | None, str], event_type: EventType, reason: str, action: str, note: str) -> None: ...
    def log(self, level: LogLevel, message: str, fields: Sequence[tuple[str, str]]) -> None: ...


# One encoder for every write: `json.dumps` with options builds a new one per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _parse(text: str) -> Object:
    try:
        parsed = json.loads(text)
    except ValueError as e:
        raise Invalid(f"the host returned an object that does not parse: {e}") from None
    if not isinstance(parsed, dict):
        raise Invalid(f"the host returned {type(parsed).__name__}, not an object")
    return parsed


def _dump(obj: Any) -> str:
    """An object's JSON text for a client call, within the host's bound."""
    try:
        text = _ENCODER.encode(obj)
    except (TypeError, ValueError) as e:
        raise Invalid(f"object is not JSON: {e}") from None
    bounds.at_most("object", text, bounds.MAX_OBJECT)
    return text


class Context:
    """The host, as seen from one call. Every method may raise a `KubewasmError` subclass
    (`NotFound`, `Conflict`, `Forbidden`, `Invalid`, `Unavailable`, ...).

    Every method checks the sizes the host takes before calling it (names, namespaces, kinds,
    objects, patches, selectors, Event texts: see `kubewasm.bounds`): an over-long value raises
    `Invalid` with the host's own message, e.g. "name is 254 bytes; at most 253"."""

    def __init__(self, host: Host, key: ObjectKey | None = None, retries: int = 0) -> None:
        self._host = host
        self._key = key
        self._retries = retries

    @property
    def key(self) -> ObjectKey | None:
        """The key being reconciled (None in `map_related`)."""
        return self._key

    @property
    def retries(self) -> int:
        """How many times in a row this key failed before this call."""
        return self._retries

    # --- the cache: reads without an API round trip ---

    def get(self, resource: Gvk, namespace: str | None, name: str) -> Object | None:
        """An object from the cache (a copy), or None. `namespace` is None for cluster-scoped
        resources."""
        bounds.target(resource, namespace, name)
        text = self._host.cache_get(resource, namespace, name)
        return None if text is None else _parse(text)

    def list(self, resource: Gvk, namespace: str | None = None, label_selector: str | None = None) -> list[Object]:
        """Objects from the cache: in `namespace` (every readable one when None), matching a
        label selector such as "app=web,tier!=db", sorted by namespace then name."""
        bounds.gvk(resource)
        bounds.at_most("namespace", namespace, bounds.MAX_NAMESPACE)
        bounds.at_most("label selector", label_selector, bounds.MAX_LABEL_SELECTOR)
        return [_parse(t) for t in self._host.cache_list(resource, namespace, label_selector)]

    def list_controlled(self, resource: Gvk, owner: str, namespace: str | None = None) -> list[Object]:
        """The objects of `resource` from the cache whose controller owner reference
        (`controller: true`) names the object of uid `owner` (a parent's children, e.g.
        `ctx.list_controlled(kinds.DEPLOYMENT, o.uid(parent), o.namespace(parent))`): in
        `namespace` (every readable one when None), sorted by namespace then name. Served from
        the host's index of controller owners, so it costs the children's count, not the
        namespace's; refused and bounded as `list` is."""
        bounds.gvk(resource)
        bounds.at_most("namespace", namespace, bounds.MAX_NAMESPACE)
        bounds.at_most("owner", owner, bounds.MAX_OWNER)
        return [_parse(t) for t in self._host.cache_list_controlled(resource, namespace, owner)]

    # --- the client: writes as field manager `kubewasm/<plugin>` ---

    def apply(self, obj: Mapping[str, Any], force: bool = True) -> Object:
        """Server-side apply: owns the given fields and sets them; creates the object if needed.
        With `force` (the default, what controllers usually want) takes over fields other
        managers set; without it such a clash raises `Conflict`. Returns the stored object."""
        return _parse(self._host.apply(_dump(obj), force))

    def apply_status(self, obj: Mapping[str, Any], force: bool = True) -> Object:
        """Server-side apply of the status subresource (see `objects.status_object`)."""
        return _parse(self._host.apply_status(_dump(obj), force))

    def create(self, obj: Mapping[str, Any]) -> Object:
        """Creates the object; `AlreadyExists` if the name is taken."""
        return _parse(self._host.create(_dump(obj)))

    def update(self, obj: Mapping[str, Any]) -> Object:
        """Replaces the object; `Conflict` if its `metadata.resourceVersion` is stale."""
        return _parse(self._host.update(_dump(obj)))

    def update_status(self, obj: Mapping[str, Any]) -> Object:
        """Replaces the status; `Conflict` if the resourceVersion is stale."""
        return _parse(self._host.update_status(_dump(obj)))

    def patch(
        self,
        resource: Gvk,
        namespace: str | None,
        name: str,
        body: Mapping[str, Any] | Sequence[Any] | str,
        patch_type: PatchType | str = PatchType.MERGE,
    ) -> Object:
        """Patches an object: a merge patch by default (a dict), or `PatchType.JSON` (a list of
        operations) or `PatchType.STRATEGIC`. Returns the stored object."""
        bounds.target(resource, namespace, name)
        try:
            text = body if isinstance(body, str) else _ENCODER.encode(body)
        except (TypeError, ValueError) as e:
            raise Invalid(f"patch body is not JSON: {e}") from None
        bounds.at_most("patch body", text, bounds.MAX_PATCH_BODY)
        return _parse(self._host.patch(resource, namespace, name, PatchType.parse(patch_type), text))

    def delete(self, resource: Gvk, namespace: str | None, name: str) -> None:
        """Deletes an object (dependents are garbage-collected); `NotFound` if already gone."""
        bounds.target(resource, namespace, name)
        self._host.delete(resource, namespace, name)

    def delete_controlled(self, owner: Mapping[str, Any], kinds: Iterable[tuple[Gvk, bool]]) -> None:
        """Deletes the objects of `kinds` that `owner` controls (in its namespace), skipping kinds
        the plugin may not delete (`(gvk, False)`), with a warning. What the default
        `Controller.released` does, with `Manifest.owned()` as `kinds`."""
        owner_uid = uid(owner)
        if owner_uid is None:
            return
        for resource, may_delete in kinds:
            if not may_delete:
                self.warn(f"leaving the {resource.kind} objects of {name(owner)} in place: the manifest grants no delete on them")
                continue
            for child in self.list_controlled(resource, owner_uid, namespace(owner)):
                try:
                    self.delete(resource, namespace(child), name(child))
                except NotFound:
                    pass

    # --- events and logs ---

    def event(self, regarding: Mapping[str, Any], event_type: EventType | str, reason: str, action: str, note: str = "") -> None:
        """Records a Kubernetes Event about `regarding` (an object): `reason` in PascalCase,
        `action` what was done or attempted, `note` for humans."""
        ref = (gvk(regarding), namespace(regarding), name(regarding))
        bounds.target(*ref)
        bounds.event(reason, action, note)
        self._host.publish_event(ref, EventType.parse(event_type), reason, action, note)

    def log(self, level: LogLevel | str, message: str, **fields: Any) -> None:
        """A structured log record in the host's log; `fields` become key=value pairs."""
        self._host.log(LogLevel.parse(level), message, [(k, str(v)) for k, v in fields.items()])

    def trace(self, message: str, **fields: Any) -> None:
        self.log(LogLevel.TRACE, message, **fields)

    def debug(self, message: str, **fields: Any) -> None:
        self.log(LogLevel.DEBUG, message, **fields)

    def info(self, message: str, **fields: Any) -> None:
        self.log(LogLevel.INFO, message, **fields)

    def warn(self, message: str, **fields: Any) -> None:
        self.log(LogLevel.WARN, message, **fields)

    def error(self, message: str, **fields: Any) -> None:
        self.log(LogLevel.ERROR, message, **fields)
