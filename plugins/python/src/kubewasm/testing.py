"""Unit-testing controllers under plain CPython, without a cluster or a wasm runtime.

    from kubewasm.testing import Harness

    def test_creates_deployment():
        h = Harness(SampleController, objects=[foo])
        assert h.reconcile(foo) == Action.done()
        assert h.host.applied()[0]["kind"] == "Deployment"

    def test_greets():                                  # a CompositeController
        h = Harness(Greeter)
        answer = h.sync(greeting, children=[existing_config_map])
        assert answer.status == {"greeted": True}

`FakeHost` stands in for the host: an in-memory object store serves the cache (of a kind the
manifest declares metadata-only, only the metadata, as the host hands it), writes change the
store (immediately: the real cache catches up a moment later) and are recorded, events and logs
are recorded. It is deliberately simple: server-side apply is a deep merge, and the
manifest's permissions are not enforced (`kubewasm check` and the real host do that; for
whole-plugin table tests on the built component use `kubewasm test`).

Member clusters (contract 0.1.4) are fake hosts of their own, engaged with `add_member`: each
has its own store, recorded writes, events and injected failures. `Context.in_cluster` reaches
them as the host does (a member outside the manifest's `clusters` scope raises `Forbidden`, one
not engaged `Unavailable`), and `Harness.reconcile(obj, cluster="eu")` runs a call for an
object of a member the plugin serves:

    def test_copies_into_members():
        h = Harness(Propagation, objects=[source])
        eu = h.host.add_member("eu", labels={"env": "prod"})
        h.reconcile(source)
        assert eu.applied()[0]["metadata"]["name"] == "config"
"""

from __future__ import annotations

import copy
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast, overload

from .composite import CompositeController, RelatedRule, SyncResponse, decode
from .context import Cluster, Host
from .controller import Controller
from .core import Action, EventType, Gvk, LogLevel, ObjectKey, PatchType
from .errors import AlreadyExists, Conflict, Forbidden, Invalid, KubewasmError, NotFound, Unavailable
from .manifest import ClusterScope, Composition, ManifestSpec, Members
from .objects import Object, is_controlled_by
from .runtime import Refused, Runner, SyncMethod
from .webhook import Denied, Operation, Review, UserInfo

__all__ = ["COMPOSING", "HOOKING", "Admission", "Call", "FakeHost", "Harness", "match_labels", "parse_selector"]

COMPOSING = "a declarative plugin's customize, sync and finalize may read the cache and nothing else (the host makes every write from their answers)"
"""Why the host refuses client and Event calls during `customize`, `sync` and `finalize`: the
end of the `Forbidden` message (`"patch ConfigMap.v1 refused: " + COMPOSING`)."""

HOOKING = "webhook calls may read the cache and nothing else"
"""Why the host refuses client and Event calls during a webhook call (`Harness.admit`,
`Harness.convert`)."""


@dataclass
class Admission:
    """A hook's answer as the API server gets it: allowed with warnings, or a denial's code and
    message (with warnings); `object` is what a mutating hook made of the object (None:
    unchanged)."""

    allowed: bool
    warnings: list[str]
    code: int | None = None
    message: str | None = None
    object: Object | None = None


@dataclass
class Call:
    """One recorded write: `op` is apply, apply_status, create, update, update_status, patch or
    delete; `object` the object sent (apply, create, update) or the patch body (patch)."""

    op: str
    object: Any = None
    resource: Gvk | None = None
    namespace: str | None = None
    name: str | None = None
    force: bool | None = None
    patch_type: PatchType | None = None


def _store_key(resource: Gvk, namespace: str | None, name: str) -> tuple[str, str, str, str]:
    return (resource.group, resource.kind, namespace or "", name)


def _obj_key(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return _store_key(Gvk.of(obj), meta.get("namespace"), meta.get("name", ""))


def _metadata_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """What the host hands of an object of a metadata-only kind: its `apiVersion`, `kind` and
    `metadata`, without `metadata.managedFields`."""
    head = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
    if isinstance(head.get("metadata"), Mapping):
        # A new dict: the stored object keeps its managedFields.
        head["metadata"] = {k: v for k, v in head["metadata"].items() if k != "managedFields"}
    return head


def _projected(obj: Mapping[str, Any], fields: Sequence[str]) -> Mapping[str, Any]:
    """What the host hands of an object of a kind the plugin reads projected: its metadata (as
    `_metadata_of`) and, of the rest, the dotted `fields` it has; a path through a value that is
    not an object keeps that value whole."""
    tree: dict[str, Any] = {}  # a name's subtree, or None to keep its whole value
    for path in fields:
        node = tree
        *parents, last = path.split(".")
        for name in parents:
            if node.get(name, {}) is None:
                break  # kept whole already
            node = node.setdefault(name, {})
        else:
            node[last] = None

    def within(value: Any, sub: dict[str, Any] | None) -> Any:
        if sub is None or not isinstance(value, Mapping):
            return value
        return {k: within(value[k], s) for k, s in sub.items() if k in value}

    head = dict(_metadata_of(obj))
    for key, sub in tree.items():
        if key not in head and key not in ("apiVersion", "kind", "metadata") and key in obj:
            head[key] = within(obj[key], sub)
    return head


def _controller_uid(obj: Mapping[str, Any]) -> str | None:
    """The uid of `obj`'s controller owner reference (`controller: true`), as the host indexes it."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((r.get("uid") for r in refs if isinstance(r, Mapping) and r.get("controller") is True), None)


def _merge(into: dict[str, Any], patch: Mapping[str, Any], delete_nulls: bool) -> dict[str, Any]:
    """Deep merge (RFC 7386 when `delete_nulls`): dicts merge, anything else replaces."""
    for k, v in patch.items():
        if v is None and delete_nulls:
            into.pop(k, None)
        elif isinstance(v, Mapping):
            base = into.get(k)
            into[k] = _merge(base if isinstance(base, dict) else {}, v, delete_nulls)
        else:
            into[k] = copy.deepcopy(v)
    return into


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise Invalid(f"JSON patch path {path!r} must start with /")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _json_patch(doc: Any, ops: Sequence[Mapping[str, Any]]) -> Any:
    """RFC 6902: add, remove, replace, test (move and copy are left out)."""
    doc = copy.deepcopy(doc)
    for op in ops:
        steps = _pointer(op.get("path", ""))
        if not steps:
            raise Invalid("JSON patch on the whole document is not supported")
        parent = doc
        for step in steps[:-1]:
            parent = parent[int(step)] if isinstance(parent, list) else parent.get(step)
            if parent is None:
                raise Invalid(f"JSON patch path {op.get('path')!r} does not exist")
        last = steps[-1]
        kind = op.get("op")
        if kind == "test":
            current = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if current != op.get("value"):
                raise Invalid(f"JSON patch test failed at {op.get('path')!r}")
        elif kind in ("add", "replace"):
            if isinstance(parent, list):
                if last == "-":
                    parent.append(op.get("value"))
                elif kind == "add":
                    parent.insert(int(last), op.get("value"))
                else:
                    parent[int(last)] = op.get("value")
            else:
                if kind == "replace" and last not in parent:
                    raise Invalid(f"JSON patch replace of missing {op.get('path')!r}")
                parent[last] = op.get("value")
        elif kind == "remove":
            if isinstance(parent, list):
                del parent[int(last)]
            elif last in parent:
                del parent[last]
            else:
                raise Invalid(f"JSON patch remove of missing {op.get('path')!r}")
        else:
            raise Invalid(f"JSON patch op {kind!r} is not supported by FakeHost")
    return doc


# --- label selectors: the host's parser (host/src/selector.rs), line for line, so that a fake
# host selects exactly what the host would (tests/cases/selectors.yaml holds both to it) ---


def _is_label_name(s: str) -> bool:
    def alnum(c: str) -> bool:
        return c.isascii() and c.isalnum()

    return 0 < len(s) <= 63 and alnum(s[0]) and alnum(s[-1]) and all(alnum(c) or c in "-_." for c in s)


def _is_dns_label(s: str) -> bool:
    def ok(c: str) -> bool:
        return c.isascii() and (c.islower() or c.isdigit())

    return 0 < len(s) <= 63 and ok(s[0]) and ok(s[-1]) and all(ok(c) or c == "-" for c in s)


def _label_key(key: str) -> str:
    prefix, slash, name = key.rpartition("/")
    if slash and not (len(prefix) <= 253 and all(_is_dns_label(p) for p in prefix.split("."))):
        raise ValueError(f"label key prefix {prefix!r} is not a DNS subdomain")
    if not _is_label_name(name):
        raise ValueError(f"label key {key!r} must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit")
    return key


def _label_value(value: str) -> str:
    if value and not _is_label_name(value):
        raise ValueError(f"label value {value!r} is not valid")
    return value


def _split_requirements(selector: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(selector):
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                raise ValueError("unbalanced ')'")
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(selector[start:i])
            start = i + 1
    if depth:
        raise ValueError("unbalanced '('")
    parts.append(selector[start:])
    return [] if len(parts) == 1 and not parts[0].strip() else parts


# A requirement: (operator, key, values); operators as kube's `Expression`.
_Requirement = tuple[str, str, frozenset[str]]


def _requirement(raw: str) -> _Requirement:
    req = raw.strip()
    if not req:
        raise ValueError("empty requirement")
    if req.startswith("!"):
        return ("DoesNotExist", _label_key(req[1:].strip()), frozenset())
    if "!=" in req:
        key, _, value = req.partition("!=")
        return ("NotEqual", _label_key(key.strip()), frozenset([_label_value(value.strip())]))
    for op in ("==", "="):
        if op in req:
            key, _, value = req.partition(op)
            return ("Equal", _label_key(key.strip()), frozenset([_label_value(value.strip())]))
    words = req.split(None, 1)
    key = _label_key(words[0])
    if len(words) == 1:
        return ("Exists", key, frozenset())
    rest = words[1].strip()
    if rest.startswith("notin"):
        op, values = "NotIn", rest[len("notin") :]
    elif rest.startswith("in"):
        op, values = "In", rest[len("in") :]
    else:
        raise ValueError(f"expected '=', '!=', 'in' or 'notin' after {key!r}")
    values = values.strip()
    if not (values.startswith("(") and values.endswith(")")):
        raise ValueError(f"the values of {key!r} must be in parentheses")
    return (op, key, frozenset(_label_value(v.strip()) for v in values[1:-1].split(",")))


def parse_selector(selector: str) -> list[_Requirement]:
    """Parses a Kubernetes label selector as the host does; `Invalid` when it does not parse."""
    try:
        return [_requirement(r) for r in _split_requirements(selector)]
    except ValueError as e:
        raise Invalid(f"label selector {selector!r}: {e}") from None


def _satisfies(labels: Mapping[str, str], requirement: _Requirement) -> bool:
    op, key, values = requirement
    value = labels.get(key)
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    (wanted,) = values
    return (value == wanted) if op == "Equal" else (value != wanted)


def match_labels(labels: Mapping[str, str], selector: str | None) -> bool:
    """Whether labels match a Kubernetes label selector (`a=b`, `a==b`, `a!=b`, `a`, `!a`,
    `a in (x,y)`, `a notin (x,y)`, comma-separated), as the host matches it. Raises `Invalid`
    for a selector the host would refuse."""
    if selector is None:
        return True
    return all(_satisfies(labels, r) for r in parse_selector(selector))


def _chooses(members: Members, labels: Mapping[str, str]) -> bool:
    """Whether a choice of members takes a member with these labels, as the host chooses."""
    if members.kind == "all":
        return True
    if members.kind == "matching":
        return match_labels(labels, members.selector or "")
    return False


class FakeHost(Host):
    """An in-memory host for unit tests: a store of objects, recorded writes, events, logs, and
    errors to inject (`fail`); and member clusters, each a `FakeHost` of its own (`add_member`).

    The `fleet_` calls (`Context.in_cluster`) act in the named member (None: this host's own
    cluster) with the member's own store, records and failures, and refuse as the host does: a
    member not engaged (never added, or removed) raises `Unavailable` ("cluster \"eu\" is not
    engaged by this host now"), one outside `scope` `Forbidden` ("cluster \"eu\" is not within
    the plugin's clusters (its `clusters` scope)")."""

    def __init__(self, objects: Iterable[Mapping[str, Any]] = (), *, labels: Mapping[str, str] | None = None) -> None:
        self.objects: dict[tuple[str, str, str, str], Object] = {}
        # The kinds the plugin reads metadata-only, and the fields it reads of others
        # (`Harness` sets the manifest's): see `handed` and `answered`.
        self.metadata_only: list[Gvk] = []
        self.reads_fields: dict[Gvk, list[str]] = {}
        self.calls: list[Call] = []
        self.events: list[dict[str, Any]] = []
        self.logs: list[tuple[LogLevel, str, dict[str, str]]] = []
        # Set (to the rule it states) while the plugin may only read the cache: client and
        # events calls raise `Forbidden`, as the host refuses them (see `only_cache`).
        self.cache_only: str | None = None
        # The messages of the calls refused that way, in order.
        self.refused: list[str] = []
        self._failures: dict[str, list[KubewasmError]] = defaultdict(list)
        self._next_uid = 1
        self._next_version = 1
        # Member clusters (contract 0.1.4), by name: each a fake host of its own.
        self.members: dict[str, FakeHost] = {}
        # A member's labels (what the host's cluster listing and member selectors see).
        self.labels: dict[str, str] = dict(labels or {})
        # The plugin's clusters (`Harness` sets the manifest's scope): the members `clusters()`
        # lists and the fleet calls reach. None: every engaged member.
        self.scope: ClusterScope | None = None
        # The cluster of the call's object, what `fleet.current` answers: None for this host's
        # own; `Harness` sets it during a call for an object of a member.
        self.current: str | None = None
        # The host that engaged this member (None for the host itself): its metadata-only kinds
        # and cache-only rule hold here too.
        self._hub: FakeHost | None = None
        self.add(*objects)

    # --- setting up ---

    def add(self, *objects: Mapping[str, Any]) -> None:
        """Puts objects in the store (as the cache would hold them), replacing same-named ones.
        Missing uid and resourceVersion are filled in."""
        for obj in objects:
            stored = copy.deepcopy(dict(obj))
            meta = stored.setdefault("metadata", {})
            meta.setdefault("uid", self._uid())
            meta.setdefault("resourceVersion", self._version())
            self.objects[_obj_key(stored)] = stored

    def fail(self, op: str, error: KubewasmError, times: int = 1) -> None:
        """Makes the next `times` calls of `op` (cache_get, cache_list, cache_list_controlled,
        apply, apply_status, create, update, update_status, patch, delete, publish_event) raise
        `error`."""
        self._failures[op].extend([error] * times)

    def add_member(self, name: str, labels: Mapping[str, str] | None = None, objects: Iterable[Mapping[str, Any]] = ()) -> FakeHost:
        """Engages a member cluster (replacing one of the same name) with these labels and
        objects; returns its fake host, to add objects to, inject failures into (`fail`) and
        assert on (`applied()`, `writes()`, `events`)."""
        member = FakeHost(objects, labels=labels)
        member._hub = self
        self.members[name] = member
        return member

    def member(self, name: str) -> FakeHost:
        """The fake host of an engaged member cluster."""
        try:
            return self.members[name]
        except KeyError:
            raise LookupError(f"no member cluster {name!r} in the fake host (add it with add_member)") from None

    def remove_member(self, name: str) -> None:
        """Disengages a member cluster: calls naming it raise `Unavailable` from now on."""
        self.members.pop(name, None)

    def reaches(self, name: str) -> bool:
        """Whether the plugin's `scope` takes the engaged member `name` (it serves or reaches
        it); every engaged member when `scope` is None."""
        member = self.members.get(name)
        if member is None:
            return False
        if self.scope is None:
            return True
        return _chooses(self.scope.serve, member.labels) or _chooses(self.scope.reach, member.labels)

    def serves(self, name: str) -> bool:
        """Whether the plugin's `scope` serves the engaged member `name` (reconciles its
        primaries); every engaged member when `scope` is None."""
        member = self.members.get(name)
        if member is None:
            return False
        return self.scope is None or _chooses(self.scope.serve, member.labels)

    @contextmanager
    def only_cache(self, rule: str = COMPOSING) -> Iterator[None]:
        """While inside, every client and events call raises `Forbidden` with the host's message
        (`"<verb> <kind> refused: <rule>"`, `"an Event refused: <rule>"`), changes nothing and
        is not recorded as a write; cache reads and logs work. `Harness` runs a declarative
        controller's `customize`, `sync` and `finalize` so, as the host does."""
        before, self.cache_only = self.cache_only, rule
        try:
            yield
        finally:
            self.cache_only = before

    def _refuse(self, what: str) -> None:
        rule = self.cache_only if self._hub is None else (self.cache_only or self._hub.cache_only)
        if rule is not None:
            message = f"{what} refused: {rule}"
            (self._hub or self).refused.append(message)
            raise Forbidden(message)

    def get(self, resource: Gvk, namespace: str | None, name: str) -> Object | None:
        """An object from the store (a copy), to assert on."""
        stored = self.objects.get(_store_key(resource, namespace, name))
        return copy.deepcopy(stored) if stored is not None else None

    def handed(self, resource: Gvk, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        """`obj` as the host hands it to the plugin (cache reads, `map_related`): of a kind in
        `metadata_only`, only its `apiVersion`, `kind` and `metadata` (without `managedFields`);
        of a kind in `reads_fields`, as `answered`. Not a copy: it shares `obj`'s values."""
        kinds = self.metadata_only if self._hub is None else [*self.metadata_only, *self._hub.metadata_only]
        return _metadata_of(obj) if resource in kinds else self.answered(resource, obj)

    def answered(self, resource: Gvk, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        """`obj` as the host hands it in a request or a write's answer: of a kind in
        `reads_fields`, its metadata and those fields alone. Not a copy."""
        fields = self.reads_fields.get(resource) if self._hub is None else self._hub.reads_fields.get(resource)
        return obj if fields is None else _projected(obj, fields)

    # --- what happened ---

    def writes(self, op: str | None = None, kind: str | None = None) -> list[Call]:
        """Recorded writes, optionally of one operation and of one kind."""
        out = []
        for c in self.calls:
            if op is not None and c.op != op:
                continue
            if kind is not None:
                k = c.resource.kind if c.resource else (c.object or {}).get("kind")
                if k != kind:
                    continue
            out.append(c)
        return out

    def applied(self, kind: str | None = None) -> list[Object]:
        """Objects sent to `apply`, in order."""
        return [c.object for c in self.writes("apply", kind)]

    def status_applied(self, kind: str | None = None) -> list[Object]:
        """Objects sent to `apply_status`, in order."""
        return [c.object for c in self.writes("apply_status", kind)]

    # --- the Host protocol ---

    def _uid(self) -> str:
        self._next_uid += 1
        return f"uid-{self._next_uid - 1}"

    def _version(self) -> str:
        self._next_version += 1
        return str(self._next_version - 1)

    def _maybe_fail(self, op: str) -> None:
        if self._failures.get(op):
            raise self._failures[op].pop(0)

    def _parse(self, text: str) -> Object:
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise Invalid(f"bad JSON: {e}") from None
        if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind") or not (obj.get("metadata") or {}).get("name"):
            raise Invalid("the object must name its apiVersion, kind and metadata.name")
        return obj

    def _store(self, obj: Object, *, new: bool, spec_changed: bool) -> str:
        meta = obj.setdefault("metadata", {})
        if new:
            meta["uid"] = meta.get("uid") or self._uid()
            meta.setdefault("generation", 1)
        elif spec_changed:
            meta["generation"] = int(meta.get("generation") or 1) + 1
        meta["resourceVersion"] = self._version()
        self.objects[_obj_key(obj)] = obj
        return json.dumps(self.answered(Gvk.of(obj), obj))

    def cache_get(self, resource: Gvk, namespace: str | None, name: str) -> str | None:
        self._maybe_fail("cache_get")
        stored = self.objects.get(_store_key(resource, namespace, name))
        return json.dumps(self.handed(resource, stored)) if stored is not None else None

    def cache_list(self, resource: Gvk, namespace: str | None, label_selector: str | None) -> list[str]:
        self._maybe_fail("cache_list")
        found = [
            o
            for (group, kind, ns, _), o in self.objects.items()
            if (group, kind) == (resource.group, resource.kind)
            and (namespace is None or ns == namespace)
            and match_labels((o.get("metadata") or {}).get("labels") or {}, label_selector)
        ]
        found.sort(key=lambda o: ((o["metadata"].get("namespace") or ""), o["metadata"].get("name", "")))
        return [json.dumps(self.handed(resource, o)) for o in found]

    def cache_list_controlled(self, resource: Gvk, namespace: str | None, owner: str) -> list[str]:
        self._maybe_fail("cache_list_controlled")
        found = [
            o
            for (group, kind, ns, _), o in self.objects.items()
            if (group, kind) == (resource.group, resource.kind) and (namespace is None or ns == namespace) and _controller_uid(o) == owner
        ]
        found.sort(key=lambda o: ((o["metadata"].get("namespace") or ""), o["metadata"].get("name", "")))
        return [json.dumps(self.handed(resource, o)) for o in found]

    def apply(self, obj: str, force: bool) -> str:
        parsed = self._parse(obj)
        self._refuse(f"patch {Gvk.of(parsed)}")
        self.calls.append(Call("apply", parsed, force=force))
        self._maybe_fail("apply")
        current = self.objects.get(_obj_key(parsed))
        if current is None:
            return self._store(copy.deepcopy(parsed), new=True, spec_changed=True)
        merged = _merge(copy.deepcopy(current), {k: v for k, v in parsed.items() if k != "status"}, False)
        return self._store(merged, new=False, spec_changed=merged.get("spec") != current.get("spec"))

    def apply_status(self, obj: str, force: bool) -> str:
        parsed = self._parse(obj)
        self._refuse(f"patch {Gvk.of(parsed)}")
        self.calls.append(Call("apply_status", parsed, force=force))
        self._maybe_fail("apply_status")
        current = self.objects.get(_obj_key(parsed))
        if current is None:
            raise NotFound(f"{Gvk.of(parsed)} {ObjectKey.of(parsed)} not found")
        merged = copy.deepcopy(current)
        merged["status"] = _merge(merged.get("status") or {}, parsed.get("status") or {}, False)
        return self._store(merged, new=False, spec_changed=False)

    def create(self, obj: str) -> str:
        parsed = self._parse(obj)
        self._refuse(f"create {Gvk.of(parsed)}")
        self.calls.append(Call("create", parsed))
        self._maybe_fail("create")
        if _obj_key(parsed) in self.objects:
            raise AlreadyExists(f"{Gvk.of(parsed)} {ObjectKey.of(parsed)} already exists")
        return self._store(copy.deepcopy(parsed), new=True, spec_changed=True)

    def _replace(self, op: str, obj: str, status_only: bool) -> str:
        parsed = self._parse(obj)
        self._refuse(f"update {Gvk.of(parsed)}")
        fields = (self if self._hub is None else self._hub).reads_fields.get(Gvk.of(parsed))
        if fields is not None and not (status_only and "status" in fields):
            what = "the status of" if status_only else "the whole"
            raise Invalid(
                f"update replaces {what} {Gvk.of(parsed)}, and the plugin is handed projected objects of it (reads_fields): write it with apply or patch"
            )
        self.calls.append(Call(op, parsed))
        self._maybe_fail(op)
        current = self.objects.get(_obj_key(parsed))
        if current is None:
            raise NotFound(f"{Gvk.of(parsed)} {ObjectKey.of(parsed)} not found")
        if (parsed.get("metadata") or {}).get("resourceVersion") != current["metadata"].get("resourceVersion"):
            raise Conflict(f"{Gvk.of(parsed)} {ObjectKey.of(parsed)}: the object has been modified")
        if status_only:
            new = copy.deepcopy(current)
            new["status"] = copy.deepcopy(parsed.get("status"))
        else:
            new = copy.deepcopy(parsed)
            new["metadata"]["uid"] = current["metadata"].get("uid")
            new["metadata"]["generation"] = current["metadata"].get("generation", 1)
            if "status" in current:
                new["status"] = copy.deepcopy(current["status"])
        return self._store(new, new=False, spec_changed=not status_only and new.get("spec") != current.get("spec"))

    def update(self, obj: str) -> str:
        return self._replace("update", obj, False)

    def update_status(self, obj: str) -> str:
        return self._replace("update_status", obj, True)

    def patch(self, resource: Gvk, namespace: str | None, name: str, patch_type: PatchType, body: str) -> str:
        try:
            parsed_body = json.loads(body)
        except ValueError as e:
            raise Invalid(f"bad JSON patch body: {e}") from None
        self._refuse(f"patch {resource}")
        self.calls.append(Call("patch", parsed_body, resource, namespace, name, patch_type=patch_type))
        self._maybe_fail("patch")
        current = self.objects.get(_store_key(resource, namespace, name))
        if current is None:
            raise NotFound(f"{resource} {ObjectKey(namespace, name)} not found")
        if patch_type is PatchType.JSON:
            if not isinstance(parsed_body, list):
                raise Invalid("a JSON patch is a list of operations")
            new = _json_patch(current, parsed_body)
        else:
            if not isinstance(parsed_body, dict):
                raise Invalid("a merge patch is an object")
            wanted_rv = (parsed_body.get("metadata") or {}).get("resourceVersion")
            if wanted_rv is not None and wanted_rv != current["metadata"].get("resourceVersion"):
                raise Conflict(f"{resource} {ObjectKey(namespace, name)}: the object has been modified")
            new = _merge(copy.deepcopy(current), parsed_body, True)
        return self._store(new, new=False, spec_changed=new.get("spec") != current.get("spec"))

    def delete(self, resource: Gvk, namespace: str | None, name: str) -> None:
        self._refuse(f"delete {resource}")
        self.calls.append(Call("delete", None, resource, namespace, name))
        self._maybe_fail("delete")
        if self.objects.pop(_store_key(resource, namespace, name), None) is None:
            raise NotFound(f"{resource} {ObjectKey(namespace, name)} not found")

    def publish_event(self, regarding: tuple[Gvk, str | None, str], event_type: EventType, reason: str, action: str, note: str) -> None:
        self._refuse("an Event")
        self._maybe_fail("publish_event")
        resource, namespace, name = regarding
        self.events.append(
            {
                "regarding": {"resource": resource, "namespace": namespace, "name": name},
                "event_type": event_type,
                "reason": reason,
                "action": action,
                "note": note,
            }
        )

    def log(self, level: LogLevel, message: str, fields: Sequence[tuple[str, str]]) -> None:
        self.logs.append((level, message, dict(fields)))

    # --- the fleet (contract 0.1.4) ---

    def current_cluster(self) -> str | None:
        return self.current

    def clusters(self) -> list[Cluster]:
        return [Cluster(name, dict(sorted(m.labels.items()))) for name, m in sorted(self.members.items()) if self.reaches(name)]

    def _target(self, cluster: str | None) -> FakeHost:
        """The fake host of the cluster a fleet call names, or the host's refusal."""
        if cluster is None:
            return self
        if cluster == self.current and cluster in self.members:
            return self.members[cluster]
        named = f"cluster {json.dumps(cluster, ensure_ascii=False)}"
        if cluster not in self.members:
            raise Unavailable(f"{named} is not engaged by this host now")
        if not self.reaches(cluster):
            message = f"{named} is not within the plugin's clusters (its `clusters` scope)"
            self.refused.append(message)
            raise Forbidden(message)
        return self.members[cluster]

    def fleet_get(self, cluster: str | None, resource: Gvk, namespace: str | None, name: str) -> str | None:
        return self._target(cluster).cache_get(resource, namespace, name)

    def fleet_list(self, cluster: str | None, resource: Gvk, namespace: str | None, label_selector: str | None) -> list[str]:
        return self._target(cluster).cache_list(resource, namespace, label_selector)

    def fleet_apply(self, cluster: str | None, obj: str, force: bool) -> str:
        return self._target(cluster).apply(obj, force)

    def fleet_apply_status(self, cluster: str | None, obj: str, force: bool) -> str:
        return self._target(cluster).apply_status(obj, force)

    def fleet_create(self, cluster: str | None, obj: str) -> str:
        return self._target(cluster).create(obj)

    def fleet_update(self, cluster: str | None, obj: str) -> str:
        return self._target(cluster).update(obj)

    def fleet_update_status(self, cluster: str | None, obj: str) -> str:
        return self._target(cluster).update_status(obj)

    def fleet_patch(self, cluster: str | None, resource: Gvk, namespace: str | None, name: str, patch_type: PatchType, body: str) -> str:
        return self._target(cluster).patch(resource, namespace, name, patch_type, body)

    def fleet_delete(self, cluster: str | None, resource: Gvk, namespace: str | None, name: str) -> None:
        self._target(cluster).delete(resource, namespace, name)


def _checked(scope: ClusterScope) -> ClusterScope:
    """The scope, its member selectors parsed as the host parses them: one that does not parse
    refuses the plugin (`Refused`), naming the field, as the host does."""
    for field, members in (("clusters.serve", scope.serve), ("clusters.reach", scope.reach)):
        if members.kind == "matching":
            try:
                parse_selector(members.selector or "")
            except Invalid as e:
                raise Refused(f"manifest field `{field}`: {e.message}") from None
    return scope


class _Served:
    """The host as a call for an object of a member cluster sees it: `cache`, `client` and
    `events` act in the member, the fleet calls and the log are the host's."""

    _HUB_CALLS = frozenset({"current_cluster", "clusters", "log"})

    def __init__(self, hub: FakeHost, member: FakeHost) -> None:
        self._hub = hub
        self._member = member

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("fleet_") or attr in self._HUB_CALLS:
            return getattr(self._hub, attr)
        return getattr(self._member, attr)


def _sorted(objects: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Objects sorted by namespace and name, as the host hands them."""
    return sorted(objects, key=lambda o: (ObjectKey.of(o).namespace or "", ObjectKey.of(o).name))


def _same_kind(a: Gvk, b: Gvk) -> bool:
    return (a.group, a.kind) == (b.group, b.kind)


# The controller class a harness runs (covariant: a `Harness[Greetings]` is a
# `Harness[CompositeController]`, which picks the `finalize` overload).
C = TypeVar("C", bound=Controller | CompositeController, covariant=True)


class Harness(Generic[C]):
    """A controller described and ready to call against a `FakeHost`, the way the component's
    exports run it. `manifest` is what it describes to the host, `manifest.rules` what its
    `access` export answers, `manifest.metadata_only` what its `views` export answers (the host
    then hands those kinds as metadata: `FakeHost.handed`), `manifest.composition` what its
    `composite` export's `describe-composition` answers (None for a `Controller`),
    `manifest.scope` what its `clusters` export answers (the fake host reaches members by it).

    A `Controller` runs with `reconcile`, `finalize`, `released` and `map_related`; a
    `CompositeController` with `sync`, `finalize` and `customize`, during which the fake host
    refuses client and Event calls with `Forbidden`, as the host does. A method of the other
    kind raises `RuntimeError` (the host never calls it; in the component, a trap)."""

    def __init__(self, controller_cls: type[C], settings: Mapping[str, Any] | None = None, objects: Iterable[Mapping[str, Any]] = ()) -> None:
        self.host = FakeHost(objects)
        self.runner = Runner(cast("type[Controller | CompositeController]", controller_cls), self.host)
        self.manifest: ManifestSpec = self.runner.describe(json.dumps(dict(settings or {})))
        self.host.metadata_only = list(self.manifest.metadata_only)
        self.host.reads_fields = dict(self.manifest.reads_fields)
        self.host.scope = _checked(self.runner.scope())

    @property
    def controller(self) -> C:
        assert self.runner.controller is not None
        return self.runner.controller  # type: ignore[return-value]

    @property
    def composition(self) -> Composition | None:
        """What the `composite.describe-composition` export answers."""
        return self.runner.composition()

    def _object(self, obj_or_key: Mapping[str, Any] | ObjectKey, cluster: str | None = None) -> Mapping[str, Any]:
        if isinstance(obj_or_key, ObjectKey):
            assert self.manifest.primary is not None
            store = self.host if cluster is None else self.host.member(cluster)
            stored = store.get(self.manifest.primary, obj_or_key.namespace, obj_or_key.name)
            if stored is None:
                where = "" if cluster is None else f" of member cluster {cluster!r}"
                raise LookupError(f"no {self.manifest.primary} {obj_or_key} in the fake host{where}")
            return stored
        return obj_or_key

    def _primary(self, obj_or_key: Mapping[str, Any] | ObjectKey, cluster: str | None = None) -> tuple[ObjectKey, str]:
        obj = self._object(obj_or_key, cluster)
        return (obj_or_key if isinstance(obj_or_key, ObjectKey) else ObjectKey.of(obj)), json.dumps(self.host.answered(Gvk.of(obj), obj))

    @contextmanager
    def _serving(self, cluster: str | None) -> Iterator[None]:
        """Runs a call for an object of `cluster` (None: the host's own), as the host does for a
        plugin that serves it: `cache`, `client` and `events` act in the member, `ctx.cluster()`
        names it. A cluster the plugin does not serve is a `ValueError` (the host never calls
        it for one)."""
        if cluster is None:
            if not self.runner.scope().serve_local:
                raise ValueError("the plugin does not serve the host's own cluster (serve_local(False)): pass cluster=")
            yield
            return
        member = self.host.member(cluster)
        if not self.host.serves(cluster):
            raise ValueError(f"the plugin does not serve member cluster {cluster!r} (its manifest's serve_members)")
        before = (self.runner.host, self.host.current)
        self.runner.host, self.host.current = cast("Host", _Served(self.host, member)), cluster
        try:
            yield
        finally:
            self.runner.host, self.host.current = before

    def reconcile(self, obj_or_key: Mapping[str, Any] | ObjectKey, retries: int = 0, *, cluster: str | None = None) -> Action:
        """Runs `reconcile` on an object (or the stored primary of a key). Raises
        `KubewasmError` as the component would return it. With `cluster`, the object lives in
        that member cluster (and a key names a primary of its store): a plugin that serves it
        reads, writes and records Events there, and `ctx.cluster()` names it."""
        with self._serving(cluster):
            return self.runner.call("reconcile", *self._primary(obj_or_key, cluster), retries)

    @overload
    def finalize(self: Harness[Controller], obj_or_key: Mapping[str, Any] | ObjectKey, retries: int = 0, *, cluster: str | None = None) -> Action: ...

    @overload
    def finalize(
        self: Harness[CompositeController],
        obj_or_key: Mapping[str, Any] | ObjectKey,
        *,
        children: Iterable[Mapping[str, Any]] | None = None,
        related: Iterable[Mapping[str, Any]] | None = None,
    ) -> SyncResponse: ...

    def finalize(
        self,
        obj_or_key: Mapping[str, Any] | ObjectKey,
        retries: int = 0,
        *,
        children: Iterable[Mapping[str, Any]] | None = None,
        related: Iterable[Mapping[str, Any]] | None = None,
        cluster: str | None = None,
    ) -> Action | SyncResponse:
        """A `Controller`'s `finalize` (an `Action`; `cluster` as for `reconcile`), or a
        `CompositeController`'s (a `SyncResponse`, with `request.finalizing` set; `children`
        and `related` as for `sync`)."""
        if self.runner.declarative:
            return self._sync("finalize", obj_or_key, children, related)
        with self._serving(cluster):
            return self.runner.call("finalize", *self._primary(obj_or_key, cluster), retries)

    def released(self, obj_or_key: Mapping[str, Any] | ObjectKey, retries: int = 0, *, cluster: str | None = None) -> Action:
        """Runs `released`, as the host does once a primary stops matching the primary selector
        (`cluster` as for `reconcile`)."""
        with self._serving(cluster):
            return self.runner.call("released", *self._primary(obj_or_key, cluster), retries)

    def map_related(self, resource: Gvk, obj: Mapping[str, Any]) -> list[ObjectKey]:
        """Runs `map_related` on `obj`, handed as the host hands it (`FakeHost.handed`)."""
        return self.runner.map_related(resource, json.dumps(self.host.handed(resource, obj)))

    # --- a declarative controller ---

    def customize(self, parent: Mapping[str, Any] | ObjectKey) -> list[RelatedRule]:
        """Runs a `CompositeController`'s `customize` on a parent (or the stored primary of a
        key), refusing client and Event calls. Raises `KubewasmError` as the component would
        return it."""
        text = json.dumps(self._object(parent))
        with self.host.only_cache():
            return self.runner.customize(text)

    def sync(
        self,
        parent: Mapping[str, Any] | ObjectKey,
        children: Iterable[Mapping[str, Any]] | None = None,
        related: Iterable[Mapping[str, Any]] | None = None,
    ) -> SyncResponse:
        """Runs a `CompositeController`'s `sync` on a parent (or the stored primary of a key),
        refusing client and Event calls, and returns its answer as the host receives it (status
        and children through their JSON text, `resync_after` in seconds of whole milliseconds).
        Raises `KubewasmError` as the component would return it.

        `children`: the parent's children, grouped by kind as the host hands them (an entry per
        child kind, in the manifest's order, sorted by namespace and name); one of another
        kind is a `ValueError`. When None, the store's objects of the child kinds that the
        parent controls (a controller owner reference with its uid), in its namespace (every
        namespace for a cluster-scoped parent); nothing is adopted.

        `related`: the objects `customize` named, an entry per kind. When None, `customize` is
        called (as the host does for a generation it has not asked about) and each rule selects
        from the store, as the host selects from its cache.

        The harness does not check the answer as the host does (declared kinds, names,
        duplicates, namespaces, selector labels): `kubewasm test` runs the built component
        against the host's own checks."""
        return self._sync("sync", parent, children, related)

    def _sync(
        self,
        method: SyncMethod,
        parent: Mapping[str, Any] | ObjectKey,
        children: Iterable[Mapping[str, Any]] | None,
        related: Iterable[Mapping[str, Any]] | None,
    ) -> SyncResponse:
        obj = self._object(parent)
        text = json.dumps(obj)
        kinds = self.manifest.child_kinds()
        if children is None:
            namespace = ObjectKey.of(obj).namespace
            owned = [o for o in self.host.objects.values() if (namespace is None or ObjectKey.of(o).namespace == namespace) and is_controlled_by(o, obj)]
            grouped = [(k, _sorted(o for o in owned if _same_kind(Gvk.of(o), k))) for k in kinds]
        else:
            given = list(children)
            for child in given:
                if not any(_same_kind(Gvk.of(child), k) for k in kinds):
                    names = ", ".join(str(k) for k in kinds) or "none"
                    raise ValueError(f"{Gvk.of(child)} {ObjectKey.of(child)} is not of a child kind of the manifest ({names})")
            grouped = [(k, _sorted(c for c in given if _same_kind(Gvk.of(c), k))) for k in kinds]
        if related is None:
            selected = self._related(self.customize(obj))
        else:
            by_kind: dict[tuple[str, str], tuple[Gvk, list[Mapping[str, Any]]]] = {}
            for r in related:
                gvk = Gvk.of(r)
                by_kind.setdefault((gvk.group, gvk.kind), (gvk, []))[1].append(r)
            selected = [(gvk, _sorted(items)) for gvk, items in by_kind.values()]

        def texts(entries: list[tuple[Gvk, list[Mapping[str, Any]]]]) -> list[tuple[Gvk, list[str]]]:
            return [(k, [json.dumps(self.host.handed(k, o)) for o in items]) for k, items in entries]

        with self.host.only_cache():
            encoded = self.runner.sync(method, text, texts(grouped), texts(selected), method == "finalize")
        return decode(encoded)

    def _related(self, rules: list[RelatedRule]) -> list[tuple[Gvk, list[Mapping[str, Any]]]]:
        """What the rules select from the store, an entry per rule, as the host selects it."""
        out = []
        for i, rule in enumerate(rules):
            if rule.names and rule.label_selector is not None:
                raise Invalid(f"customize rule {i}: names and label-selector together: a rule selects by one")
            try:
                requirements = parse_selector(rule.label_selector) if rule.label_selector is not None else []
            except Invalid as e:
                raise Invalid(f"customize rule {i}: {e.message}") from None
            found = [
                o
                for o in self.host.objects.values()
                if _same_kind(Gvk.of(o), rule.resource)
                and (rule.namespace is None or ObjectKey.of(o).namespace == rule.namespace)
                and (not rule.names or ObjectKey.of(o).name in rule.names)
                and all(_satisfies((o.get("metadata") or {}).get("labels") or {}, r) for r in requirements)
            ]
            out.append((rule.resource, _sorted(found)))
        return out

    # --- webhooks ---

    def admit(
        self,
        hook: str,
        operation: Operation | str,
        object: Mapping[str, Any] | None = None,
        old_object: Mapping[str, Any] | None = None,
        *,
        user: UserInfo | None = None,
        dry_run: bool = False,
        subresource: str | None = None,
    ) -> Admission:
        """Calls the manifest's hook `hook` as the host does for an AdmissionReview — `validate`
        or `mutate` as declared, with client and Event calls refused — and returns its answer
        (`object` on create and update, `old_object` on update and delete). A hook or an
        operation the manifest does not declare is a `ValueError` (the host never sends it);
        any exception but `Denied` propagates (in the component, a fault)."""
        declared = next((h for h in self.manifest.webhooks if h.name == hook), None)
        if declared is None:
            raise ValueError(f"the manifest declares no hook {hook!r}")
        operation = Operation.parse(operation)
        if operation not in declared.operations:
            raise ValueError(f"hook {hook!r} does not admit {operation.upper()}")
        subject = object if object is not None else old_object
        if subject is None:
            raise ValueError("an admission request carries an object or an old object")
        key = ObjectKey.of(subject)
        review = Review(
            hook=hook,
            operation=operation,
            kind=Gvk.of(subject),
            name=key.name,
            namespace=key.namespace,
            # Copies, as the host hands them.
            object=None if object is None else json.loads(json.dumps(object)),
            old_object=None if old_object is None else json.loads(json.dumps(old_object)),
            uid="review-uid",
            subresource=subresource,
            user=user or UserInfo(),
            dry_run=dry_run,
        )
        try:
            with self.host.only_cache(HOOKING):
                if declared.mutating:
                    mutated, warnings = self.runner.mutate(review)
                    return Admission(True, warnings, object=None if mutated is None else json.loads(mutated))
                return Admission(True, self.runner.validate(review))
        except Denied as e:
            return Admission(False, e.warnings, e.code, e.message)

    def convert(self, objects: Iterable[Mapping[str, Any]], desired_api_version: str) -> list[Object]:
        """Calls the conversion hook as the host does, with client and Event calls refused: the
        objects (of kinds the manifest `converts`) in `desired_api_version`. Raises `Denied` for
        the plugin's refusal, and `ValueError` for an answer the host refuses as a fault (another
        length; an object whose apiVersion is not the desired one, or whose kind, name,
        namespace or uid changed)."""
        given = list(objects)
        for obj in given:
            if not any(_same_kind(Gvk.of(obj), g) for g in self.manifest.conversions):
                raise ValueError(f"the manifest converts no {Gvk.of(obj)}")
        with self.host.only_cache(HOOKING):
            answers = self.runner.convert([json.dumps(o) for o in given], desired_api_version)
        if len(answers) != len(given):
            raise ValueError(f"the host refuses {len(answers)} objects converted from {len(given)}")
        converted = [json.loads(a) for a in answers]

        def identity(obj: Mapping[str, Any]) -> tuple[Any, ...]:
            meta = obj.get("metadata") or {}
            return obj.get("kind"), meta.get("name"), meta.get("namespace"), meta.get("uid")

        for was, now in zip(given, converted, strict=True):
            if now.get("apiVersion") != desired_api_version or identity(now) != identity(was):
                raise ValueError(
                    f"the host refuses {Gvk.of(was)} {ObjectKey.of(was)} converted to {Gvk.of(now)} {ObjectKey.of(now)}: "
                    f"apiVersion {desired_api_version} wanted, kind, name, namespace and uid kept"
                )
        return converted
