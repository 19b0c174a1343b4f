"""The manifest builder: what a controller reconciles and what it needs.

    Manifest("sample-controller", "0.1.0")
        .primary(FOO)
        .owns(kinds.DEPLOYMENT)
        .permission(kinds.DEPLOYMENT, ["create", "patch"])
        .status_permission(FOO, ["patch"])
        .max_concurrency(2)

Each method returns the manifest, so calls chain. What was built is in `.spec`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Iterable, Literal

from .core import Gvk, Verb

@dataclass(frozen=True)
class Mapping:
    """How an event on a watched object becomes keys of primary objects to reconcile."""

    kind: Literal["owner-references", "label", "map-related"]
    label_key: str | None = None

    @classmethod
    def owner_references(cls) -> Mapping:
        """The object's owners of the primary kind, in its namespace."""
        return cls("owner-references")

    @classmethod
    def label(cls, key: str) -> Mapping:
        """The primary named by the value of this label on the object, in its namespace."""
        return cls("label", key)

    @classmethod
    def map_related(cls) -> Mapping:
        """`Controller.map_related` decides."""
        return cls("map-related")


@dataclass
class Watch:
    resource: Gvk
    mapping: Mapping
    label_selector: str | None = None


@dataclass
class Permission:
    resource: Gvk
    verbs: list[Verb]
    subresource: str | None = None
    namespaces: list[str] = field(default_factory=list)


@dataclass
class Limits:
    """`None` takes the host's default (5000 ms; 64 MiB)."""

    deadline_ms: int | None = None
    memory_bytes: int | None = None


@dataclass
class ManifestSpec:
    """The plain data of a manifest, field for field the WIT `manifest` record."""

    name: str
    version: str
    primary: Gvk | None = None
    primary_selector: str | None = None
    owns: list[Gvk] = field(default_factory=list)
    watches: list[Watch] = field(default_factory=list)
    finalizer: str | None = None
    resync_seconds: int | None = None
    max_concurrency: int = 1
    limits: Limits = field(default_factory=Limits)
    permissions: list[Permission] = field(default_factory=list)


def _verbs(verbs: Iterable[Verb | str]) -> list[Verb]:
    if isinstance(verbs, (str, Verb)):
        verbs = [verbs]
    return [Verb.parse(v) for v in verbs]


class Manifest:
    """What a controller reconciles and needs. Start with `Manifest(name, version)`, then chain.

    Defaults: one worker, and the host's deadline, memory cap and resync. A Python plugin
    instance holds about 13 MiB of linear memory after describing itself, well inside the host's
    default cap of 64 MiB; ask for more (`.limits(memory_bytes=...)`) when a reconcile holds
    many or large objects at once (every object listed from the cache is parsed into dicts)."""

    def __init__(self, name: str, version: str) -> None:
        self.spec = ManifestSpec(name, version)

    def primary(self, resource: Gvk) -> Manifest:
        """The reconciled resource."""
        self.spec.primary = resource
        return self

    def primary_selector(self, selector: str) -> Manifest:
        """Reconcile only primaries matching this label selector."""
        self.spec.primary_selector = selector
        return self

    def owns(self, resource: Gvk) -> Manifest:
        """Objects this controller creates with an owner reference to the primary."""
        self.spec.owns.append(resource)
        return self

    def watches(self, resource: Gvk, mapping: Mapping | None = None, label_selector: str | None = None) -> Manifest:
        """React to events on another resource (by default through `map_related`)."""
        self.spec.watches.append(Watch(resource, mapping or Mapping.map_related(), label_selector))
        return self

    def finalizer(self, name: str) -> Manifest:
        """The finalizer the host adds to primaries so that `finalize` runs before they go."""
        self.spec.finalizer = name
        return self

    def resync(self, every: float | timedelta) -> Manifest:
        """Reconcile every primary at least this often (seconds or a timedelta); 0 disables."""
        seconds = every.total_seconds() if isinstance(every, timedelta) else every
        self.spec.resync_seconds = int(seconds)
        return self

    def max_concurrency(self, workers: int) -> Manifest:
        self.spec.max_concurrency = workers
        return self

    def limits(self, *, deadline_ms: int | None = None, memory_bytes: int | None = None) -> Manifest:
        """Asks for other limits; None keeps the host default (5000 ms; 64 MiB)."""
        self.spec.limits = Limits(deadline_ms, memory_bytes)
        return self

    def permission(self, resource: Gvk, verbs: Iterable[Verb | str], namespaces: Iterable[str] = ()) -> Manifest:
        """Grants `verbs` on a resource (in `namespaces`, or every namespace)."""
        return self.grant(resource, None, verbs, namespaces)

    def status_permission(self, resource: Gvk, verbs: Iterable[Verb | str], namespaces: Iterable[str] = ()) -> Manifest:
        """Grants `verbs` on a resource's status subresource."""
        return self.grant(resource, "status", verbs, namespaces)

    def grant(self, resource: Gvk, subresource: str | None, verbs: Iterable[Verb | str], namespaces: Iterable[str] = ()) -> Manifest:
        """The general form: a resource, an optional subresource, verbs and namespaces."""
        self.spec.permissions.append(Permission(resource, _verbs(verbs), subresource, list(namespaces)))
        return self

    def __repr__(self) -> str:
        return f"Manifest({self.spec!r})"
