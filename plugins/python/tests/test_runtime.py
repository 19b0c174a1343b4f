"""The dispatch the component runs (`kubewasm.runtime`), against the fake host."""

import json
import types

import pytest

from kubewasm import (
    DONE,
    Action,
    Conflict,
    Context,
    Controller,
    EventType,
    Forbidden,
    Gvk,
    Invalid,
    LogLevel,
    Manifest,
    NotFound,
    ObjectKey,
    Other,
    PatchType,
    Permission,
    Rule,
    SettingsError,
    Verb,
    kinds,
)
from kubewasm import objects as o
from kubewasm.runtime import Refused, Runner, find_controller
from kubewasm.testing import FakeHost, Harness


class Echo(Controller):
    settings_defaults = {"x": 0, "fail": None, "crash": False}

    def __init__(self, settings):
        super().__init__(settings)
        if settings["fail"] is not None:
            raise SettingsError(f"fail: {settings['fail']}")
        if settings["crash"]:
            raise KeyError("crash")

    def manifest(self):
        return Manifest("echo", "0.1.0").primary(kinds.CONFIG_MAP).permission(kinds.CONFIG_MAP, ["create", "patch"])

    def reconcile(self, obj, ctx):
        mode = o.field(obj, "data.mode", "")
        if mode == "none":
            return None
        if mode == "requeue":
            return Action.requeue_after(2)
        if mode == "conflict":
            raise Conflict("stale")
        if mode == "bug":
            return {}["missing"]
        if mode == "wrong-return":
            return "done"
        if mode == "get-missing":
            assert ctx.get(kinds.CONFIG_MAP, "default", "nope") is None
            return DONE
        if mode == "copy":
            out = o.new_object(kinds.CONFIG_MAP, o.name(obj) + "-out", o.namespace(obj), data={"from": o.name(obj)})
            stored = ctx.apply(out)
            ctx.event(obj, EventType.NORMAL, "Copied", "Reconcile", f"copied to {o.name(stored)}")
            ctx.info("copied", to=o.name(stored), retries=ctx.retries)
            return DONE
        return DONE

    def finalize(self, obj, ctx):
        return Action.requeue_after(1)


def cm(name, mode="", ns="default", **labels):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns, "labels": labels}, "data": {"mode": mode}}


def test_describe_and_settings():
    h = Harness(Echo, settings={"x": 1})
    assert h.manifest.name == "echo"
    assert h.controller.settings == {"x": 1, "fail": None, "crash": False}, "the given keys over the defaults"


def test_unknown_settings_are_refused():
    with pytest.raises(Refused, match='^settings: unknown field "bogus"$'):
        Runner(Echo, FakeHost()).describe('{"x": 1, "bogus": 2}')

    class NoSettings(Echo):
        settings_defaults = {}

    with pytest.raises(Refused, match='^settings: unknown field "x"$'):
        Runner(NoSettings, FakeHost()).describe('{"x": 1}')


def test_settings_defaults_are_not_shared_between_instances():
    class Mutating(Echo):
        settings_defaults = {"names": []}

        def __init__(self, settings):
            Controller.__init__(self, settings)
            settings["names"].append("one")

    Harness(Mutating)
    assert Harness(Mutating).controller.settings == {"names": ["one"]}
    assert Mutating.settings_defaults == {"names": []}


@pytest.mark.parametrize(
    "settings,message",
    [
        ('{"fail": 3}', "fail: 3"),
        ('{"crash": true}', "KeyError: 'crash'"),
        ("[1]", "settings must be a table, not list"),
        ("{", "settings are not JSON"),
    ],
)
def test_describe_refuses(settings, message):
    with pytest.raises(Refused, match=message):
        Runner(Echo, FakeHost()).describe(settings)


def test_describe_accepts_empty_settings():
    for text in ("", "{}", "null"):
        Runner(Echo, FakeHost()).describe(text)


def test_describe_requires_primary():
    class NoPrimary(Controller):
        def manifest(self):
            return Manifest("x", "0")

    with pytest.raises(Refused, match="primary is not set"):
        Runner(NoPrimary, FakeHost()).describe("{}")

    class NotAManifest(Controller):
        def manifest(self):
            return {"name": "x"}

    with pytest.raises(Refused, match="must return a Manifest"):
        Runner(NotAManifest, FakeHost()).describe("{}")


def test_reconcile_results():
    h = Harness(Echo)
    assert h.reconcile(cm("a", "none")) == DONE
    assert h.reconcile(cm("a", "requeue")) == Action(requeue_after_ms=2000)
    assert h.finalize(cm("a")) == Action(requeue_after_ms=1000)
    with pytest.raises(Conflict):
        h.reconcile(cm("a", "conflict"))
    assert h.reconcile(cm("a", "get-missing")) == DONE


def test_a_bug_is_not_an_answer_it_propagates_to_trap():
    h = Harness(Echo)
    with pytest.raises(KeyError, match="missing"):
        h.reconcile(cm("a", "bug"))
    with pytest.raises(TypeError, match="not an Action"):
        h.reconcile(cm("a", "wrong-return"))


def test_returned_error_messages_are_cut_to_what_the_host_takes():
    class Loud(Echo):
        def reconcile(self, obj, ctx):
            raise Conflict("é" * 40_000)

    with pytest.raises(Conflict) as raised:
        Harness(Loud).reconcile(cm("a"))
    assert len(raised.value.message.encode()) == 65_536
    assert raised.value.message == "é" * 32_768

    class LoudSettings(Echo):
        def __init__(self, settings):
            raise SettingsError("x" * 100_000)

    with pytest.raises(Refused) as refused:
        Runner(LoudSettings, FakeHost()).describe("{}")
    assert str(refused.value) == "x" * 65_536


def test_reconcile_bad_json():
    r = Runner(Echo, FakeHost())
    r.describe("{}")
    with pytest.raises(Invalid, match="does not parse"):
        r.call("reconcile", ObjectKey("default", "a"), "{", 0)


def test_reconcile_before_describe():
    with pytest.raises(Other, match="before describe"):
        Runner(Echo, FakeHost()).call("reconcile", ObjectKey(None, "a"), "{}", 0)


def test_reconcile_by_key_and_recording():
    h = Harness(Echo, objects=[cm("src", "copy")])
    assert h.reconcile(ObjectKey("default", "src"), retries=2) == DONE
    assert h.host.applied() == [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "src-out", "namespace": "default"}, "data": {"from": "src"}}]
    assert h.host.get(kinds.CONFIG_MAP, "default", "src-out")["metadata"]["uid"]
    assert h.host.events == [
        {
            "regarding": {"resource": kinds.CONFIG_MAP, "namespace": "default", "name": "src"},
            "event_type": EventType.NORMAL,
            "reason": "Copied",
            "action": "Reconcile",
            "note": "copied to src-out",
        }
    ]
    assert h.host.logs == [(LogLevel.INFO, "copied", {"to": "src-out", "retries": "2"})]


def test_injected_failures_propagate():
    h = Harness(Echo)
    h.host.fail("apply", NotFound("gone"))
    with pytest.raises(NotFound, match="gone"):
        h.reconcile(cm("src", "copy"))
    assert h.reconcile(cm("src", "copy")) == DONE, "a failure is injected once"


def test_map_related_failures_propagate_to_trap():
    class Mapper(Echo):
        def map_related(self, resource, obj, ctx):
            if o.name(obj) == "bad":
                raise RuntimeError("nope")
            if o.name(obj) == "reads":
                ctx.list(kinds.NODE)
            return [ObjectKey("default", "x"), ("default", "y")]

    h = Harness(Mapper)
    assert h.map_related(kinds.SECRET, cm("ok")) == [ObjectKey("default", "x"), ObjectKey("default", "y")]
    with pytest.raises(RuntimeError, match="nope"):
        h.map_related(kinds.SECRET, cm("bad"))
    h.host.fail("cache_list", Forbidden("no"))
    with pytest.raises(Forbidden):
        h.map_related(kinds.SECRET, cm("reads"))


FOO = Gvk("example.com", "v1", "Foo")


class Parent(Controller):
    """Owns Deployments (which it may delete) and Secrets (which it may not); binds `edit`."""

    def manifest(self):
        return (
            Manifest("parent", "0.1.0")
            .finalizer("example.com/cleanup")
            .primary(FOO)
            .primary_selector("managed=true")
            .owns(kinds.DEPLOYMENT)
            .owns(kinds.SECRET)
            .permission(kinds.DEPLOYMENT, ["create", "patch", "delete"])
            .bind_cluster_role("edit")
        )

    def reconcile(self, obj, ctx):
        return DONE


def foo(name="a", uid="foo-uid"):
    return {"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": name, "namespace": "default", "uid": uid}}


def child(gvk, name, owner, ns="default", controller=True):
    ref = o.owner_ref(owner, controller=controller)
    return o.new_object(gvk, name, ns, metadata={"name": name, "namespace": ns, "ownerReferences": [ref]})


def test_describe_gives_the_host_the_finalizer_patch_and_the_rules():
    h = Harness(Parent)
    assert Permission(FOO, [Verb.PATCH], None, []) in h.manifest.permissions
    assert h.runner.rules() == [Rule(kinds.CLUSTER_ROLE, ["bind"], None, [], ["edit"])]
    assert Runner(Parent, FakeHost()).rules() == [], "no rules before describe"


class Counter(Controller):
    """Counts its Foo's Pods and maps Secrets to Foos, reading both metadata-only."""

    def manifest(self):
        return (
            Manifest("counter", "0.1.0")
            .primary(FOO)
            .owns(kinds.POD)
            .watches(kinds.SECRET)
            .watches(kinds.CONFIG_MAP)
            .metadata_only(kinds.POD)
            .metadata_only(kinds.SECRET)
        )

    def reconcile(self, obj, ctx):
        self.seen = {
            "get": ctx.get(kinds.POD, "default", "p"),
            "list": ctx.list(kinds.POD, "default"),
            "whole": ctx.get(kinds.CONFIG_MAP, "default", "c"),
        }
        return DONE

    def map_related(self, resource, obj, ctx):
        self.mapped = obj
        return [ObjectKey("default", "a")]


POD_METADATA = {"name": "p", "namespace": "default", "uid": "pod-uid", "resourceVersion": "7", "labels": {"app": "web"}}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {**POD_METADATA, "managedFields": [{"manager": "kubelet", "operation": "Update"}]},
    "spec": {"containers": []},
    "status": {"phase": "Running"},
}


def test_describe_gives_the_views_export_the_metadata_only_kinds():
    assert Harness(Counter).runner.metadata_only() == [kinds.POD, kinds.SECRET]
    assert Harness(Parent).runner.metadata_only() == [], "none declared: every kind handed whole"
    assert Runner(Counter, FakeHost()).metadata_only() == [], "none before describe"


def test_the_fake_host_hands_metadata_only_kinds_as_the_host_does():
    whole = cm("c")
    h = Harness(Counter, objects=[foo(), POD, whole])
    assert h.reconcile(ObjectKey("default", "a")) == DONE
    handed = {"apiVersion": "v1", "kind": "Pod", "metadata": POD_METADATA}
    assert h.controller.seen["get"] == handed
    assert h.controller.seen["list"] == [handed]
    assert h.controller.seen["whole"]["data"] == whole["data"], "a kind not declared is handed whole"
    assert h.host.get(kinds.POD, "default", "p") == POD, "the store keeps the whole object"
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default", "managedFields": []}, "data": {"k": "dg=="}}
    assert h.map_related(kinds.SECRET, secret) == [ObjectKey("default", "a")]
    assert h.controller.mapped == {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}}
    h.map_related(kinds.CONFIG_MAP, whole)
    assert h.controller.mapped == whole


def test_released_deletes_only_controlled_children_of_deletable_owned_kinds():
    owner = foo()
    h = Harness(
        Parent,
        objects=[
            owner,
            child(kinds.DEPLOYMENT, "mine", owner),
            child(kinds.DEPLOYMENT, "not-controller", owner, controller=False),
            child(kinds.DEPLOYMENT, "other-owner", foo("b", "other-uid")),
            child(kinds.DEPLOYMENT, "elsewhere", owner, ns="other"),
            child(kinds.SECRET, "mine-too", owner),
        ],
    )
    assert h.released(ObjectKey("default", "a")) == DONE
    assert [(c.resource, c.namespace, c.name) for c in h.host.writes("delete")] == [(kinds.DEPLOYMENT, "default", "mine")]
    assert h.host.get(kinds.SECRET, "default", "mine-too") is not None
    assert h.host.logs == [(LogLevel.WARN, "leaving the Secret objects of a in place: the manifest grants no delete on them", {})]


def test_released_tolerates_a_child_already_gone_and_fails_on_other_errors():
    owner = foo()
    h = Harness(Parent, objects=[owner, child(kinds.DEPLOYMENT, "mine", owner)])
    h.host.fail("delete", NotFound("gone meanwhile"))
    assert h.released(owner) == DONE
    h.host.fail("delete", Conflict("try again"))
    with pytest.raises(Conflict):
        h.released(owner)


def test_released_can_be_overridden():
    class Keeper(Parent):
        def released(self, obj, ctx):
            if o.name(obj) == "bug":
                raise RuntimeError("nope")
            return Action.requeue_after(5)

    h = Harness(Keeper)
    assert h.released(foo()) == Action(requeue_after_ms=5000)
    assert h.host.writes() == []
    with pytest.raises(RuntimeError, match="nope"):
        h.released(foo("bug"))


def test_find_controller():
    m = types.ModuleType("app")
    with pytest.raises(TypeError, match="found: none"):
        find_controller(m)

    class A(Controller):
        pass

    class B(Controller):
        pass

    A.__module__ = B.__module__ = "app"
    m.A = A
    assert find_controller(m) is A
    m.B = B
    with pytest.raises(TypeError, match="found: A, B"):
        find_controller(m)
    m.controller = B
    assert find_controller(m) is B
    m.controller = 3
    with pytest.raises(TypeError, match="must be a Controller or CompositeController subclass"):
        find_controller(m)


def test_imported_controller_is_not_found():
    m = types.ModuleType("app")
    m.Echo = Echo  # imported from elsewhere: not the module's own
    with pytest.raises(TypeError):
        find_controller(m)


class TestContextAgainstFakeHost:
    def ctx(self, *objects):
        host = FakeHost(objects)
        return host, Context(host, ObjectKey("default", "x"), 1)

    def test_get_and_list(self):
        host, ctx = self.ctx(cm("b", app="web"), cm("a", app="db"), cm("c", ns="other", app="web"))
        assert o.name(ctx.get(kinds.CONFIG_MAP, "default", "a")) == "a"
        assert ctx.get(kinds.CONFIG_MAP, "default", "zzz") is None
        assert [o.key(c) for c in ctx.list(kinds.CONFIG_MAP)] == [ObjectKey("default", "a"), ObjectKey("default", "b"), ObjectKey("other", "c")]
        assert [o.name(c) for c in ctx.list(kinds.CONFIG_MAP, "default")] == ["a", "b"]
        assert [o.name(c) for c in ctx.list(kinds.CONFIG_MAP, label_selector="app=web")] == ["b", "c"]
        assert ctx.list(kinds.SECRET) == []

    def test_list_controlled(self):
        parent = {"apiVersion": "example.com/v1", "kind": "Parent", "metadata": {"name": "p", "namespace": "default", "uid": "uid-p"}}
        other = {"apiVersion": "example.com/v1", "kind": "Parent", "metadata": {"name": "q", "namespace": "default", "uid": "uid-q"}}

        def child(name, ns="default", owner=parent, controller=True):
            c = cm(name, ns=ns)
            c["metadata"]["ownerReferences"] = [o.owner_ref(owner, controller=controller)]
            c["metadata"]["managedFields"] = [{"manager": "m"}]
            return c

        host, ctx = self.ctx(
            child("b"),
            child("a"),
            child("c", ns="other"),
            child("d", owner=other),
            child("e", controller=False),
            cm("f"),
            child("g") | {"kind": "Secret"},
        )
        keys = [ObjectKey("default", "a"), ObjectKey("default", "b"), ObjectKey("other", "c")]
        assert [o.key(c) for c in ctx.list_controlled(kinds.CONFIG_MAP, "uid-p")] == keys
        assert [o.name(c) for c in ctx.list_controlled(kinds.CONFIG_MAP, "uid-p", "default")] == ["a", "b"]
        assert [o.name(c) for c in ctx.list_controlled(kinds.CONFIG_MAP, "uid-q")] == ["d"]
        assert ctx.list_controlled(kinds.CONFIG_MAP, "uid-none") == []
        assert ctx.list_controlled(kinds.CONFIG_MAP, "uid-p")[0]["data"] == {"mode": ""}, "a whole object"
        host.metadata_only = [kinds.CONFIG_MAP]
        handed = ctx.list_controlled(kinds.CONFIG_MAP, "uid-p", "default")[0]
        assert set(handed) == {"apiVersion", "kind", "metadata"}, "a metadata-only kind: only the metadata"
        assert "managedFields" not in handed["metadata"]
        assert host.get(kinds.CONFIG_MAP, "default", "a")["metadata"]["managedFields"] == [{"manager": "m"}], "the store keeps them"
        host.fail("cache_list_controlled", Forbidden("no"))
        with pytest.raises(Forbidden):
            ctx.list_controlled(kinds.CONFIG_MAP, "uid-p")

    def test_get_returns_a_copy(self):
        host, ctx = self.ctx(cm("a"))
        got = ctx.get(kinds.CONFIG_MAP, "default", "a")
        got["data"]["mode"] = "changed"
        assert host.get(kinds.CONFIG_MAP, "default", "a")["data"]["mode"] == ""

    def test_create_update_conflicts(self):
        host, ctx = self.ctx()
        created = ctx.create(cm("a"))
        with pytest.raises(Exception) as e:
            ctx.create(cm("a"))
        assert e.value.code.value == "already-exists"
        created["data"]["mode"] = "x"
        updated = ctx.update(created)
        assert updated["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]
        with pytest.raises(Conflict):
            ctx.update(created)  # stale resourceVersion
        updated["status"] = {"phase": "ok"}
        ctx.update_status(updated)
        assert host.get(kinds.CONFIG_MAP, "default", "a")["status"] == {"phase": "ok"}
        with pytest.raises(NotFound):
            ctx.update(cm("missing") | {"metadata": {"name": "missing", "namespace": "default", "resourceVersion": "1"}})

    def test_apply_merges_and_apply_status(self):
        host, ctx = self.ctx()
        first = ctx.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}, "data": {"x": "1"}})
        assert first["metadata"]["generation"] == 1
        ctx.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}, "data": {"y": "2"}})
        assert host.get(kinds.CONFIG_MAP, "default", "a")["data"] == {"x": "1", "y": "2"}
        ctx.apply_status(o.status_object(first, {"ready": True}))
        assert host.get(kinds.CONFIG_MAP, "default", "a")["status"] == {"ready": True}
        with pytest.raises(NotFound):
            ctx.apply_status(o.status_object(cm("nope"), {}))
        assert [c.op for c in host.calls] == ["apply", "apply", "apply_status", "apply_status"]
        assert all(c.force for c in host.calls)

    def test_patch_kinds(self):
        host, ctx = self.ctx(cm("a", "m"))
        ctx.patch(kinds.CONFIG_MAP, "default", "a", {"metadata": {"annotations": {"k": "v"}}, "data": {"mode": None}})
        stored = host.get(kinds.CONFIG_MAP, "default", "a")
        assert stored["metadata"]["annotations"] == {"k": "v"}
        assert "mode" not in stored["data"]
        ctx.patch(kinds.CONFIG_MAP, "default", "a", [{"op": "add", "path": "/data/z", "value": "1"}], PatchType.JSON)
        assert host.get(kinds.CONFIG_MAP, "default", "a")["data"] == {"z": "1"}
        with pytest.raises(Invalid, match="test failed"):
            ctx.patch(kinds.CONFIG_MAP, "default", "a", [{"op": "test", "path": "/data/z", "value": "2"}], "json")
        with pytest.raises(Conflict):
            ctx.patch(kinds.CONFIG_MAP, "default", "a", {"metadata": {"resourceVersion": "0"}})
        with pytest.raises(NotFound):
            ctx.patch(kinds.CONFIG_MAP, "default", "nope", {})
        patches = host.writes("patch")
        assert patches[0].patch_type is PatchType.MERGE and patches[0].name == "a"

    def test_delete(self):
        host, ctx = self.ctx(cm("a"))
        ctx.delete(kinds.CONFIG_MAP, "default", "a")
        assert host.get(kinds.CONFIG_MAP, "default", "a") is None
        with pytest.raises(NotFound):
            ctx.delete(kinds.CONFIG_MAP, "default", "a")

    def test_unserializable_object(self):
        host, ctx = self.ctx()
        with pytest.raises(Invalid, match="not JSON"):
            ctx.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {1, 2}})

    def test_json_text_is_what_the_host_sees(self):
        seen = []

        class Spy(FakeHost):
            def apply(self, obj, force):
                seen.append(obj)
                return super().apply(obj, force)

        ctx = Context(Spy(), None)
        ctx.apply(cm("é"))
        assert json.loads(seen[0])["metadata"]["name"] == "é"


def test_gvk_str_in_errors():
    assert "Foo.v1.example.com" in str(NotFound(f"{Gvk('example.com', 'v1', 'Foo')} gone"))


class Narrow(Controller):
    """Reads only `data.keep` of its ConfigMaps and says what it was handed of each."""

    def manifest(self):
        return (
            Manifest("narrow", "0.1.0")
            .primary(kinds.CONFIG_MAP)
            .permission(kinds.CONFIG_MAP, ["create", "patch", "update"])
            .reads_fields(kinds.CONFIG_MAP, "data.keep", "data.keep.deeper")
        )

    def reconcile(self, obj, ctx):
        read = ctx.get(kinds.CONFIG_MAP, o.namespace(obj), o.name(obj))
        out = o.new_object(kinds.CONFIG_MAP, o.name(obj) + "-out", o.namespace(obj))
        out["data"] = {"handed": ",".join(sorted(obj.get("data", {}))), "read": ",".join(sorted(read.get("data", {}))), "keep": "x", "other": "y"}
        answer = ctx.apply(out)
        if sorted(answer["data"]) != ["keep"]:
            raise Invalid(f"the answer carried {sorted(answer['data'])}")
        ctx.update(obj)
        return DONE


def test_the_fake_host_hands_a_projected_kind_as_the_host_does():
    cm = o.new_object(kinds.CONFIG_MAP, "p", "default")
    cm["data"] = {"keep": "k", "drop": "d"}
    h = Harness(Narrow, objects=[cm])
    assert h.runner.reads_fields() == {kinds.CONFIG_MAP: ["data.keep", "data.keep.deeper"]}
    with pytest.raises(Invalid, match="update replaces the whole ConfigMap"):
        h.reconcile(cm)
    out = h.host.writes("apply")[0].object
    assert (out["data"]["handed"], out["data"]["read"]) == ("keep", "keep"), "the request and the cache read are projected"
    stored = h.host.objects[("", "ConfigMap", "default", "p-out")]
    assert sorted(stored["data"]) == ["handed", "keep", "other", "read"], "the store keeps whole objects"
