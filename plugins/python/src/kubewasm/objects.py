"""Kubernetes objects as plain dicts (parsed JSON), and the helpers controllers need:
metadata, owner references, finalizers, conditions and status.

Readers never fail on a missing field: they return None (or an empty dict/list). Writers
(`set_label`, `add_finalizer`, `set_condition`, ...) change the dict in place and create the
parents they need.

    from kubewasm import objects as o

    o.name(foo), o.namespace(foo), o.uid(foo), o.generation(foo)
    o.field(foo, "spec.replicas", 1)
    o.is_controlled_by(deployment, foo)
    o.controller_owner_ref(foo)          # for a child's metadata.ownerReferences
    o.condition_status(node, "Ready")    # "True", "False", "Unknown" or None
"""

import datetime as _dt
from collections import abc as _abc
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import Any

from .core import Gvk, ObjectKey

Object = dict[str, Any]
"""A Kubernetes object: `apiVersion`, `kind`, `metadata`, and the rest."""

_MISSING = object()

# --- identity -------------------------------------------------------------------------------


def new_object(gvk: Gvk, name: str, namespace: str | None = None, **fields: Any) -> Object:
    """A new object of a kind: `apiVersion`, `kind`, `metadata` (name, namespace), then
    `fields` as top-level fields (`spec=...`, `data=...`)."""
    metadata: Object = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": gvk.api_version, "kind": gvk.kind, "metadata": metadata, **fields}


def gvk(obj: Mapping[str, Any]) -> Gvk:
    """The object's kind, from `apiVersion` and `kind`."""
    return Gvk.of(obj)


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """`metadata`, or an empty dict."""
    return obj.get("metadata") or {}


def _meta_mut(obj: MutableMapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    return meta


def name(obj: Mapping[str, Any]) -> str:
    """`metadata.name` ("" when missing)."""
    return metadata(obj).get("name") or ""


def namespace(obj: Mapping[str, Any]) -> str | None:
    """`metadata.namespace`, None for cluster-scoped objects."""
    return metadata(obj).get("namespace") or None


def key(obj: Mapping[str, Any]) -> ObjectKey:
    """The object's namespace and name."""
    return ObjectKey.of(obj)


def uid(obj: Mapping[str, Any]) -> str | None:
    return metadata(obj).get("uid") or None


def generation(obj: Mapping[str, Any]) -> int | None:
    """`metadata.generation`: bumped by the API server on every change of the spec."""
    return metadata(obj).get("generation")


def resource_version(obj: Mapping[str, Any]) -> str | None:
    return metadata(obj).get("resourceVersion") or None


def object_ref(obj: Mapping[str, Any]) -> tuple[Gvk, str | None, str]:
    """(kind, namespace, name): what `Context.get`, `patch` and `delete` take."""
    return gvk(obj), namespace(obj), name(obj)


# --- fields ---------------------------------------------------------------------------------


def field(obj: Mapping[str, Any], path: str | Sequence[str | int], default: Any = None) -> Any:
    """A nested field, or `default` if any step is missing (or null).

    `path` is dotted ("spec.replicas") or a sequence of keys and list indexes
    (`["metadata", "annotations", "example.com/key"]` for keys that contain dots)."""
    steps: Sequence[str | int] = path.split(".") if isinstance(path, str) else path
    current: Any = obj
    for step in steps:
        if isinstance(step, int):
            if not (isinstance(current, list) and -len(current) <= step < len(current)):
                return default
            current = current[step]
        # Parsed JSON is made of dicts: check for one before the slower abstract Mapping.
        elif isinstance(current, dict) or isinstance(current, _abc.Mapping):
            current = current.get(step, _MISSING)
        else:
            return default
        if current is _MISSING or current is None:
            return default
    return current


def set_field(obj: MutableMapping[str, Any], path: str | Sequence[str], value: Any) -> None:
    """Sets a nested field, creating the dicts on the way."""
    steps = path.split(".") if isinstance(path, str) else list(path)
    current: MutableMapping[str, Any] = obj
    for step in steps[:-1]:
        nxt = current.get(step)
        if not isinstance(nxt, MutableMapping):
            nxt = current[step] = {}
        current = nxt
    current[steps[-1]] = value


# --- labels and annotations -----------------------------------------------------------------


def labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return metadata(obj).get("labels") or {}


def label(obj: Mapping[str, Any], key: str, default: str | None = None) -> str | None:
    value = labels(obj).get(key)
    return default if value is None else str(value)


def set_label(obj: MutableMapping[str, Any], key: str, value: str) -> None:
    _meta_mut(obj).setdefault("labels", {})[key] = value


def annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return metadata(obj).get("annotations") or {}


def annotation(obj: Mapping[str, Any], key: str, default: str | None = None) -> str | None:
    value = annotations(obj).get(key)
    return default if value is None else str(value)


def has_annotation(obj: Mapping[str, Any], key: str) -> bool:
    return key in annotations(obj)


def set_annotation(obj: MutableMapping[str, Any], key: str, value: str) -> None:
    _meta_mut(obj).setdefault("annotations", {})[key] = value


# --- owner references -----------------------------------------------------------------------


def owner_references(obj: Mapping[str, Any]) -> list[Object]:
    return list(metadata(obj).get("ownerReferences") or [])


def controller_ref(obj: Mapping[str, Any]) -> Object | None:
    """The owner reference with `controller: true`, if any."""
    return next((r for r in owner_references(obj) if r.get("controller") is True), None)


def is_controlled_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    """Whether `owner` is `obj`'s controller: an owner reference with `controller: true` and
    the owner's uid."""
    owner_uid = uid(owner)
    return owner_uid is not None and any(r.get("controller") is True and r.get("uid") == owner_uid for r in owner_references(obj))


def owner_ref(owner: Mapping[str, Any], *, controller: bool = False, block_owner_deletion: bool = False) -> Object:
    """An owner reference to `owner`."""
    ref: Object = {
        "apiVersion": owner.get("apiVersion", ""),
        "kind": owner.get("kind", ""),
        "name": name(owner),
        "uid": uid(owner) or "",
    }
    if controller:
        ref["controller"] = True
    if block_owner_deletion:
        ref["blockOwnerDeletion"] = True
    return ref


def controller_owner_ref(owner: Mapping[str, Any]) -> Object:
    """An owner reference making `owner` the controller of a child (`controller` and
    `blockOwnerDeletion` true), so the child is garbage-collected with it and the child's events
    reach `owner`'s controller."""
    return owner_ref(owner, controller=True, block_owner_deletion=True)


# --- finalizers and deletion ----------------------------------------------------------------


def finalizers(obj: Mapping[str, Any]) -> list[str]:
    return list(metadata(obj).get("finalizers") or [])


def has_finalizer(obj: Mapping[str, Any], finalizer: str) -> bool:
    return finalizer in finalizers(obj)


def add_finalizer(obj: MutableMapping[str, Any], finalizer: str) -> bool:
    """Adds a finalizer; False if it was there already."""
    current = _meta_mut(obj).setdefault("finalizers", [])
    if finalizer in current:
        return False
    current.append(finalizer)
    return True


def remove_finalizer(obj: MutableMapping[str, Any], finalizer: str) -> bool:
    """Removes a finalizer; False if it was not there."""
    meta = _meta_mut(obj)
    current = meta.get("finalizers") or []
    if finalizer not in current:
        return False
    meta["finalizers"] = [f for f in current if f != finalizer]
    return True


def is_deleting(obj: Mapping[str, Any]) -> bool:
    """Whether the object has a deletion timestamp (it goes once its finalizers are gone)."""
    return bool(metadata(obj).get("deletionTimestamp"))


# --- status and conditions ------------------------------------------------------------------


def status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """`status`, or an empty dict."""
    return obj.get("status") or {}


def status_object(obj: Mapping[str, Any], status: Mapping[str, Any]) -> Object:
    """The smallest object that server-side applies `status` to `obj`'s status subresource:
    `apiVersion`, `kind`, `metadata` (name, namespace) and `status`. For `Context.apply_status`."""
    body = new_object(gvk(obj), name(obj), namespace(obj))
    body["status"] = dict(status)
    return body


def conditions(obj: Mapping[str, Any]) -> list[Object]:
    """`status.conditions`, or an empty list."""
    return list(status(obj).get("conditions") or [])


def get_condition(obj: Mapping[str, Any], type: str) -> Object | None:
    """The condition of a type (e.g. "Ready"), if present."""
    return next((c for c in conditions(obj) if c.get("type") == type), None)


def condition_status(obj: Mapping[str, Any], type: str) -> str | None:
    """ "True", "False", "Unknown", or None when the object has no condition of that type."""
    cond = get_condition(obj, type)
    return None if cond is None else cond.get("status")


def is_condition_true(obj: Mapping[str, Any], type: str) -> bool:
    return condition_status(obj, type) == "True"


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(
    obj: MutableMapping[str, Any],
    type: str,
    status: bool | str,
    reason: str,
    message: str = "",
    *,
    observed_generation: int | None = None,
    now: str | None = None,
) -> bool:
    """Sets a condition in `status.conditions` the way Kubernetes' `meta.SetStatusCondition`
    does: `lastTransitionTime` changes only when the status changes. `status` is a bool or
    "True"/"False"/"Unknown". Returns whether anything changed."""
    if isinstance(status, bool):
        status = "True" if status else "False"
    if status not in ("True", "False", "Unknown"):
        raise ValueError(f"condition status must be True, False or Unknown, not {status!r}")
    st = obj.get("status")
    if not isinstance(st, MutableMapping):
        st = obj["status"] = {}
    conds = st.setdefault("conditions", [])
    wanted: Object = {"type": type, "status": status, "reason": reason, "message": message}
    if observed_generation is not None:
        wanted["observedGeneration"] = observed_generation
    for cond in conds:
        if cond.get("type") == type:
            changed = False
            if cond.get("status") != status:
                cond["lastTransitionTime"] = now or _now()
                changed = True
            for k, v in wanted.items():
                if cond.get(k) != v:
                    cond[k] = v
                    changed = True
            return changed
    wanted["lastTransitionTime"] = now or _now()
    conds.append(wanted)
    return True


def remove_condition(obj: MutableMapping[str, Any], type: str) -> bool:
    """Removes the condition of a type; False if there was none."""
    st = obj.get("status")
    if not isinstance(st, MutableMapping) or not st.get("conditions"):
        return False
    before = len(st["conditions"])
    st["conditions"] = [c for c in st["conditions"] if c.get("type") != type]
    return len(st["conditions"]) != before


def sorted_keys(objs: Iterable[Mapping[str, Any]]) -> list[ObjectKey]:
    """The keys of objects, sorted by namespace then name (None before any namespace)."""
    return sorted((key(o) for o in objs), key=lambda k: (k.namespace or "", k.name))
