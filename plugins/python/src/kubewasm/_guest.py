"""The component glue: the WIT imports as a `Host`, and the `Plugin`, `Reconciler`, `Access`,
`Release`, `Views`, `Composite`, `Clusters`, `Projections` and `Webhooks` export classes
componentize-py looks for.
Imported only inside a component (by the module `kubewasm-py build` generates), because
`wit_world` and `componentize_py_types` exist only there.

One set of exports serves both kinds of plugin (the world is `controller`): for a `Controller`,
`Composite.describe_composition` answers None and the host never calls the rest of `Composite`;
for a `CompositeController`, it answers the composition and the host never calls `Reconciler`
nor `Release`. A function the host never calls traps if it is called anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar

from componentize_py_types import Err
from wit_world.exports import access as wa
from wit_world.exports import clusters as wcl
from wit_world.exports import composite as wc
from wit_world.exports import plugin as wp
from wit_world.exports import projections as wpj
from wit_world.exports import reconciler as wr
from wit_world.exports import webhooks as wh
from wit_world.imports import cache, client, events, fleet, log
from wit_world.imports import types as wt

from .composite import RelatedRule
from .context import Cluster
from .core import ChildSelector, ErrorCode, EventType, Gvk, LogLevel, ObjectKey, PatchType, UpdateStrategy
from .errors import KubewasmError
from .manifest import ClusterScope, Composition, ManifestSpec, Members, Rule
from .runtime import Method, Refused, Runner, SyncMethod, find_controller, parsed_object
from .webhook import AdmissionHook, Denied, FailurePolicy, Operation, Review, SideEffects, UserInfo

_CODES = {
    wt.ErrorCode.NOT_FOUND: ErrorCode.NOT_FOUND,
    wt.ErrorCode.ALREADY_EXISTS: ErrorCode.ALREADY_EXISTS,
    wt.ErrorCode.CONFLICT: ErrorCode.CONFLICT,
    wt.ErrorCode.FORBIDDEN: ErrorCode.FORBIDDEN,
    wt.ErrorCode.INVALID: ErrorCode.INVALID,
    wt.ErrorCode.UNAVAILABLE: ErrorCode.UNAVAILABLE,
    wt.ErrorCode.OTHER: ErrorCode.OTHER,
}
_WIT_CODES = {v: k for k, v in _CODES.items()}
_PATCH = {PatchType.MERGE: client.PatchType.MERGE, PatchType.JSON: client.PatchType.JSON, PatchType.STRATEGIC: client.PatchType.STRATEGIC}
_EVENT = {EventType.NORMAL: events.EventType.NORMAL, EventType.WARNING: events.EventType.WARNING}
_LEVEL = {
    LogLevel.TRACE: log.Level.TRACE,
    LogLevel.DEBUG: log.Level.DEBUG,
    LogLevel.INFO: log.Level.INFO,
    LogLevel.WARN: log.Level.WARN,
    LogLevel.ERROR: log.Level.ERROR,
}
_VERB = {v.name: getattr(wp.Verb, v.name) for v in wp.Verb}
_STRATEGY = {s: getattr(wc.UpdateStrategy, s.name) for s in UpdateStrategy}
_SELECTOR = {s: getattr(wc.ChildSelector, s.name) for s in ChildSelector}
_WIT_OPERATION = {o: getattr(wh.Operation, o.name) for o in Operation}
_OPERATION = {v: k for k, v in _WIT_OPERATION.items()}


def _gvk(g: Gvk) -> wt.Gvk:
    return wt.Gvk(g.group, g.version, g.kind)


def _from_gvk(g: wt.Gvk) -> Gvk:
    return Gvk(g.group, g.version, g.kind)


T = TypeVar("T")


def _call(fn: Callable[..., T], *args: Any) -> T:
    """Calls an import, turning its `Err(error)` into the matching `KubewasmError`."""
    try:
        return fn(*args)
    except Err as e:
        err = e.value
        raise KubewasmError.from_code(_CODES.get(err.code, ErrorCode.OTHER), err.message) from None


class WasmHost:
    """The WIT imports as a `kubewasm.context.Host`."""

    def cache_get(self, resource: Gvk, namespace: str | None, name: str) -> str | None:
        return _call(cache.get, _gvk(resource), namespace, name)

    def cache_list(self, resource: Gvk, namespace: str | None, label_selector: str | None) -> list[str]:
        return _call(cache.list_objects, _gvk(resource), namespace, label_selector)

    def cache_list_controlled(self, resource: Gvk, namespace: str | None, owner: str) -> list[str]:
        return _call(cache.list_controlled, _gvk(resource), namespace, owner)

    def apply(self, obj: str, force: bool) -> str:
        return _call(client.apply, obj, force)

    def apply_status(self, obj: str, force: bool) -> str:
        return _call(client.apply_status, obj, force)

    def create(self, obj: str) -> str:
        return _call(client.create, obj)

    def update(self, obj: str) -> str:
        return _call(client.update, obj)

    def update_status(self, obj: str) -> str:
        return _call(client.update_status, obj)

    def patch(self, resource: Gvk, namespace: str | None, name: str, patch_type: PatchType, body: str) -> str:
        return _call(client.patch, _gvk(resource), namespace, name, _PATCH[patch_type], body)

    def delete(self, resource: Gvk, namespace: str | None, name: str) -> None:
        _call(client.delete, _gvk(resource), namespace, name)

    def publish_event(self, regarding: tuple[Gvk, str | None, str], event_type: EventType, reason: str, action: str, note: str) -> None:
        resource, namespace, name = regarding
        ref = wt.ObjectRef(_gvk(resource), namespace, name)
        _call(events.publish, events.Event(ref, _EVENT[event_type], reason, action, note))

    def log(self, level: LogLevel, message: str, fields: Sequence[tuple[str, str]]) -> None:
        log.emit(_LEVEL[level], message, [log.Field(k, v) for k, v in fields])

    def current_cluster(self) -> str | None:
        return fleet.current()

    def clusters(self) -> list[Cluster]:
        return [Cluster(c.name, dict(c.labels)) for c in fleet.clusters()]

    def fleet_get(self, cluster: str | None, resource: Gvk, namespace: str | None, name: str) -> str | None:
        return _call(fleet.get, cluster, _gvk(resource), namespace, name)

    def fleet_list(self, cluster: str | None, resource: Gvk, namespace: str | None, label_selector: str | None) -> list[str]:
        return _call(fleet.list_objects, cluster, _gvk(resource), namespace, label_selector)

    def fleet_apply(self, cluster: str | None, obj: str, force: bool) -> str:
        return _call(fleet.apply, cluster, obj, force)

    def fleet_apply_status(self, cluster: str | None, obj: str, force: bool) -> str:
        return _call(fleet.apply_status, cluster, obj, force)

    def fleet_create(self, cluster: str | None, obj: str) -> str:
        return _call(fleet.create, cluster, obj)

    def fleet_update(self, cluster: str | None, obj: str) -> str:
        return _call(fleet.update, cluster, obj)

    def fleet_update_status(self, cluster: str | None, obj: str) -> str:
        return _call(fleet.update_status, cluster, obj)

    def fleet_patch(self, cluster: str | None, resource: Gvk, namespace: str | None, name: str, patch_type: PatchType, body: str) -> str:
        return _call(fleet.patch, cluster, _gvk(resource), namespace, name, _PATCH[patch_type], body)

    def fleet_delete(self, cluster: str | None, resource: Gvk, namespace: str | None, name: str) -> None:
        _call(fleet.delete, cluster, _gvk(resource), namespace, name)


def _manifest(spec: ManifestSpec) -> wp.Manifest:
    assert spec.primary is not None
    return wp.Manifest(
        name=spec.name,
        version=spec.version,
        primary=_gvk(spec.primary),
        primary_selector=spec.primary_selector,
        owns=[_gvk(g) for g in spec.owns],
        watches=[
            wp.Watch(
                resource=_gvk(w.resource),
                mapping=(
                    wp.Mapping_Label(w.mapping.label_key or "")
                    if w.mapping.kind == "label"
                    else wp.Mapping_MapRelated()
                    if w.mapping.kind == "map-related"
                    else wp.Mapping_OwnerReferences()
                ),
                label_selector=w.label_selector,
            )
            for w in spec.watches
        ],
        finalizer=spec.finalizer,
        resync_seconds=spec.resync_seconds,
        max_concurrency=spec.max_concurrency,
        limits=wp.Limits(deadline_ms=spec.limits.deadline_ms, memory_bytes=spec.limits.memory_bytes),
        permissions=[
            wp.Permission(
                resource=_gvk(p.resource),
                subresource=p.subresource,
                verbs=[_VERB[v.name] for v in p.verbs],
                namespaces=list(p.namespaces),
            )
            for p in spec.permissions
        ],
    )


def _hook(h: AdmissionHook) -> wh.AdmissionHook:
    return wh.AdmissionHook(
        name=h.name,
        mutating=h.mutating,
        kinds=[_gvk(g) for g in h.kinds],
        operations=[_WIT_OPERATION[o] for o in h.operations],
        failure_policy=getattr(wh.FailurePolicy, FailurePolicy.parse(h.failure_policy).name),
        timeout_seconds=h.timeout_seconds,
        side_effects=getattr(wh.SideEffects, SideEffects.parse(h.side_effects).name),
        match_conditions=[wh.MatchCondition(c.name, c.expression) for c in h.match_conditions],
    )


def _rule(r: Rule) -> wa.Rule:
    return wa.Rule(
        resource=_gvk(r.resource),
        subresource=r.subresource,
        verbs=list(r.verbs),
        namespaces=list(r.namespaces),
        resource_names=list(r.resource_names),
    )


def _composition(c: Composition) -> wc.Composition:
    return wc.Composition(
        children=[wc.ChildRule(resource=_gvk(r.resource), update_strategy=_STRATEGY[UpdateStrategy.parse(r.update_strategy)]) for r in c.children],
        selector=_SELECTOR[ChildSelector.parse(c.selector)],
    )


def _members(m: Members) -> wcl.Members:
    if m.kind == "all":
        return wcl.Members_All()
    if m.kind == "matching":
        return wcl.Members_Matching(m.selector or "")
    return wcl.Members_None_()


def _scope(s: ClusterScope) -> wcl.ClusterScope:
    return wcl.ClusterScope(serve_local=s.serve_local, serve=_members(s.serve), reach=_members(s.reach))


def _related_rule(r: RelatedRule) -> wc.RelatedRule:
    return wc.RelatedRule(resource=_gvk(r.resource), namespace=r.namespace, names=list(r.names), label_selector=r.label_selector or None)


def _groups(entries: list[wc.Objects]) -> list[tuple[Gvk, list[str]]]:
    return [(_from_gvk(e.resource), e.items) for e in entries]


def _action(action: Any) -> wt.Action:
    if action.requeue_after_ms is None:
        return wt.Action_Done()
    return wt.Action_RequeueAfter(int(action.requeue_after_ms))


def _wit_error(e: KubewasmError) -> Err[wt.Error]:
    return Err(wt.Error(_WIT_CODES[e.code], e.message))


def _key(k: wt.ObjectKey) -> ObjectKey:
    return ObjectKey(k.namespace, k.name)


def exports(app: ModuleType) -> tuple[type, ...]:
    """The `Plugin`, `Reconciler`, `Access`, `Release`, `Views`, `Composite`, `Clusters`,
    `Projections` and `Webhooks` classes for the controller (a `Controller` or a
    `CompositeController`) the author's module defines."""
    return exports_for(Runner(find_controller(app), WasmHost()))


def exports_for(runner: Runner) -> tuple[type, ...]:
    """The export classes over one runner (tests give it a fake host)."""

    def call(method: Method, request: wr.Request) -> wt.Action:
        try:
            return _action(runner.call(method, _key(request.key), request.object, request.retries))
        except KubewasmError as e:
            raise _wit_error(e) from None

    def answer(method: SyncMethod, request: wc.SyncRequest) -> wc.SyncResponse:
        try:
            encoded = runner.sync(method, request.parent, _groups(request.children), _groups(request.related), request.finalizing)
        except KubewasmError as e:
            raise _wit_error(e) from None
        return wc.SyncResponse(
            status=encoded.status,
            children=encoded.children,
            resync_after=encoded.resync_after_ms,
            finalized=encoded.finalized,
        )

    class Plugin:
        def describe(self, settings: str) -> wp.Manifest:
            try:
                return _manifest(runner.describe(settings))
            except Refused as e:
                raise Err(str(e)) from None

    class Reconciler:
        def reconcile(self, request: wr.Request) -> wt.Action:
            return call("reconcile", request)

        def finalize(self, request: wr.Request) -> wt.Action:
            return call("finalize", request)

        def map_related(self, resource: wt.Gvk, object: str) -> list[wt.ObjectKey]:
            keys = runner.map_related(Gvk(resource.group, resource.version, resource.kind), object)
            return [wt.ObjectKey(k.namespace, k.name) for k in keys]

    class Access:
        def rules(self) -> list[wa.Rule]:
            return [_rule(r) for r in runner.rules()]

    class Release:
        def released(self, request: wr.Request) -> wt.Action:
            return call("released", request)

    class Views:
        def metadata_only(self) -> list[wt.Gvk]:
            return [_gvk(g) for g in runner.metadata_only()]

    class Composite:
        def describe_composition(self) -> wc.Composition | None:
            composition = runner.composition()
            return None if composition is None else _composition(composition)

        def customize(self, parent: str) -> list[wc.RelatedRule]:
            try:
                rules = runner.customize(parent)
            except KubewasmError as e:
                raise _wit_error(e) from None
            return [_related_rule(r) for r in rules]

        def sync(self, request: wc.SyncRequest) -> wc.SyncResponse:
            return answer("sync", request)

        def finalize(self, request: wc.SyncRequest) -> wc.SyncResponse:
            return answer("finalize", request)

    class Clusters:
        def scope(self) -> wcl.ClusterScope:
            return _scope(runner.scope())

    class Projections:
        def fields(self) -> list[wpj.Projection]:
            return [wpj.Projection(_gvk(g), [f.split(".") for f in fields]) for g, fields in runner.reads_fields().items()]

    def review(request: wh.AdmissionRequest) -> Review:
        return Review(
            hook=request.hook,
            operation=_OPERATION[request.operation],
            kind=_from_gvk(request.kind),
            name=request.name,
            namespace=request.namespace,
            object=parsed_object(request.object, "the object"),
            old_object=parsed_object(request.old_object, "the old object"),
            uid=request.uid,
            subresource=request.subresource,
            user=UserInfo(request.user.username, request.user.uid, list(request.user.groups)),
            dry_run=request.dry_run,
        )

    def denial(e: Denied) -> Err[wh.Denial]:
        return Err(wh.Denial(e.code, e.message, e.warnings))

    class Webhooks:
        def declare(self) -> wh.Declaration:
            admission, conversion = runner.hooks()
            return wh.Declaration([_hook(h) for h in admission], [wh.ConversionHook(_gvk(g)) for g in conversion])

        def validate(self, request: wh.AdmissionRequest) -> list[str]:
            try:
                return runner.validate(review(request))
            except Denied as e:
                raise denial(e) from None

        def mutate(self, request: wh.AdmissionRequest) -> wh.Mutation:
            try:
                obj, warnings = runner.mutate(review(request))
            except Denied as e:
                raise denial(e) from None
            return wh.Mutation(obj, warnings)

        def convert(self, objects: list[str], desired_api_version: str) -> list[str]:
            try:
                return runner.convert(objects, desired_api_version)
            except Denied as e:
                raise Err(e.message) from None

    return Plugin, Reconciler, Access, Release, Views, Composite, Clusters, Projections, Webhooks
