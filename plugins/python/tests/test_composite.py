"""Declarative controllers (contract 0.1.3): the builder, the dispatch the component runs
(`kubewasm.runtime`) and the harness, against the fake host."""

import json
import types
from datetime import timedelta
from pathlib import Path

import pytest
from greetings import GREETING, Greetings

from kubewasm import (
    DONE,
    Action,
    ChildRule,
    ChildSelector,
    CompositeController,
    Composition,
    Conflict,
    Controller,
    Forbidden,
    Gvk,
    Invalid,
    LogLevel,
    Manifest,
    ObjectKey,
    Other,
    RelatedRule,
    SyncRequest,
    SyncResponse,
    UpdateStrategy,
    kinds,
)
from kubewasm import objects as o
from kubewasm.composite import Encoded, Objects, decode, encode
from kubewasm.runtime import Refused, Runner, find_controller
from kubewasm.testing import COMPOSING, FakeHost, Harness

FOO = Gvk("example.com", "v1", "Foo")


def foo(name="a", uid="foo-uid", ns="default", **spec):
    return {"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": name, "namespace": ns, "uid": uid, "generation": 2}, "spec": spec}


def cm(name, ns="default", owner=None, **labels):
    obj = o.new_object(kinds.CONFIG_MAP, name, ns, data={"x": name})
    if labels:
        obj["metadata"]["labels"] = labels
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [o.controller_owner_ref(owner)]
    return obj


def secret(name, ns="default", **labels):
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns, "labels": labels}}


# --- the builder ---


def test_child_adds_owns_once_and_a_rule():
    m = (
        Manifest("m", "0")
        .primary(FOO)
        .owns(kinds.SECRET)
        .child(kinds.CONFIG_MAP, UpdateStrategy.IN_PLACE)
        .child(kinds.SECRET, "recreate")
        .child(kinds.DEPLOYMENT)
    )
    assert m.spec.owns == [kinds.SECRET, kinds.CONFIG_MAP, kinds.DEPLOYMENT]
    assert m.spec.composition == Composition(
        [
            ChildRule(kinds.CONFIG_MAP, UpdateStrategy.IN_PLACE),
            ChildRule(kinds.SECRET, UpdateStrategy.RECREATE),
            ChildRule(kinds.DEPLOYMENT, UpdateStrategy.ON_DELETE),
        ],
        ChildSelector.GENERATED,
    )
    m.child(kinds.CONFIG_MAP, UpdateStrategy.RECREATE)
    assert m.spec.owns == [kinds.SECRET, kinds.CONFIG_MAP, kinds.DEPLOYMENT], "declared again: owned once"
    assert m.spec.composition.children[0] == ChildRule(kinds.CONFIG_MAP, UpdateStrategy.RECREATE), "the strategy replaced in place"
    with pytest.raises(ValueError, match="not a UpdateStrategy"):
        m.child(kinds.POD, "sometimes")


def test_child_selector_and_child_kinds():
    m = Manifest("m", "0").primary(FOO)
    assert m.spec.composition is None, "no composition until child() or child_selector()"
    assert m.spec.child_kinds() == []
    m.child_selector(ChildSelector.PARENT_SPEC_SELECTOR)
    assert m.spec.composition == Composition([], ChildSelector.PARENT_SPEC_SELECTOR)
    m.owns(kinds.POD).child(kinds.SECRET).child_selector("generated")
    assert m.spec.composition.selector is ChildSelector.GENERATED
    assert m.spec.child_kinds() == [kinds.SECRET, kinds.POD], "the rules' kinds, then the other owns kinds"


def test_wit_enum_values():
    assert [s.value for s in UpdateStrategy] == ["on-delete", "recreate", "in-place"]
    assert [s.value for s in ChildSelector] == ["generated", "parent-spec-selector"]


# --- describe and describe-composition ---


class Plain(Controller):
    def manifest(self):
        return Manifest("plain", "0.1.0").primary(FOO).owns(kinds.CONFIG_MAP)

    def reconcile(self, obj, ctx):
        return DONE


def test_describe_composition_is_none_for_a_plain_controller():
    h = Harness(Plain)
    assert h.composition is None
    assert h.manifest.composition is None
    assert Runner(Greetings, FakeHost()).composition() is None, "none before describe"


def test_describe_composition_of_a_declarative_controller():
    h = Harness(Greetings)
    assert h.manifest.primary == GREETING
    assert h.manifest.owns == [kinds.CONFIG_MAP]
    assert h.composition == Composition([ChildRule(kinds.CONFIG_MAP, UpdateStrategy.IN_PLACE)], ChildSelector.GENERATED)
    assert h.manifest.composition is h.composition


def test_a_declarative_controller_without_child_rules_answers_a_composition():
    class OwnsOnly(CompositeController):
        def manifest(self):
            return Manifest("owns-only", "0").primary(FOO).owns(kinds.SECRET)

        def sync(self, request):
            return SyncResponse()

    h = Harness(OwnsOnly)
    assert h.composition == Composition([], ChildSelector.GENERATED)
    assert h.manifest.child_kinds() == [kinds.SECRET]


def test_a_plain_controller_declaring_children_is_refused():
    class Confused(Plain):
        def manifest(self):
            return super().manifest().child(kinds.SECRET)

    with pytest.raises(Refused, match=r"child\(\) and child_selector\(\) declare the children of a declarative controller; Confused is a Controller"):
        Runner(Confused, FakeHost()).describe("{}")


def test_settings_as_for_a_controller():
    assert Harness(Greetings).controller.salutation == "Hello"
    assert Harness(Greetings, settings={"salutation": "Hi"}).controller.settings == {"salutation": "Hi"}
    with pytest.raises(Refused, match='^settings: unknown field "bogus"$'):
        Runner(Greetings, FakeHost()).describe('{"bogus": 1}')


def test_find_controller_finds_a_composite_controller():
    m = types.ModuleType("app")

    class G(CompositeController):
        pass

    G.__module__ = "app"
    m.G = G
    m.CompositeController = CompositeController  # imported: not the module's own
    assert find_controller(m) is G

    class P(Controller):
        pass

    P.__module__ = "app"
    m.P = P
    with pytest.raises(TypeError, match="found: G, P"):
        find_controller(m)
    m.controller = G
    assert find_controller(m) is G


# --- the request and the response ---


def test_sync_request_accessors():
    request = SyncRequest(
        parent=foo(),
        children=[Objects(kinds.CONFIG_MAP, [cm("a"), cm("b")]), Objects(kinds.SECRET, [])],
        related=[Objects(kinds.SECRET, [secret("s1")]), Objects(Gvk("", "v2", "Secret"), [secret("s2")]), Objects(kinds.NODE, [])],
    )
    assert [o.name(c) for c in request.children_of(kinds.CONFIG_MAP)] == ["a", "b"]
    assert request.children_of(kinds.SECRET) == []
    assert request.children_of(kinds.POD) == [], "a kind without an entry: empty"
    assert [o.name(s) for s in request.related_of(kinds.SECRET)] == ["s1", "s2"], "over every rule, any version"
    assert request.related_of(kinds.CONFIG_MAP) == []
    assert not request.finalizing


def test_resync_after_is_whole_milliseconds_rounded_up():
    assert SyncResponse().resync_after_ms is None
    assert SyncResponse(resync_after=2.5).resync_after_ms == 2500
    assert SyncResponse(resync_after=1.1).resync_after_ms == 1100, "no float noise"
    assert SyncResponse(resync_after=0.0004).resync_after_ms == 1, "a positive delay never becomes 0"
    assert SyncResponse(resync_after=0).resync_after_ms == 0
    assert SyncResponse(resync_after=timedelta(microseconds=1001)).resync_after_ms == 2
    assert SyncResponse(resync_after=timedelta(minutes=1)).resync_after_ms == 60_000
    assert SyncResponse(resync_after=1e30).resync_after_ms == 2**64 - 1, "cut to the WIT's u64"
    assert SyncResponse(resync_after=float("inf")).resync_after_ms == 2**64 - 1
    with pytest.raises(ValueError, match="resync_after: negative delay"):
        SyncResponse(resync_after=-1)
    with pytest.raises(ValueError, match="resync_after: the delay is NaN"):
        SyncResponse(resync_after=float("nan"))


def test_responses_are_equal_when_the_host_gets_the_same_answer():
    assert SyncResponse(resync_after=5) == SyncResponse(resync_after=timedelta(seconds=5))
    assert SyncResponse(resync_after=5) != SyncResponse(resync_after=6)
    assert SyncResponse(status={"a": 1}, children=[cm("x")]) == SyncResponse(status={"a": 1}, children=[cm("x")])
    assert SyncResponse(status={}) != SyncResponse(), "an empty status is not none (the host treats both as {})"
    assert SyncResponse() != SyncResponse(finalized=True)


def test_encode_and_decode():
    response = SyncResponse(status={"é": (1, 2)}, children=[cm("a")], resync_after=timedelta(milliseconds=1500), finalized=True)
    encoded = encode(response)
    assert encoded == Encoded('{"é":[1,2]}', [json.dumps(cm("a"), separators=(",", ":"))], 1500, True)
    assert decode(encoded) == SyncResponse(status={"é": [1, 2]}, children=[cm("a")], resync_after=1.5, finalized=True)
    assert encode(SyncResponse()) == Encoded(None, [], None, False)
    with pytest.raises(TypeError):
        encode(SyncResponse(children=[{"data": {1, 2}}]))


def test_related_rule_helpers():
    assert RelatedRule.named(kinds.SECRET, ["a", "b"], "ns") == RelatedRule(kinds.SECRET, "ns", ["a", "b"], None)
    assert RelatedRule.named(kinds.SECRET, "a") == RelatedRule(kinds.SECRET, None, ["a"], None)
    assert RelatedRule.selected(kinds.SECRET, "env=prod") == RelatedRule(kinds.SECRET, None, [], "env=prod")
    assert RelatedRule.selected(kinds.SECRET, "", "ns") == RelatedRule(kinds.SECRET, "ns", [], None), "'' is every object"


# --- sync, finalize, customize through the harness ---


def greeting(name="hi", uid="g-uid", **spec):
    return {"apiVersion": "example.com/v1", "kind": "Greeting", "metadata": {"name": name, "namespace": "default", "uid": uid}, "spec": spec}


def test_the_readme_example():
    h = Harness(Greetings, settings={"salutation": "Hi"})
    parent = greeting(to="you")
    want = o.new_object(kinds.CONFIG_MAP, "hi-greeting", data={"text": "Hi, you!"})
    assert h.sync(parent, children=[]) == SyncResponse(status={"configMap": "hi-greeting", "ready": False}, children=[want])
    existing = cm("hi-greeting", owner=parent)
    assert h.sync(parent, children=[existing]).status == {"configMap": "hi-greeting", "ready": True}
    assert h.host.logs[-1] == (LogLevel.DEBUG, "synced", {"greeting": "hi", "exists": "True"})
    assert h.finalize(parent) == SyncResponse(finalized=True), "the default finalize"
    assert h.customize(parent) == [], "the default customize"
    assert h.host.calls == [], "the harness writes nothing"


class Recorder(CompositeController):
    """Records what it is handed; its behaviour is the parent's spec.mode."""

    def manifest(self):
        return (
            Manifest("recorder", "0.1.0")
            .primary(FOO)
            .finalizer("example.com/cleanup")
            .owns(kinds.SECRET)
            .child(kinds.CONFIG_MAP, UpdateStrategy.RECREATE)
            .watches(kinds.NODE)
            .child_selector(ChildSelector.PARENT_SPEC_SELECTOR)
        )

    def customize(self, parent):
        mode = o.field(parent, "spec.mode")
        if mode == "customize-conflict":
            raise Conflict("stale")
        if mode == "customize-bug":
            raise KeyError("bug")
        if mode == "customize-wrong":
            return [("v1", "Secret")]
        if mode == "customize-none":
            return None
        return [RelatedRule.selected(kinds.SECRET, "env=prod", "default"), RelatedRule.named(kinds.NODE, ["n1", "n3"])]

    def sync(self, request):
        self.request = request
        mode = o.field(request.parent, "spec.mode")
        if mode == "conflict":
            raise Conflict("é" * 40_000)
        if mode == "bug":
            return {}["missing"]
        if mode == "none":
            return None
        if mode == "action":
            return DONE
        if mode == "bad-json":
            return SyncResponse(status={"x": object()})
        if mode == "bad-resync":
            return SyncResponse(resync_after=-1)
        if mode == "write":
            try:
                self.ctx.apply(cm("sneaky"))
            except Forbidden as e:
                self.refused = e
            return SyncResponse(status={"wrote": False})
        if mode == "event":
            self.ctx.event(request.parent, "Normal", "Synced", "Sync")
        if mode == "read":
            self.read = (self.ctx.get(kinds.SECRET, "default", "s1"), self.ctx.list(kinds.NODE), self.ctx.key)
        self.ctx.info("synced", children=len(request.children_of(kinds.CONFIG_MAP)))
        return SyncResponse(
            status={"children": [o.name(c) for c in request.children_of(kinds.CONFIG_MAP)]},
            children=[cm(o.name(request.parent) + "-out")],
            resync_after=timedelta(seconds=30),
        )

    def finalize(self, request):
        self.request = request
        if o.field(request.parent, "spec.mode") == "finalize-bug":
            raise RuntimeError("cleanup crashed")
        return SyncResponse(status={"cleaning": True}, finalized=o.field(request.parent, "spec.done", False))


def test_sync_hands_children_grouped_by_kind_and_sorted():
    h = Harness(Recorder)
    parent = foo()
    answer = h.sync(parent, children=[cm("b"), secret("s"), cm("a", ns="other"), cm("a")], related=[])
    assert answer == SyncResponse(status={"children": ["a", "b", "a"]}, children=[cm("a-out")], resync_after=30)
    assert answer.resync_after == 30.0 and answer.resync_after_ms == 30_000
    request = h.controller.request
    assert request.parent == parent and not request.finalizing
    assert [(g.resource, [o.key(c) for c in g.items]) for g in request.children] == [
        (kinds.CONFIG_MAP, [ObjectKey("default", "a"), ObjectKey("default", "b"), ObjectKey("other", "a")]),
        (kinds.SECRET, [ObjectKey("default", "s")]),
    ], "the rules' kinds first, then the other owns kinds; each sorted by namespace and name"
    assert request.related == []
    with pytest.raises(ValueError, match=r"Pod.v1 default/p is not of a child kind of the manifest \(ConfigMap.v1, Secret.v1\)"):
        h.sync(parent, children=[{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}}])


def test_sync_claims_the_stores_controlled_children_by_default():
    parent = foo()
    other = foo("b", "other-uid")
    not_controller = cm("not-controller")
    not_controller["metadata"]["ownerReferences"] = [o.owner_ref(parent)]
    h = Harness(
        Recorder,
        objects=[
            parent,
            cm("mine", owner=parent),
            cm("theirs", owner=other),
            cm("orphan"),
            not_controller,
            cm("elsewhere", "other", owner=parent),
            secret("s"),
        ],
    )
    h.sync(ObjectKey("default", "a"), related=[])
    assert [o.name(c) for c in h.controller.request.children_of(kinds.CONFIG_MAP)] == ["mine"]
    assert h.controller.request.children_of(kinds.SECRET) == []


def test_related_given_or_selected_by_customize_from_the_store():
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}} for n in ("n3", "n2", "n1")]
    h = Harness(Recorder, objects=[secret("s2", env="prod"), secret("s1", env="prod"), secret("s3", env="dev"), secret("s4", "other", env="prod"), *nodes])
    assert h.customize(foo()) == [RelatedRule(kinds.SECRET, "default", [], "env=prod"), RelatedRule(kinds.NODE, None, ["n1", "n3"], None)]
    h.sync(foo(), children=[])
    request = h.controller.request
    assert [(g.resource, [o.name(x) for x in g.items]) for g in request.related] == [(kinds.SECRET, ["s1", "s2"]), (kinds.NODE, ["n1", "n3"])]
    h.sync(foo(), children=[], related=[secret("z"), nodes[0], secret("y")])
    assert [(g.resource, [o.name(x) for x in g.items]) for g in h.controller.request.related] == [(kinds.SECRET, ["y", "z"]), (kinds.NODE, ["n3"])]
    assert [o.name(s) for s in h.controller.request.related_of(kinds.SECRET)] == ["y", "z"]


def test_customize_answers():
    h = Harness(Recorder)
    with pytest.raises(Conflict, match="stale"):
        h.customize(foo(mode="customize-conflict"))
    with pytest.raises(KeyError, match="bug"):
        h.customize(foo(mode="customize-bug"))
    with pytest.raises(TypeError, match="not a RelatedRule"):
        h.customize(foo(mode="customize-wrong"))
    assert h.customize(foo(mode="customize-none")) == []


def test_the_harness_selects_related_objects_as_the_host_does():
    class Both(Recorder):
        def customize(self, parent):
            return [RelatedRule(kinds.SECRET, names=["a"], label_selector="x=y")]

    with pytest.raises(Invalid, match="customize rule 0: names and label-selector together"):
        Harness(Both).sync(foo(), children=[])

    class BadSelector(Recorder):
        def customize(self, parent):
            return [RelatedRule.selected(kinds.SECRET, "a in b")]

    with pytest.raises(Invalid, match="customize rule 0: label selector"):
        Harness(BadSelector).sync(foo(), children=[])


def test_finalize_hands_a_finalizing_request():
    h = Harness(Recorder)
    assert h.finalize(foo(), children=[cm("a")], related=[]) == SyncResponse(status={"cleaning": True}, finalized=False)
    assert h.controller.request.finalizing
    assert [o.name(c) for c in h.controller.request.children_of(kinds.CONFIG_MAP)] == ["a"]
    assert h.finalize(foo(done=True), children=[], related=[]).finalized
    with pytest.raises(RuntimeError, match="cleanup crashed"):
        h.finalize(foo(mode="finalize-bug"), children=[], related=[])


def test_a_kubewasm_error_is_an_answer_cut_to_what_the_host_takes():
    h = Harness(Recorder)
    with pytest.raises(Conflict) as raised:
        h.sync(foo(mode="conflict"), children=[], related=[])
    assert raised.value.message == "é" * 32_768


@pytest.mark.parametrize(
    "mode,error,match",
    [
        ("bug", KeyError, "missing"),
        ("none", TypeError, "sync returned None, not a SyncResponse"),
        ("action", TypeError, "not a SyncResponse"),
        ("bad-json", TypeError, "not JSON serializable"),
        ("bad-resync", ValueError, "resync_after: negative delay"),
    ],
)
def test_any_other_exception_is_a_bug_and_propagates_to_trap(mode, error, match):
    with pytest.raises(error, match=match):
        Harness(Recorder).sync(foo(mode=mode), children=[], related=[])


def test_client_and_event_calls_are_refused_during_sync():
    h = Harness(Recorder)
    assert h.sync(foo(mode="write"), children=[], related=[]).status == {"wrote": False}
    refused = h.controller.refused
    assert isinstance(refused, Forbidden)
    assert refused.message == f"patch ConfigMap.v1 refused: {COMPOSING}"
    with pytest.raises(Forbidden, match=r"^forbidden: an Event refused: a declarative plugin's customize"):
        h.sync(foo(mode="event"), children=[], related=[])
    assert h.host.calls == [] and h.host.events == []
    assert h.host.refused == [f"patch ConfigMap.v1 refused: {COMPOSING}", f"an Event refused: {COMPOSING}"]
    assert h.host.cache_only is None, "refusing only during the call"
    with pytest.raises(RuntimeError, match="only available during customize, sync and finalize"):
        h.controller.ctx  # noqa: B018


def test_the_cache_and_logs_work_during_sync():
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
    h = Harness(Recorder, objects=[secret("s1"), node])
    h.sync(foo(mode="read"), children=[], related=[])
    got, listed, key = h.controller.read
    assert o.name(got) == "s1" and [o.name(n) for n in listed] == ["n1"]
    assert key == ObjectKey("default", "a"), "the context's key is the parent's"
    assert h.host.logs[-1] == (LogLevel.INFO, "synced", {"children": "0"})


def test_fake_host_only_cache_refuses_every_write():
    host = FakeHost([cm("a")])
    with host.only_cache("reads only"):
        for call, message in [
            (lambda: host.apply(json.dumps(cm("a")), True), "patch ConfigMap.v1 refused: reads only"),
            (lambda: host.apply_status(json.dumps(cm("a")), True), "patch ConfigMap.v1 refused: reads only"),
            (lambda: host.create(json.dumps(cm("b"))), "create ConfigMap.v1 refused: reads only"),
            (lambda: host.update(json.dumps(cm("a"))), "update ConfigMap.v1 refused: reads only"),
            (lambda: host.update_status(json.dumps(cm("a"))), "update ConfigMap.v1 refused: reads only"),
            (lambda: host.patch(kinds.CONFIG_MAP, "default", "a", "merge", "{}"), "patch ConfigMap.v1 refused: reads only"),
            (lambda: host.delete(kinds.DEPLOYMENT, "default", "a"), "delete Deployment.v1.apps refused: reads only"),
            (lambda: host.publish_event((kinds.CONFIG_MAP, "default", "a"), "normal", "R", "A", ""), "an Event refused: reads only"),
        ]:
            with pytest.raises(Forbidden) as e:
                call()
            assert e.value.message == message
        assert host.cache_get(kinds.CONFIG_MAP, "default", "a") is not None
        host.log(LogLevel.INFO, "fine", [])
    assert host.calls == [] and host.events == []
    host.delete(kinds.CONFIG_MAP, "default", "a")


# --- the other kind's functions, and before describe ---


def test_the_other_kinds_functions_are_never_called_so_they_trap():
    composite = Harness(Greetings)
    with pytest.raises(RuntimeError, match="the host called reconcile of a declarative plugin"):
        composite.reconcile(greeting())
    with pytest.raises(RuntimeError, match="the host called released of a declarative plugin"):
        composite.released(greeting())
    with pytest.raises(RuntimeError, match="the host called map_related of a declarative plugin"):
        composite.map_related(kinds.NODE, {"metadata": {"name": "n"}})
    plain = Harness(Plain)
    with pytest.raises(RuntimeError, match=r"the host called sync of a plugin that reconciles itself \(Controller\)"):
        plain.sync(foo(), children=[], related=[])
    with pytest.raises(RuntimeError, match="the host called customize of a plugin that reconciles itself"):
        plain.customize(foo())
    assert plain.finalize(foo()) == DONE, "a Controller's finalize is its own"


def test_declarative_calls_before_describe_and_with_bad_json():
    r = Runner(Greetings, FakeHost())
    with pytest.raises(Other, match="before describe"):
        r.sync("sync", "{}", [], [], False)
    with pytest.raises(Other, match="before describe"):
        r.customize("{}")
    r.describe("{}")
    with pytest.raises(Invalid, match="the parent does not parse"):
        r.sync("sync", "{", [], [], False)
    with pytest.raises(Invalid, match="a child ConfigMap.v1 does not parse"):
        r.sync("sync", json.dumps(greeting()), [(kinds.CONFIG_MAP, ["{"])], [], False)
    with pytest.raises(Invalid, match="the parent does not parse"):
        r.customize("")


def test_runner_sync_answers_json_text():
    r = Runner(Greetings, FakeHost())
    r.describe("{}")
    encoded = r.sync("sync", json.dumps(greeting()), [(kinds.CONFIG_MAP, [])], [], False)
    assert encoded.status == '{"configMap":"hi-greeting","ready":false}'
    assert [json.loads(c)["metadata"]["name"] for c in encoded.children] == ["hi-greeting"]
    assert (encoded.resync_after_ms, encoded.finalized) == (None, False)
    assert r.sync("finalize", json.dumps(greeting()), [(kinds.CONFIG_MAP, [])], [], True) == Encoded(None, [], None, True)


def test_a_controllers_requeue_after_is_unchanged():
    assert Action.requeue_after(0.0004) == Action(requeue_after_ms=1)


def test_the_readme_shows_greetings_py():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    code = (Path(__file__).resolve().parent / "greetings.py").read_text().split("\n", 2)[2]
    assert f"```python\n# greetings.py\n{code}```" in readme
