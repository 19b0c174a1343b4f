"""`Context`: everything the host offers one call — cache reads, API writes, events, logs —
with objects as dicts and failures as `KubewasmError` exceptions.

A `Context` talks to a `Host`: inside a component that is the WIT imports (`kubewasm._guest`);
in unit tests it is `kubewasm.testing.FakeHost`. Both see the same JSON text, so a controller
behaves the same in both.

Member clusters (contract 0.1.4): `ctx.cluster()` names the cluster of the call's object,
`ctx.clusters()` lists the members the plugin serves or reaches, and `ctx.in_cluster(name)` is a
context whose reads and writes go to a named cluster (the WIT `fleet` import).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import bounds
from .core import EventType, Gvk, LogLevel, ObjectKey, PatchType
from .errors import Invalid, NotFound
from .objects import Object, gvk, name, namespace, uid


@dataclass(frozen=True)
class Cluster:
    """A member cluster the plugin serves or reaches, as `Context.clusters` lists it: its name
    (at most 253 bytes) and labels."""

    name: str
    labels: dict[str, str] = field(default_factory=dict, hash=False)


class Host(Protocol):
    """The host calls of the WIT world, in Python types. Objects are JSON text; failures raise
    `KubewasmError`. The `fleet_` calls are `cache_get`, `cache_list` and the client calls in a
    named cluster (None: the host's own)."""

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
    def current_cluster(self) -> str | None: ...
    def clusters(self) -> list[Cluster]: ...
    def fleet_get(self, cluster: str | None, resource: Gvk, namespace: str | None, name: str) -> str | None: ...
    def fleet_list(self, cluster: str | None, resource: Gvk, namespace: str | None, label_selector: str | None) -> list[str]: ...
    def fleet_apply(self, cluster: str | None, obj: str, force: bool) -> str: ...
    def fleet_apply_status(self, cluster: str | None, obj: str, force: bool) -> str: ...
    def fleet_create(self, cluster: str | None, obj: str) -> str: ...
    def fleet_update(self, cluster: str | None, obj: str) -> str: ...
    def fleet_update_status(self, cluster: str | None, obj: str) -> str: ...
    def fleet_patch(self, cluster: str | None, resource: Gvk, namespace: str | None, name: str, patch_type: PatchType, body: str) -> str: ...
    def fleet_delete(self, cluster: str | None, resource: Gvk, namespace: str | None, name: str) -> None: ...


@dataclass(frozen=True)
class _Named:
    """A cluster named with `Context.in_cluster`: `cluster` None is the host's own."""

    cluster: str | None


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
    `Invalid` with the host's own message, e.g. "name is 254 bytes; at most 253".

    Reads and writes act in the cluster of the call's object (the host's own, or the member it
    lives in for a plugin that serves members), unless the context comes from `in_cluster`."""

    def __init__(self, host: Host, key: ObjectKey | None = None, retries: int = 0) -> None:
        self._host = host
        self._key = key
        self._retries = retries
        # Where reads and writes go: None for the call's own cluster (the `cache` and `client`
        # imports), else the cluster named with `in_cluster` (the `fleet` import).
        self._named: _Named | None = None

    @property
    def key(self) -> ObjectKey | None:
        """The key being reconciled (None in `map_related`)."""
        return self._key

    @property
    def retries(self) -> int:
        """How many times in a row this key failed before this call."""
        return self._retries

    # --- clusters (contract 0.1.4) ---

    def cluster(self) -> str | None:
        """The member cluster the call's object lives in; None for the host's own cluster
        (always, in a plugin that serves no member). The same in a context from `in_cluster`."""
        return self._host.current_cluster()

    def clusters(self) -> list[Cluster]:
        """The member clusters engaged now that the plugin serves or reaches, sorted by name
        (the host's own cluster is not listed). Engaged does not mean reachable: a call there may
        still raise `Unavailable`."""
        return self._host.clusters()

    def in_cluster(self, cluster: str | None) -> Context:
        """This context with its reads and writes in `cluster` (None: the host's own), e.g.
        `ctx.in_cluster("eu").apply(copy)`. The plugin acts as its own identity there, and its
        grants are checked as here; a member outside its `clusters` scope raises `Forbidden`,
        one not engaged now (or whose caches have not synced yet, or whose API server does not
        answer) `Unavailable`. Events and logs stay with the call; `list_controlled` reads the
        call's own cluster only (`Invalid` here: list by label instead)."""
        if cluster is not None:
            bounds.at_most("cluster", cluster, bounds.MAX_CLUSTER)
        other = Context(self._host, self._key, self._retries)
        other._named = _Named(cluster)
        return other

    # --- the cache: reads without an API round trip ---

    def get(self, resource: Gvk, namespace: str | None, name: str) -> Object | None:
        """An object from the cache (a copy), or None. `namespace` is None for cluster-scoped
        resources."""
        bounds.target(resource, namespace, name)
        if self._named is None:
            text = self._host.cache_get(resource, namespace, name)
        else:
            text = self._host.fleet_get(self._named.cluster, resource, namespace, name)
        return None if text is None else _parse(text)

    def list(self, resource: Gvk, namespace: str | None = None, label_selector: str | None = None) -> list[Object]:
        """Objects from the cache: in `namespace` (every readable one when None), matching a
        label selector such as "app=web,tier!=db", sorted by namespace then name."""
        bounds.gvk(resource)
        bounds.at_most("namespace", namespace, bounds.MAX_NAMESPACE)
        bounds.at_most("label selector", label_selector, bounds.MAX_LABEL_SELECTOR)
        if self._named is None:
            found = self._host.cache_list(resource, namespace, label_selector)
        else:
            found = self._host.fleet_list(self._named.cluster, resource, namespace, label_selector)
        return [_parse(t) for t in found]

    def list_controlled(self, resource: Gvk, owner: str, namespace: str | None = None) -> list[Object]:
        """The objects of `resource` from the cache whose controller owner reference
        (`controller: true`) names the object of uid `owner` (a parent's children, e.g.
        `ctx.list_controlled(kinds.DEPLOYMENT, o.uid(parent), o.namespace(parent))`): in
        `namespace` (every readable one when None), sorted by namespace then name. Served from
        the host's index of controller owners, so it costs the children's count, not the
        namespace's; refused and bounded as `list` is. The call's own cluster only: `Invalid` in
        a context from `in_cluster`."""
        if self._named is not None:
            raise Invalid("list_controlled reads the call's own cluster only: list by label in another")
        bounds.gvk(resource)
        bounds.at_most("namespace", namespace, bounds.MAX_NAMESPACE)
        bounds.at_most("owner", owner, bounds.MAX_OWNER)
        return [_parse(t) for t in self._host.cache_list_controlled(resource, namespace, owner)]

    # --- the client: writes as field manager `kubewasm/<plugin>` ---

    def apply(self, obj: Mapping[str, Any], force: bool = True) -> Object:
        """Server-side apply: owns the given fields and sets them; creates the object if needed.
        With `force` (the default, what controllers usually want) takes over fields other
        managers set; without it such a clash raises `Conflict`. Returns the stored object."""
        text = _dump(obj)
        if self._named is None:
            return _parse(self._host.apply(text, force))
        return _parse(self._host.fleet_apply(self._named.cluster, text, force))

    def apply_status(self, obj: Mapping[str, Any], force: bool = True) -> Object:
        """Server-side apply of the status subresource (see `objects.status_object`)."""
        text = _dump(obj)
        if self._named is None:
            return _parse(self._host.apply_status(text, force))
        return _parse(self._host.fleet_apply_status(self._named.cluster, text, force))

    def create(self, obj: Mapping[str, Any]) -> Object:
        """Creates the object; `AlreadyExists` if the name is taken."""
        text = _dump(obj)
        if self._named is None:
            return _parse(self._host.create(text))
        return _parse(self._host.fleet_create(self._named.cluster, text))

    def update(self, obj: Mapping[str, Any]) -> Object:
        """Replaces the object; `Conflict` if its `metadata.resourceVersion` is stale."""
        text = _dump(obj)
        if self._named is None:
            return _parse(self._host.update(text))
        return _parse(self._host.fleet_update(self._named.cluster, text))

    def update_status(self, obj: Mapping[str, Any]) -> Object:
        """Replaces the status; `Conflict` if the resourceVersion is stale."""
        text = _dump(obj)
        if self._named is None:
            return _parse(self._host.update_status(text))
        return _parse(self._host.fleet_update_status(self._named.cluster, text))

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
        kind = PatchType.parse(patch_type)
        if self._named is None:
            return _parse(self._host.patch(resource, namespace, name, kind, text))
        return _parse(self._host.fleet_patch(self._named.cluster, resource, namespace, name, kind, text))

    def delete(self, resource: Gvk, namespace: str | None, name: str) -> None:
        """Deletes an object (dependents are garbage-collected); `NotFound` if already gone."""
        bounds.target(resource, namespace, name)
        if self._named is None:
            self._host.delete(resource, namespace, name)
        else:
            self._host.fleet_delete(self._named.cluster, resource, namespace, name)

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
