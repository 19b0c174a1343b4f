"""Declarative controllers (contract 0.1.3): a `CompositeController` answers, for a parent object
and the children it owns, which children should exist and what the parent's status is; the host
claims, applies, prunes and writes the status (the WIT `composite` interface).

    class Greeter(CompositeController):
        def manifest(self) -> Manifest:
            return Manifest("greeter", "0.1.0").primary(GREETING).child(kinds.CONFIG_MAP, UpdateStrategy.IN_PLACE)

        def sync(self, request: SyncRequest) -> SyncResponse:
            parent = request.parent
            cm = objects.new_object(kinds.CONFIG_MAP, objects.name(parent), data={"text": "hello"})
            return SyncResponse(status={"greeted": True}, children=[cm])

Pure Python, like the rest of the package: `kubewasm._guest` wires it to the WIT bindings.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar, NamedTuple

from .context import Context
from .core import Gvk, millis
from .manifest import Manifest
from .objects import Object
from .webhook import WebhookHandlers

__all__ = ["CompositeController", "Objects", "RelatedRule", "SyncRequest", "SyncResponse"]


@dataclass
class RelatedRule:
    """Objects a parent depends on besides its children, of one kind: by `names` (in
    `namespace`, or any namespace when None), or by `label_selector` (in `namespace`, or every
    namespace), or every object (in `namespace`) when neither is given; `names` and
    `label_selector` together are refused (`Invalid`). The kind must be readable from the cache:
    the kind of a `watches` entry (`Mapping.map_related()`: an event on a selected object syncs
    the parents whose rules select it) or one the manifest grants `list` on.

    Bounds (the host faults a plugin over them): at most 100 rules, 100 names of at most 253
    bytes each, a namespace of at most 63 bytes and a selector of at most 4096."""

    resource: Gvk
    namespace: str | None = None
    names: list[str] = field(default_factory=list)
    label_selector: str | None = None

    @classmethod
    def named(cls, resource: Gvk, names: Iterable[str], namespace: str | None = None) -> RelatedRule:
        """The objects of `resource` with these names, in `namespace` (any namespace when None)."""
        return cls(resource, namespace, [names] if isinstance(names, str) else list(names))

    @classmethod
    def selected(cls, resource: Gvk, label_selector: str | None, namespace: str | None = None) -> RelatedRule:
        """The objects of `resource` matching a label selector ("env=prod"; None or "" for
        all), in `namespace` (every namespace when None)."""
        return cls(resource, namespace, [], label_selector or None)


class Objects(NamedTuple):
    """Objects of one kind: an entry of `SyncRequest.children` or `SyncRequest.related`."""

    resource: Gvk
    items: list[Object]


def _same_kind(a: Gvk, b: Gvk) -> bool:
    # The version is the API server's choice: a kind is its group and kind.
    return (a.group, a.kind) == (b.group, b.kind)


@dataclass
class SyncRequest:
    """One parent, what it has, and what it asked for (a copy: change it freely).

    `children` holds one entry per child kind (those of `Manifest.child`, then the other `owns`
    kinds), even when the parent has none of it; `related` one entry per rule `customize`
    answered, in its order. Items are sorted by namespace and name."""

    parent: Object
    children: list[Objects] = field(default_factory=list)
    related: list[Objects] = field(default_factory=list)
    finalizing: bool = False
    """Whether the parent is being deleted (a `finalize` call)."""

    def children_of(self, resource: Gvk) -> list[Object]:
        """The parent's children of a kind (empty when none)."""
        return [o for group in self.children if _same_kind(group.resource, resource) for o in group.items]

    def related_of(self, resource: Gvk) -> list[Object]:
        """The related objects of a kind, over every rule that named it (empty when none)."""
        return [o for group in self.related if _same_kind(group.resource, resource) for o in group.items]


@dataclass(eq=False)
class SyncResponse:
    """What should be.

    - `status`: the parent's whole status (a dict); the host replaces it, adding
      `observedGeneration`. None leaves the status as it is.
    - `children`: every child that should exist, whole: `apiVersion`, `kind`, `metadata.name`,
      and `metadata.namespace` where it differs from the parent's. Owner references, the
      selector's label and the `kubewasm.io/applied` annotation are the host's to add. A child
      observed but not answered is deleted.
    - `resync_after`: sync this parent again after this long even if nothing changes (seconds
      or a timedelta; sent as whole milliseconds rounded up, as `Action.requeue_after`).
    - `finalized`: from `finalize` only: the finalizer may go.

    Two responses are equal when the host would receive the same answer (`resync_after` is
    compared in milliseconds: `5` equals `timedelta(seconds=5)`).
    """

    status: Mapping[str, Any] | None = None
    children: list[Mapping[str, Any]] = field(default_factory=list)
    resync_after: float | timedelta | None = None
    finalized: bool = False

    def __post_init__(self) -> None:
        # A bad delay (negative, NaN) fails where it is written.
        if self.resync_after is not None:
            millis(self.resync_after, "resync_after")

    @property
    def resync_after_ms(self) -> int | None:
        """`resync_after` as the host takes it: whole milliseconds, rounded up."""
        return None if self.resync_after is None else millis(self.resync_after, "resync_after")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SyncResponse):
            return NotImplemented
        return (self.status, list(self.children), self.resync_after_ms, self.finalized) == (
            other.status,
            list(other.children),
            other.resync_after_ms,
            other.finalized,
        )


# One encoder for every answer, as `kubewasm.context` has for writes.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


class Encoded(NamedTuple):
    """A `SyncResponse` as it crosses the boundary: the WIT `sync-response`, field for field."""

    status: str | None
    children: list[str]
    resync_after_ms: int | None
    finalized: bool


def encode(response: SyncResponse) -> Encoded:
    """The JSON text of a response. A status or child that is not JSON raises `TypeError` or
    `ValueError`: a bug, which traps in the component."""
    status = None if response.status is None else _ENCODER.encode(response.status)
    return Encoded(status, [_ENCODER.encode(c) for c in response.children], response.resync_after_ms, bool(response.finalized))


def decode(encoded: Encoded) -> SyncResponse:
    """A response as the host receives it: status and children parsed back from their JSON
    text, `resync_after` in seconds."""
    ms = encoded.resync_after_ms
    return SyncResponse(
        status=None if encoded.status is None else json.loads(encoded.status),
        children=[json.loads(c) for c in encoded.children],
        resync_after=None if ms is None else ms / 1000,
        finalized=encoded.finalized,
    )


class CompositeController(WebhookHandlers):
    """A declarative controller plugin. Subclass it (instead of `Controller`), then build the
    module with `kubewasm-py build`:

        class Greeter(CompositeController):
            def manifest(self) -> Manifest:
                return Manifest("greeter", "0.1.0").primary(GREETING).child(kinds.CONFIG_MAP)

            def sync(self, request: SyncRequest) -> SyncResponse:
                ...

    The manifest's primary is the parent kind; `Manifest.child(gvk, strategy)` declares each
    child kind. For every parent, the host claims its children, calls `customize` (once per
    parent and generation) and `sync` (or `finalize` for a parent being deleted that carries
    the manifest's finalizer), then makes the world match the answer: it server-side applies
    the desired children (as the kind's `UpdateStrategy` says), deletes the others once every
    apply succeeded, and replaces the parent's status.

    Settings and construction are the same as `Controller`'s: `settings_defaults`, then
    `CompositeController(settings)` once per instance; raise from `__init__` to refuse loading.

    `customize`, `sync` and `finalize` may read the cache and log through `self.ctx`: the host
    refuses every write and Event (`Forbidden`), as it makes every write from the answers. A
    `KubewasmError` raised from them fails the call (retried with backoff, the host changes
    nothing); any other exception is a bug and traps, as in `Controller`.
    """

    settings_defaults: ClassVar[Mapping[str, Any]] = {}
    """Every setting the controller takes, with its default (top-level keys of `NAME.toml`)."""

    _ctx: Context | None = None

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings

    @property
    def ctx(self) -> Context:
        """The host, during `customize`, `sync` and `finalize`: cache reads (`get`, `list`) and
        logs (`info`, ...). Its client and Event calls raise `Forbidden`. Its `key` is the
        parent's."""
        if self._ctx is None:
            raise RuntimeError("ctx is only available during customize, sync and finalize")
        return self._ctx

    def manifest(self) -> Manifest:
        """The parent kind (`.primary(gvk)`), the child kinds (`.child(gvk, strategy)`), and what
        else the plugin needs."""
        raise NotImplementedError(f"{type(self).__name__} must define manifest()")

    def customize(self, parent: Object) -> list[RelatedRule]:
        """The related objects `parent` needs besides its children, handed to `sync` and
        `finalize` in `request.related`. Asked once per parent and `metadata.generation`, so
        it should depend on the parent's spec alone. By default none."""
        return []

    def sync(self, request: SyncRequest) -> SyncResponse:
        """The children and status `request.parent` should have. Return a `SyncResponse`
        (never None: an answer without children would delete them all)."""
        raise NotImplementedError(f"{type(self).__name__} must define sync()")

    def finalize(self, request: SyncRequest) -> SyncResponse:
        """The same for a parent being deleted that carries the manifest's finalizer: what
        children should remain while it goes, and `finalized=True` once the external cleanup
        is done (until then the host calls it again on the next event or after `resync_after`,
        5 s when None). By default no children and finalized."""
        return SyncResponse(finalized=True)
