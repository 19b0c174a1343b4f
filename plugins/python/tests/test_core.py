from datetime import timedelta

import pytest

from kubewasm import (
    DONE,
    Action,
    AlreadyExists,
    Conflict,
    ErrorCode,
    EventType,
    Forbidden,
    Invalid,
    KubewasmError,
    Manifest,
    Mapping,
    NotFound,
    Other,
    PatchType,
    Unavailable,
    Verb,
    kinds,
)
from kubewasm.manifest import Limits, Permission, Rule, Watch


def test_actions():
    assert Action.done() == DONE
    assert DONE.is_done
    assert Action.requeue_after(1.5).requeue_after_ms == 1500
    assert Action.requeue_after(timedelta(minutes=1)) == Action(requeue_after_ms=60000)
    assert not Action.requeue_after(0).is_done
    with pytest.raises(ValueError):
        Action.requeue_after(-1)


def test_requeue_delays_are_seconds_rounded_up_to_whole_milliseconds():
    assert Action.requeue_after(2.5).requeue_after_ms == 2500
    assert Action.requeue_after(1.1).requeue_after_ms == 1100, "no float noise"
    assert Action.requeue_after(0.0004).requeue_after_ms == 1, "a positive delay never becomes 0"
    assert Action.requeue_after(timedelta(microseconds=1001)).requeue_after_ms == 2
    assert Action.requeue_after(1e30).requeue_after_ms == 2**64 - 1, "cut to the WIT's u64"
    assert Action.requeue_after(float("inf")).requeue_after_ms == 2**64 - 1
    with pytest.raises(ValueError):
        Action.requeue_after(float("nan"))


@pytest.mark.parametrize(
    "code,cls",
    [
        ("not-found", NotFound),
        ("already-exists", AlreadyExists),
        ("conflict", Conflict),
        ("forbidden", Forbidden),
        ("invalid", Invalid),
        ("unavailable", Unavailable),
        ("other", Other),
    ],
)
def test_errors_map_codes_to_classes(code, cls):
    e = KubewasmError.from_code(code, "msg")
    assert type(e) is cls
    assert e.code == ErrorCode(code)
    assert e.message == "msg"
    assert str(e) == f"{code}: msg"
    assert isinstance(e, KubewasmError)


def test_error_equality_and_explicit_code():
    assert NotFound("x") == NotFound("x")
    assert NotFound("x") != Conflict("x")
    assert KubewasmError("boom").code is ErrorCode.OTHER
    assert KubewasmError("boom", "conflict").code is ErrorCode.CONFLICT


def test_enums_accept_strings():
    assert Verb.parse("PATCH") is Verb.PATCH
    assert EventType.parse("Warning") is EventType.WARNING
    assert PatchType.parse(PatchType.JSON) is PatchType.JSON
    with pytest.raises(ValueError, match="not a Verb"):
        Verb.parse("escalate")


def test_manifest_builder():
    foo = kinds.DEPLOYMENT
    m = (
        Manifest("demo", "1.2.3")
        .primary(kinds.CONFIG_MAP)
        .primary_selector("app=demo")
        .owns(foo)
        .watches(kinds.SECRET, Mapping.label("owner"), "team=a")
        .watches(kinds.NODE)
        .finalizer("example.com/cleanup")
        .resync(timedelta(minutes=5))
        .max_concurrency(3)
        .limits(deadline_ms=2000, memory_bytes=96 << 20)
        .permission(foo, ["create", Verb.PATCH], namespaces=["a"])
        .status_permission(kinds.CONFIG_MAP, "patch")
    )
    s = m.spec
    assert (s.name, s.version, s.primary, s.primary_selector) == ("demo", "1.2.3", kinds.CONFIG_MAP, "app=demo")
    assert s.owns == [foo]
    assert s.watches == [Watch(kinds.SECRET, Mapping("label", "owner"), "team=a"), Watch(kinds.NODE, Mapping.map_related(), None)]
    assert s.finalizer == "example.com/cleanup"
    assert s.resync_seconds == 300
    assert s.max_concurrency == 3
    assert s.limits == Limits(2000, 96 << 20)
    assert s.permissions == [
        Permission(foo, [Verb.CREATE, Verb.PATCH], None, ["a"]),
        Permission(kinds.CONFIG_MAP, [Verb.PATCH], "status", []),
    ]


def test_manifest_defaults():
    s = Manifest("x", "0").spec
    assert s.primary is None
    assert s.max_concurrency == 1
    assert s.limits == Limits(None, None)
    assert s.resync_seconds is None
    assert s.metadata_only == [], "every kind handed whole"
    with pytest.raises(ValueError):
        Manifest("x", "0").permission(kinds.POD, ["fly"])


def test_manifest_rules():
    m = (
        Manifest("x", "0")
        .primary(kinds.NAMESPACE)
        .grant_named(kinds.CONFIG_MAP, ["get", Verb.UPDATE], ["kube-system"], ["cluster-info"])
        .bind_cluster_role("edit")
        .rule(kinds.POD, "eviction", "create")
        .rule(kinds.SECRET, None, ["deletecollection"], ["a"])
    )
    assert m.spec.rules == [
        Rule(kinds.CONFIG_MAP, ["get", "update"], None, ["kube-system"], ["cluster-info"]),
        Rule(kinds.CLUSTER_ROLE, ["bind"], None, [], ["edit"]),
        Rule(kinds.POD, ["create"], "eviction", [], []),
        Rule(kinds.SECRET, ["deletecollection"], None, ["a"], []),
    ]
    assert m.spec.permissions == [], "rules are not permissions"
    with pytest.raises(ValueError, match="not an RBAC verb"):
        Manifest("x", "0").rule(kinds.POD, None, ["*"])


def test_manifest_metadata_only_kinds():
    m = Manifest("x", "0").primary(kinds.NAMESPACE).owns(kinds.POD).watches(kinds.SECRET).metadata_only(kinds.POD).metadata_only(kinds.SECRET)
    assert m.spec.metadata_only == [kinds.POD, kinds.SECRET]
    assert m.for_host().metadata_only == [kinds.POD, kinds.SECRET]
    assert m.spec.owns == [kinds.POD], "declaring a kind metadata-only owns nothing"


def test_finalizer_adds_a_patch_grant_on_the_primary_for_the_host():
    # The finalizer first, the primary after: the order of the builder calls does not matter.
    m = Manifest("x", "0").finalizer("example.com/cleanup").primary(kinds.CONFIG_MAP).status_permission(kinds.CONFIG_MAP, ["patch"])
    assert m.for_host().permissions == [
        Permission(kinds.CONFIG_MAP, [Verb.PATCH], "status", []),
        Permission(kinds.CONFIG_MAP, [Verb.PATCH], None, []),
    ]
    assert len(m.spec.permissions) == 1, "the builder's spec is left as written"
    granted = Manifest("x", "0").primary(kinds.CONFIG_MAP).finalizer("example.com/cleanup").permission(kinds.CONFIG_MAP, ["create", "patch"])
    assert granted.for_host().permissions == [Permission(kinds.CONFIG_MAP, [Verb.CREATE, Verb.PATCH], None, [])]
    assert Manifest("x", "0").primary(kinds.CONFIG_MAP).for_host().permissions == [], "no finalizer, no grant"


def test_owned_kinds_say_which_may_be_deleted():
    m = (
        Manifest("x", "0")
        .primary(kinds.CONFIG_MAP)
        .owns(kinds.DEPLOYMENT)
        .owns(kinds.SECRET)
        .owns(kinds.SERVICE)
        .permission(kinds.DEPLOYMENT, ["patch", "delete"])
        .status_permission(kinds.SECRET, ["delete"])
    )
    assert m.owned() == [(kinds.DEPLOYMENT, True), (kinds.SECRET, False), (kinds.SERVICE, False)]
