"""The component glue (`kubewasm._guest`) under plain CPython: its export classes over the WIT
types, with componentize-py's generated binding modules (`kubewasm-py bindings`, plain
dataclasses and stubs) standing in for the ones inside a component, and the fake host for the
imports."""

import json
import sys
import types

import pytest
from greetings import Greetings

from kubewasm import DONE, Cluster, Context, Controller, Gvk, Invalid, Manifest, Members, NotFound, RelatedRule, SyncResponse, Unavailable, kinds
from kubewasm import objects as o
from kubewasm.build import bindings
from kubewasm.runtime import Runner
from kubewasm.testing import FakeHost

NAMES = ["Plugin", "Reconciler", "Access", "Release", "Views", "Composite", "Clusters", "Projections", "Webhooks"]
FOO = Gvk("example.com", "v1", "Foo")


@pytest.fixture(scope="module")
def guest(tmp_path_factory):
    out = tmp_path_factory.mktemp("bindings")
    bindings(out)
    sys.path.insert(0, str(out))
    try:
        import kubewasm._guest as guest

        yield guest
    finally:
        sys.path.remove(str(out))
        for name in list(sys.modules):
            if name == "kubewasm._guest" or name.split(".")[0] in {"wit_world", "componentize_py_types"}:
                del sys.modules[name]


@pytest.fixture(scope="module")
def wit(guest):
    import componentize_py_types
    from wit_world.exports import composite, plugin
    from wit_world.imports import types as wt

    return types.SimpleNamespace(Err=componentize_py_types.Err, wc=composite, wp=plugin, wt=wt)


def described(guest, cls, settings="{}"):
    """The export instances over a fresh runner, after `describe`."""
    exports = dict(zip(NAMES, (c() for c in guest.exports_for(Runner(cls, FakeHost()))), strict=True))
    manifest = exports["Plugin"].describe(settings)
    return types.SimpleNamespace(manifest=manifest, **exports)


class Plain(Controller):
    def manifest(self):
        return Manifest("plain", "0.1.0").primary(FOO).owns(kinds.CONFIG_MAP)

    def reconcile(self, obj, ctx):
        return DONE


def test_exports_of_a_module(guest):
    app = types.ModuleType("app")
    app.controller = Greetings
    assert len(guest.exports(app)) == len(NAMES), "one class per export of the world, for both kinds"


def test_a_plain_controller_describes_no_composition_and_traps_in_composite(guest, wit):
    p = described(guest, Plain)
    assert p.Composite.describe_composition() is None
    request = wit.wc.SyncRequest("{}", [], [], False)
    with pytest.raises(RuntimeError, match="the host called sync of a plugin that reconciles itself"):
        p.Composite.sync(request)
    with pytest.raises(RuntimeError, match="the host called finalize of a plugin that reconciles itself"):
        p.Composite.finalize(request)
    with pytest.raises(RuntimeError, match="the host called customize"):
        p.Composite.customize("{}")
    key = wit.wt.ObjectKey("default", "a")
    assert isinstance(p.Reconciler.reconcile(guest.wr.Request(key, json.dumps(o.new_object(FOO, "a", "default")), 0)), wit.wt.Action_Done)


def test_the_projections_export_answers_the_fields_read_as_paths(guest, wit):
    class Narrow(Plain):
        def manifest(self):
            return super().manifest().reads_fields(FOO, "spec", "status.ready").reads_fields(kinds.CONFIG_MAP, "data.config.yaml")

    d = described(guest, Narrow)
    from wit_world.exports import projections as wpj

    assert d.Projections.fields() == [
        wpj.Projection(wit.wt.Gvk("example.com", "v1", "Foo"), [["spec"], ["status", "ready"]]),
        wpj.Projection(wit.wt.Gvk("", "v1", "ConfigMap"), [["data", "config", "yaml"]]),
    ]
    assert described(guest, Plain).Projections.fields() == [], "nothing declared: whole objects"


def test_a_plugin_without_hooks_declares_none(guest):
    from wit_world.exports import webhooks as wh

    assert described(guest, Plain).Webhooks.declare() == wh.Declaration([], [])


def test_the_webhooks_export_declares_and_answers_in_wit_types(guest, wit):
    from test_webhooks import CRONJOB_V1, CRONJOB_V2, CronJobHooks, cronjob
    from wit_world.exports import webhooks as wh

    d = described(guest, CronJobHooks)
    declared = d.Webhooks.declare()
    assert [h.name for h in declared.admission] == ["default-cronjob", "validate-cronjob"]
    assert declared.admission[1].operations == [wh.Operation.CREATE, wh.Operation.UPDATE, wh.Operation.DELETE]
    assert declared.admission[1].failure_policy == wh.FailurePolicy.FAIL and declared.admission[1].timeout_seconds == 5
    assert declared.conversion == [wh.ConversionHook(wit.wt.Gvk(CRONJOB_V1.group, "v1", "CronJob"))]

    def request(hook, operation, obj, old=None):
        kind = wit.wt.Gvk(CRONJOB_V1.group, "v1", "CronJob")
        user = wh.UserInfo("alice", "u-1", ["devs"])
        return wh.AdmissionRequest(hook, "uid", kind, None, "default", "a", operation, user, obj, old, False)

    assert d.Webhooks.validate(request("validate-cronjob", wh.Operation.CREATE, json.dumps(cronjob("a")))) == ["spec.startingDeadlineSeconds is unset"]
    with pytest.raises(wit.Err) as refused:
        d.Webhooks.validate(request("validate-cronjob", wh.Operation.CREATE, json.dumps(cronjob("a", reason="no"))))
    assert refused.value.value == wh.Denial(422, "no", ["refused"])
    with pytest.raises(wit.Err) as unparsed:
        d.Webhooks.validate(request("validate-cronjob", wh.Operation.CREATE, "{"))
    assert unparsed.value.value.code == 400
    mutation = d.Webhooks.mutate(request("default-cronjob", wh.Operation.CREATE, json.dumps(cronjob("a"))))
    assert json.loads(mutation.object)["spec"] == {"concurrencyPolicy": "Allow"} and mutation.warnings == ["concurrencyPolicy defaulted"]
    [v2] = d.Webhooks.convert([json.dumps(cronjob("a", schedule="@daily"))], CRONJOB_V2.api_version)
    assert json.loads(v2)["spec"]["schedule"] == {"cron": "@daily"}
    with pytest.raises(wit.Err, match="unknown version"):
        d.Webhooks.convert([json.dumps(cronjob("a", schedule="@daily"))], "x/v9")


def test_a_declarative_controller_describes_its_composition(guest, wit):
    class Rich(Greetings):
        def manifest(self):
            return (
                super()
                .manifest()
                .child(kinds.SECRET, "recreate")
                .child(kinds.DEPLOYMENT)
                .child_selector("parent-spec-selector")
                .metadata_only(kinds.SECRET)
                .grant_named(kinds.NODE, ["get"], names=["n"])
            )

    d = described(guest, Rich)
    cm, secret, deployment = (wit.wt.Gvk(g.group, g.version, g.kind) for g in (kinds.CONFIG_MAP, kinds.SECRET, kinds.DEPLOYMENT))
    assert d.manifest.primary == wit.wt.Gvk("example.com", "v1", "Greeting")
    assert d.manifest.owns == [cm, secret, deployment]
    assert d.Composite.describe_composition() == wit.wc.Composition(
        children=[
            wit.wc.ChildRule(cm, wit.wc.UpdateStrategy.IN_PLACE),
            wit.wc.ChildRule(secret, wit.wc.UpdateStrategy.RECREATE),
            wit.wc.ChildRule(deployment, wit.wc.UpdateStrategy.ON_DELETE),
        ],
        selector=wit.wc.ChildSelector.PARENT_SPEC_SELECTOR,
    )
    assert d.Views.metadata_only() == [secret], "views and access answer as usual"
    assert [r.resource_names for r in d.Access.rules()] == [["n"]]


def test_a_declarative_controller_traps_in_reconciler_and_release(guest, wit):
    d = described(guest, Greetings)
    request = guest.wr.Request(wit.wt.ObjectKey("default", "hi"), "{}", 0)
    with pytest.raises(RuntimeError, match="the host called reconcile of a declarative plugin"):
        d.Reconciler.reconcile(request)
    with pytest.raises(RuntimeError, match="the host called finalize of a declarative plugin"):
        d.Reconciler.finalize(request)
    with pytest.raises(RuntimeError, match="the host called released of a declarative plugin"):
        d.Release.released(request)
    with pytest.raises(RuntimeError, match="the host called map_related of a declarative plugin"):
        d.Reconciler.map_related(wit.wt.Gvk("", "v1", "Node"), "{}")


def greeting():
    return {"apiVersion": "example.com/v1", "kind": "Greeting", "metadata": {"name": "hi", "namespace": "default", "uid": "u"}, "spec": {"to": "you"}}


def test_sync_through_the_glue(guest, wit):
    d = described(guest, Greetings, '{"salutation": "Hey"}')
    existing = json.dumps(o.new_object(kinds.CONFIG_MAP, "hi-greeting", "default"))
    cm = wit.wt.Gvk("", "v1", "ConfigMap")
    answer = d.Composite.sync(wit.wc.SyncRequest(json.dumps(greeting()), [wit.wc.Objects(cm, [existing])], [], False))
    assert isinstance(answer, wit.wc.SyncResponse)
    assert json.loads(answer.status) == {"configMap": "hi-greeting", "ready": True}
    assert [json.loads(c) for c in answer.children] == [o.new_object(kinds.CONFIG_MAP, "hi-greeting", data={"text": "Hey, you!"})]
    assert (answer.resync_after, answer.finalized) == (None, False)
    done = d.Composite.finalize(wit.wc.SyncRequest(json.dumps(greeting()), [wit.wc.Objects(cm, [])], [], True))
    assert done == wit.wc.SyncResponse(status=None, children=[], resync_after=None, finalized=True)


class Related(Greetings):
    """Asks for Secrets; answers as its parent's spec.mode says."""

    def customize(self, parent):
        if o.field(parent, "spec.mode") == "missing":
            raise NotFound("é" * 40_000)
        if o.field(parent, "spec.mode") == "crash":
            raise ZeroDivisionError("customize crashed")
        return [RelatedRule.named(kinds.SECRET, ["a"], "default"), RelatedRule.selected(kinds.SECRET, "")]

    def sync(self, request):
        mode = o.field(request.parent, "spec.mode")
        if mode == "invalid":
            raise Invalid("spec.to is required")
        if mode == "crash":
            raise ZeroDivisionError("sync crashed")
        names = [o.name(s) for s in request.related_of(kinds.SECRET)]
        return SyncResponse(status={"secrets": names}, resync_after=0.0004, finalized=True)


def test_customize_and_related_through_the_glue(guest, wit):
    d = described(guest, Related)
    secret = wit.wt.Gvk("", "v1", "Secret")
    assert d.Composite.customize(json.dumps(greeting())) == [
        wit.wc.RelatedRule(secret, "default", ["a"], None),
        wit.wc.RelatedRule(secret, None, [], None),
    ]
    items = [json.dumps(o.new_object(kinds.SECRET, n, "default")) for n in ("a", "b")]
    request = wit.wc.SyncRequest(json.dumps(greeting()), [], [wit.wc.Objects(secret, items[:1]), wit.wc.Objects(secret, items)], False)
    answer = d.Composite.sync(request)
    assert json.loads(answer.status) == {"secrets": ["a", "a", "b"]}
    assert answer.resync_after == 1, "whole milliseconds, rounded up"
    assert answer.finalized, "sent as answered (the host ignores it from sync)"


def test_errors_are_err_values_and_other_exceptions_trap(guest, wit):
    d = described(guest, Related)

    def parent(mode):
        return json.dumps({**greeting(), "spec": {"mode": mode}})

    with pytest.raises(wit.Err) as raised:
        d.Composite.sync(wit.wc.SyncRequest(parent("invalid"), [], [], False))
    assert raised.value.value == wit.wt.Error(wit.wt.ErrorCode.INVALID, "spec.to is required")
    with pytest.raises(wit.Err) as raised:
        d.Composite.customize(parent("missing"))
    assert raised.value.value.code == wit.wt.ErrorCode.NOT_FOUND
    assert len(raised.value.value.message.encode()) == 65_536, "cut to what the host takes"
    with pytest.raises(wit.Err) as raised:
        d.Composite.sync(wit.wc.SyncRequest("{", [], [], False))
    assert raised.value.value.code == wit.wt.ErrorCode.INVALID
    with pytest.raises(ZeroDivisionError, match="sync crashed"):
        d.Composite.sync(wit.wc.SyncRequest(parent("crash"), [], [], False))
    with pytest.raises(ZeroDivisionError, match="customize crashed"):
        d.Composite.customize(parent("crash"))


class Fleet(Controller):
    """Serves the members labelled tier=edge, reaches every member, not the host's own cluster."""

    def manifest(self):
        return Manifest("fleet", "0.1.0").primary(FOO).serve_members(Members.matching("tier=edge")).reach_members(Members.ALL).serve_local(False)

    def reconcile(self, obj, ctx):
        return DONE


def test_the_clusters_export_answers_the_scope(guest, wit):
    from wit_world.exports import clusters as wcl

    p = described(guest, Plain)
    assert p.Clusters.scope() == wcl.ClusterScope(serve_local=True, serve=wcl.Members_None_(), reach=wcl.Members_None_()), "the host's own only"
    f = described(guest, Fleet)
    assert f.Clusters.scope() == wcl.ClusterScope(serve_local=False, serve=wcl.Members_Matching("tier=edge"), reach=wcl.Members_All())
    before = dict(zip(NAMES, (c() for c in guest.exports_for(Runner(Fleet, FakeHost()))), strict=True))
    assert before["Clusters"].scope().serve_local, "before describe: the default"


def test_the_fleet_import_carries_the_named_cluster(guest, wit, monkeypatch):
    calls = []

    def record(name, answer=None):
        def fn(*args):
            calls.append((name, *args))
            return answer

        return fn

    cm = json.dumps(o.new_object(kinds.CONFIG_MAP, "a", "default"), separators=(",", ":"))
    monkeypatch.setattr(guest.fleet, "current", lambda: "eu")
    monkeypatch.setattr(guest.fleet, "clusters", lambda: [guest.fleet.Cluster("eu", [("env", "prod")])])
    for name in ("get", "apply", "apply_status", "create", "update", "update_status", "patch"):
        monkeypatch.setattr(guest.fleet, name, record(name, cm))
    monkeypatch.setattr(guest.fleet, "list_objects", record("list_objects", [cm]))
    monkeypatch.setattr(guest.fleet, "delete", record("delete"))
    ctx = Context(guest.WasmHost())
    assert ctx.cluster() == "eu"
    assert ctx.clusters() == [Cluster("eu", {"env": "prod"})]
    there = ctx.in_cluster("us")
    gvk = wit.wt.Gvk("", "v1", "ConfigMap")
    there.get(kinds.CONFIG_MAP, "default", "a")
    there.list(kinds.CONFIG_MAP, "default", "x=y")
    there.apply(json.loads(cm), force=False)
    there.apply_status(json.loads(cm))
    there.create(json.loads(cm))
    there.update(json.loads(cm))
    there.update_status(json.loads(cm))
    there.patch(kinds.CONFIG_MAP, "default", "a", {"data": {}}, "strategic")
    there.delete(kinds.CONFIG_MAP, "default", "a")
    ctx.in_cluster(None).delete(kinds.CONFIG_MAP, None, "b")
    assert calls == [
        ("get", "us", gvk, "default", "a"),
        ("list_objects", "us", gvk, "default", "x=y"),
        ("apply", "us", cm, False),
        ("apply_status", "us", cm, True),
        ("create", "us", cm),
        ("update", "us", cm),
        ("update_status", "us", cm),
        ("patch", "us", gvk, "default", "a", guest.client.PatchType.STRATEGIC, '{"data":{}}'),
        ("delete", "us", gvk, "default", "a"),
        ("delete", None, gvk, None, "b"),
    ]

    def unavailable(*args):
        raise wit.Err(wit.wt.Error(wit.wt.ErrorCode.UNAVAILABLE, 'cluster "us" is not engaged by this host now'))

    monkeypatch.setattr(guest.fleet, "apply", unavailable)
    with pytest.raises(Unavailable, match="not engaged"):
        there.apply(json.loads(cm))
