"""The manifest builder: what a controller reconciles and what it needs.

    Manifest("sample-controller", "0.1.0")
        .primary(FOO)
        .owns(kinds.DEPLOYMENT)
        .permission(kinds.DEPLOYMENT, ["create", "patch"])
        .status_permission(FOO, ["patch"])
        .max_concurrency(2)

A hub that writes into member clusters (contract 0.1.4) says which it reaches:

    Manifest("fleet-propagation", "0.1.0").primary(kinds.CONFIG_MAP).reach_members(Members.matching("env=prod"))

Each builder method returns the manifest, so calls chain. What was built is in `.spec`; what
the plugin describes to the host is `.for_host()`.

Everything declared is what the plugin's identity needs: the host refuses to start a plugin whose
ServiceAccount RBAC does not grant it, and `kubewasm rbac` prints Roles that do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import ClassVar, Literal, TypeVar

from .core import ChildSelector, Gvk, UpdateStrategy, Verb
from .kinds import CLUSTER_ROLE
from .webhook import AdmissionHook, Webhook

# The verbs a rule may name: RBAC's, without "*".
RBAC_VERBS = (*(v.value for v in Verb), "deletecollection", "bind", "escalate", "impersonate", "approve", "sign", "use")


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


@dataclass(frozen=True)
class Members:
    """A choice of member clusters (contract 0.1.4; the WIT `clusters.members` variant): the
    clusters a host engages besides its own. `Members.NONE`, `Members.ALL` (every engaged
    member) or `Members.matching("env=prod,region in (eu,us)")` (the members whose labels match
    a Kubernetes label selector, at most 4096 bytes; the host refuses the plugin for an invalid
    one, naming the field)."""

    kind: Literal["none", "all", "matching"]
    selector: str | None = None

    NONE: ClassVar[Members]
    ALL: ClassVar[Members]

    @classmethod
    def matching(cls, selector: str) -> Members:
        """The engaged members whose labels match this label selector."""
        if not isinstance(selector, str):
            raise TypeError(f"a member selector is a label selector string, not {type(selector).__name__}")
        return cls("matching", selector)

    def __repr__(self) -> str:
        return f"Members.matching({self.selector!r})" if self.kind == "matching" else f"Members.{self.kind.upper()}"


Members.NONE = Members("none")
Members.ALL = Members("all")


@dataclass
class ClusterScope:
    """Which clusters a plugin serves and reaches: what the `clusters` export answers. The
    default is what a plugin built before contract 0.1.4 gets: the host's own cluster only."""

    serve_local: bool = True
    """Whether it reconciles the primaries of the host's own cluster."""
    serve: Members = Members.NONE
    """The members whose primaries it reconciles too, each where it lives."""
    reach: Members = Members.NONE
    """The members it only reads and writes in, through `Context.in_cluster`."""


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
class Rule:
    """A grant the WIT `permission` record cannot hold (any RBAC verb, object names): what the
    `access` export returns."""

    resource: Gvk
    verbs: list[str]
    subresource: str | None = None
    namespaces: list[str] = field(default_factory=list)
    resource_names: list[str] = field(default_factory=list)


@dataclass
class Limits:
    """`None` takes the host's default (5000 ms; 64 MiB)."""

    deadline_ms: int | None = None
    memory_bytes: int | None = None


@dataclass
class ChildRule:
    """One kind of child of a declarative controller, and what the host does with an existing
    child of the kind whose desired state changed."""

    resource: Gvk
    update_strategy: UpdateStrategy = UpdateStrategy.ON_DELETE


@dataclass
class Composition:
    """How a declarative controller's parents (the primary) and children relate: what its
    `composite.describe-composition` export answers. An `owns` kind without a rule is a child
    kind with the strategy `ON_DELETE`."""

    children: list[ChildRule] = field(default_factory=list)
    selector: ChildSelector = ChildSelector.GENERATED


@dataclass
class ManifestSpec:
    """The plain data of a manifest, field for field the WIT `manifest` record, plus `rules`
    (the `access` export's answer), `metadata_only` (the `views` export's), `reads_fields`
    (the `projections` export's: dotted paths per kind), `composition`
    (the `composite.describe-composition` export's, for a `CompositeController`; None until
    `child()` or `child_selector()` is called, and always None for a `Controller`), `scope`
    (the `clusters` export's), and `webhooks` and `conversions` (the `webhooks` export's
    `declare`)."""

    name: str
    version: str
    primary: Gvk | None = None
    primary_selector: str | None = None
    owns: list[Gvk] = field(default_factory=list)
    watches: list[Watch] = field(default_factory=list)
    metadata_only: list[Gvk] = field(default_factory=list)
    reads_fields: dict[Gvk, list[str]] = field(default_factory=dict)
    finalizer: str | None = None
    resync_seconds: int | None = None
    max_concurrency: int = 1
    limits: Limits = field(default_factory=Limits)
    permissions: list[Permission] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    composition: Composition | None = None
    scope: ClusterScope = field(default_factory=ClusterScope)
    webhooks: list[AdmissionHook] = field(default_factory=list)
    conversions: list[Gvk] = field(default_factory=list)

    def child_kinds(self) -> list[Gvk]:
        """A declarative controller's child kinds, in the order the host hands them
        (`SyncRequest.children`): those of `composition.children`, then the other `owns` kinds."""
        ruled = [r.resource for r in self.composition.children] if self.composition is not None else []
        return [*ruled, *(g for g in self.owns if g not in ruled)]


T = TypeVar("T")


def _each(verbs: Iterable[Verb | str], parse: Callable[[Verb | str], T]) -> list[T]:
    """Parses a list of verbs, or one."""
    if isinstance(verbs, (str, Verb)):
        verbs = [verbs]
    return [parse(v) for v in verbs]


def _rbac_verb(verb: Verb | str) -> str:
    name = str(verb).lower()
    if name not in RBAC_VERBS:
        raise ValueError(f"{verb!r} is not an RBAC verb (one of: {', '.join(RBAC_VERBS)})")
    return name


def _members(members: Members) -> Members:
    if not isinstance(members, Members):
        raise TypeError(f"expected Members.NONE, Members.ALL or Members.matching(selector), not {members!r}")
    return members


def _grants(permissions: Iterable[Permission], resource: Gvk, verb: Verb) -> bool:
    """Whether a permission on the resource itself (any version) grants `verb`."""
    return any((p.resource.group, p.resource.kind) == (resource.group, resource.kind) and p.subresource is None and verb in p.verbs for p in permissions)


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

    def child(self, resource: Gvk, strategy: UpdateStrategy | str = UpdateStrategy.ON_DELETE) -> Manifest:
        """A child kind of a declarative controller (`CompositeController`): added to `owns`
        (once), with what the host does with an existing child whose desired state changed:
        `UpdateStrategy.ON_DELETE` (the default: nothing, a child that is gone is created
        again), `RECREATE` (delete, then create) or `IN_PLACE` (server-side apply over it).
        Declaring a kind again replaces its strategy."""
        strategy = UpdateStrategy.parse(strategy)
        if resource not in self.spec.owns:
            self.spec.owns.append(resource)
        composition = self._composition()
        for rule in composition.children:
            if rule.resource == resource:
                rule.update_strategy = strategy
                return self
        composition.children.append(ChildRule(resource, strategy))
        return self

    def child_selector(self, selector: ChildSelector | str) -> Manifest:
        """Which objects are a declarative controller's children: `ChildSelector.GENERATED`
        (the default: the host labels each child with its parent's uid) or
        `PARENT_SPEC_SELECTOR` (the parent's `spec.selector`; matching orphans are adopted)."""
        self._composition().selector = ChildSelector.parse(selector)
        return self

    def _composition(self) -> Composition:
        if self.spec.composition is None:
            self.spec.composition = Composition()
        return self.spec.composition

    def watches(self, resource: Gvk, mapping: Mapping | None = None, label_selector: str | None = None) -> Manifest:
        """React to events on another resource (by default through `map_related`)."""
        self.spec.watches.append(Watch(resource, mapping or Mapping.map_related(), label_selector))
        return self

    def metadata_only(self, resource: Gvk) -> Manifest:
        """Hands the plugin only `apiVersion`, `kind` and `metadata` of this kind's objects (cache
        reads and `map_related`), so the host may cache just their metadata. It must be an
        `owns` kind or the kind of a `watches` entry; writes are unaffected."""
        self.spec.metadata_only.append(resource)
        return self

    def reads_fields(self, resource: Gvk, *fields: str) -> Manifest:
        """Hands the plugin only these fields of this kind's objects (the primary kind, an
        `owns` kind or the kind of a `watches` entry; contract 0.1.5), each a dotted path from
        the object's top: `reads_fields(kinds.DEPLOYMENT, "status.availableReplicas")`. Every
        object of the kind the plugin is handed — the one it reconciles, cache reads,
        `map_related`'s, and the answers of its writes — carries `apiVersion`, `kind`,
        `metadata` and, of the rest, only these fields: the plugin does not parse what it never
        reads. A path through a list keeps the list; a field whose name holds a dot is named by
        its parent. `ctx.update` of the kind is then refused (the object lacks fields): apply
        or patch it."""
        self.spec.reads_fields.setdefault(resource, []).extend(fields)
        return self

    def serve_members(self, members: Members) -> Manifest:
        """Also reconciles the primaries of these member clusters, each where it lives: the
        reads, writes and Events of a call act in its object's cluster (`Context.cluster()`
        names it). The plugin's identity needs the same RBAC in each."""
        self.spec.scope.serve = _members(members)
        return self

    def serve_local(self, serve: bool) -> Manifest:
        """Whether it reconciles the primaries of the host's own cluster (yes, unless said
        here)."""
        self.spec.scope.serve_local = bool(serve)
        return self

    def reach_members(self, members: Members) -> Manifest:
        """Reads and writes in these member clusters through `Context.in_cluster`, reconciling
        nothing there: a hub writing into members. When one is engaged, every primary is
        reconciled once (so that the hub writes into the new member)."""
        self.spec.scope.reach = _members(members)
        return self

    def webhook(self, hook: Webhook) -> Manifest:
        """Serves an admission hook (contract 0.1.6), answered by the controller's `validate`
        or `mutate`: `.webhook(Webhook.validating("validate-cronjob").kind(CRONJOB))`."""
        self.spec.webhooks.append(hook.hook)
        return self

    def converts(self, resource: Gvk) -> Manifest:
        """Serves the conversion webhook of this custom resource (its CRD's versions; the
        version given is ignored), answered by the controller's `convert` (contract 0.1.6)."""
        self.spec.conversions.append(resource)
        return self

    def finalizer(self, name: str) -> Manifest:
        """The finalizer the host adds to primaries so that `finalize` runs before they go. The
        host adds and removes it with a patch made as the plugin: the manifest grants `patch` on
        the primary for it (`for_host` adds the grant when no permission has it)."""
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
        self.spec.permissions.append(Permission(resource, _each(verbs, Verb.parse), subresource, list(namespaces)))
        return self

    def grant_named(self, resource: Gvk, verbs: Iterable[Verb | str], namespaces: Iterable[str] = (), names: Iterable[str] = ()) -> Manifest:
        """Grants `verbs` on the named objects of a resource only (RBAC's `resourceNames`), in
        `namespaces` (empty for every namespace). Reads of such objects go to the API server."""
        return self.rule(resource, None, verbs, namespaces, names)

    def bind_cluster_role(self, name: str) -> Manifest:
        """Lets the plugin create RoleBindings and ClusterRoleBindings to the ClusterRole `name`
        without holding its permissions itself (RBAC's `bind` verb), e.g. `edit` for a
        namespace-onboarding controller."""
        return self.rule(CLUSTER_ROLE, None, ["bind"], (), [name])

    def rule(
        self,
        resource: Gvk,
        subresource: str | None,
        verbs: Iterable[Verb | str],
        namespaces: Iterable[str] = (),
        names: Iterable[str] = (),
    ) -> Manifest:
        """The most general grant: any subresource, any RBAC verb (get ... delete,
        deletecollection, bind, escalate, impersonate, approve, sign, use), namespaces and
        object names (empty for all)."""
        self.spec.rules.append(Rule(resource, _each(verbs, _rbac_verb), subresource, list(namespaces), list(names)))
        return self

    def owned(self) -> list[tuple[Gvk, bool]]:
        """The owned kinds, each with whether the manifest grants `delete` on it: what the
        default `Controller.released` passes to `Context.delete_controlled`."""
        return [(g, _grants(self.spec.permissions, g, Verb.DELETE)) for g in self.spec.owns]

    def for_host(self) -> ManifestSpec:
        """The manifest as the plugin describes itself to the host: the spec, plus a `patch`
        grant on the primary when a finalizer is set and no permission has one (the host
        refuses a finalizer without it). Done here rather than in `finalizer()`, so the order of
        the builder calls does not matter."""
        spec = self.spec
        if spec.finalizer is not None and spec.primary is not None and not _grants(spec.permissions, spec.primary, Verb.PATCH):
            spec = replace(spec, permissions=[*spec.permissions, Permission(spec.primary, [Verb.PATCH])])
        return spec

    def __repr__(self) -> str:
        return f"Manifest({self.spec!r})"
