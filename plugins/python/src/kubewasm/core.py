"""The small value types of the contract, in Python terms: kinds, keys, actions and enums.

Pure Python: nothing here imports the generated WIT bindings, so it runs under plain CPython
(tests, editors) as well as inside a component.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Self


@dataclass(frozen=True, order=True)
class Gvk:
    """A Kubernetes kind as the API names it: group ("" for core), version, kind."""

    group: str
    version: str
    kind: str

    @classmethod
    def from_api_version(cls, api_version: str, kind: str) -> Gvk:
        """Parses `apiVersion` and `kind` as objects carry them ("apps/v1", "v1")."""
        group, _, version = api_version.rpartition("/")
        return cls(group, version, kind)

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Gvk:
        """The kind of an object, from its `apiVersion` and `kind`."""
        return cls.from_api_version(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))

    @property
    def api_version(self) -> str:
        """`apiVersion` as objects carry it: "apps/v1", or "v1" for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        # kubectl's spelling: Deployment.v1.apps, Node.v1
        return ".".join(p for p in (self.kind, self.version, self.group) if p)


@dataclass(frozen=True, order=True)
class ObjectKey:
    """An object's namespace (None when cluster-scoped) and name."""

    namespace: str | None
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectKey:
        meta = obj.get("metadata") or {}
        return cls(meta.get("namespace") or None, meta.get("name", ""))

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class Action:
    """What the host does with the key after a successful reconcile, finalize or released.

    `Action.done()` (also `DONE`, or returning None): nothing more until something changes or
    the periodic resync. `Action.requeue_after(seconds)`: reconcile again after that long.

    Delays are in seconds, Python's unit of time (`time.sleep`, `timedelta.total_seconds`), and
    reach the host as whole milliseconds, rounded up. Under a second a requeue means "again
    soon": it is rate limited like a failure (per-key backoff from 5 ms and the plugin's token
    bucket), so ask for a second or more for a fixed delay.
    """

    requeue_after_ms: int | None = None

    @classmethod
    def done(cls) -> Action:
        return DONE

    @classmethod
    def requeue_after(cls, after: float | timedelta) -> Action:
        """Reconcile again after `after` (seconds, or a timedelta), in whole milliseconds
        rounded up (cut to the WIT's u64 milliseconds)."""
        return cls(requeue_after_ms=millis(after, "requeue_after"))

    @property
    def is_done(self) -> bool:
        return self.requeue_after_ms is None


# The WIT's `requeue-after(u64)` and `resync-after: option<u64>`.
_MAX_MILLIS = 2**64 - 1


def millis(after: float | timedelta, what: str = "delay") -> int:
    """A delay in seconds (a number or a timedelta) as the host takes it: whole milliseconds,
    rounded up (a positive delay is never 0), cut to the WIT's u64. `ValueError` (naming
    `what`) for a negative or NaN delay."""
    if isinstance(after, timedelta):
        # Exact: a timedelta counts whole microseconds.
        ms = -((after // timedelta(microseconds=1)) // -1000)
    else:
        seconds = float(after)
        if math.isnan(seconds):
            raise ValueError(f"{what}: the delay is NaN")
        # Through whole microseconds, so that float noise (1.1 * 1000 = 1100.0000000000002)
        # does not round up a millisecond.
        ms = _MAX_MILLIS if math.isinf(seconds) else -(-round(seconds * 1_000_000) // 1000)
    if ms < 0:
        raise ValueError(f"{what}: negative delay {after}")
    return min(ms, _MAX_MILLIS)


DONE = Action()


class _WitEnum(enum.StrEnum):
    """An enum whose values are the WIT case names (`str()` is the name), so plain strings are
    accepted too."""

    @classmethod
    def parse(cls, value: Any) -> Self:
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            choices = ", ".join(m.value for m in cls)
            raise ValueError(f"{value!r} is not a {cls.__name__} (one of: {choices})") from None


class Verb(_WitEnum):
    """Kubernetes API verbs, with the meaning RBAC gives them."""

    GET = "get"
    LIST = "list"
    WATCH = "watch"
    CREATE = "create"
    UPDATE = "update"
    PATCH = "patch"
    DELETE = "delete"


class EventType(_WitEnum):
    NORMAL = "normal"
    WARNING = "warning"


class PatchType(_WitEnum):
    """The body of a patch: RFC 7386 merge, RFC 6902 JSON patch, or strategic merge."""

    MERGE = "merge"
    JSON = "json"
    STRATEGIC = "strategic"


class LogLevel(_WitEnum):
    TRACE = "trace"
    DEBUG = "debug"
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


class ErrorCode(_WitEnum):
    """Why a host call failed (the WIT `error-code`)."""

    NOT_FOUND = "not-found"
    ALREADY_EXISTS = "already-exists"
    CONFLICT = "conflict"
    FORBIDDEN = "forbidden"
    INVALID = "invalid"
    UNAVAILABLE = "unavailable"
    OTHER = "other"


class UpdateStrategy(_WitEnum):
    """What the host does with an existing child of a declarative controller whose desired state
    changed (the WIT `update-strategy`)."""

    ON_DELETE = "on-delete"
    """Nothing: an existing child is never updated; one that is gone is created again as
    desired (Metacontroller's default)."""
    RECREATE = "recreate"
    """Deletes it, then creates it as desired once it is gone."""
    IN_PLACE = "in-place"
    """Server-side applies the desired state over it (also when someone else changed a field
    the desired state sets)."""


class ChildSelector(_WitEnum):
    """Which objects are a declarative controller's children to claim (the WIT
    `child-selector`)."""

    GENERATED = "generated"
    """The host labels every child `kubewasm.io/controller-uid: <parent uid>` and selects by
    that label."""
    PARENT_SPEC_SELECTOR = "parent-spec-selector"
    """The parent's `spec.selector` (`matchLabels`, `matchExpressions`); matching orphans are
    adopted."""
