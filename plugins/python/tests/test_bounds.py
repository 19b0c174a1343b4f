"""The sizes the host takes, refused by the SDK before the call with the host's own message."""

import json

import pytest

from kubewasm import Context, EventType, Gvk, Invalid, kinds
from kubewasm import objects as o
from kubewasm.bounds import cut
from kubewasm.testing import FakeHost

HOST_CALLS = {
    "cache_get",
    "cache_list",
    "cache_list_controlled",
    "apply",
    "apply_status",
    "create",
    "update",
    "update_status",
    "patch",
    "delete",
    "publish_event",
}


class NoCalls(FakeHost):
    """A host that fails the test when it is reached: every refusal here comes first."""

    def __getattribute__(self, name):
        if name in HOST_CALLS:

            def called(*args):
                raise AssertionError(f"the host was called ({name})")

            return called
        return super().__getattribute__(name)


@pytest.fixture
def ctx():
    return Context(NoCalls())


def refused(call, *args):
    with pytest.raises(Invalid) as raised:
        call(*args)
    return raised.value.message


def test_names_namespaces_and_kinds(ctx):
    assert refused(ctx.get, kinds.CONFIG_MAP, "ns", "a" * 254) == "name is 254 bytes; at most 253"
    assert refused(ctx.get, kinds.CONFIG_MAP, "n" * 64, "a") == "namespace is 64 bytes; at most 63"
    assert refused(ctx.get, kinds.CONFIG_MAP, "ns", "é" * 127) == "name is 254 bytes; at most 253", "bytes, not characters"
    assert refused(ctx.delete, kinds.CONFIG_MAP, "ns", "a" * 254) == "name is 254 bytes; at most 253"
    assert refused(ctx.list, Gvk("g" * 254, "v1", "K")) == "group is 254 bytes; at most 253"
    assert refused(ctx.list, Gvk("", "v" * 64, "K")) == "version is 64 bytes; at most 63"
    assert refused(ctx.list, Gvk("", "v1", "K" * 64)) == "kind is 64 bytes; at most 63"
    assert refused(ctx.list, kinds.CONFIG_MAP, "n" * 64) == "namespace is 64 bytes; at most 63"
    assert refused(ctx.list, kinds.CONFIG_MAP, None, "a" * 4097) == "label selector is 4097 bytes; at most 4096"
    assert refused(ctx.list_controlled, kinds.CONFIG_MAP, "u" * 254) == "owner is 254 bytes; at most 253"
    assert refused(ctx.list_controlled, kinds.CONFIG_MAP, "u", "n" * 64) == "namespace is 64 bytes; at most 63", "the namespace first, as the host checks"
    assert refused(ctx.list_controlled, Gvk("", "v1", "K" * 64), "u") == "kind is 64 bytes; at most 63"


def test_values_at_the_bound_reach_the_host():
    host = FakeHost()
    ctx = Context(host)
    assert ctx.get(Gvk("g" * 253, "v" * 63, "K" * 63), "n" * 63, "a" * 253) is None
    assert ctx.list(kinds.CONFIG_MAP, None, "a" * 63) == []
    assert ctx.list_controlled(kinds.CONFIG_MAP, "u" * 253, "n" * 63) == []
    ctx.event(o.new_object(kinds.CONFIG_MAP, "a" * 253, "ns"), EventType.NORMAL, "R" * 128, "A" * 128, "n" * 1024)
    assert len(host.events) == 1


def test_objects_and_patch_bodies(ctx):
    big = o.new_object(kinds.CONFIG_MAP, "a", "ns", data={"k": "x" * (3 << 20)})
    size = len(json.dumps(big, separators=(",", ":")))
    for call in (ctx.apply, ctx.apply_status, ctx.create, ctx.update, ctx.update_status):
        assert refused(call, big) == f"object is {size} bytes; at most 3145728"
    body = {"data": {"k": "x" * (3 << 20)}}
    size = len(json.dumps(body, separators=(",", ":")))
    assert refused(ctx.patch, kinds.CONFIG_MAP, "ns", "a", body) == f"patch body is {size} bytes; at most 3145728"
    assert refused(ctx.patch, kinds.CONFIG_MAP, "ns", "a", "x" * (3 << 20) + "é") == "patch body is 3145730 bytes; at most 3145728"
    assert refused(ctx.patch, kinds.CONFIG_MAP, "ns", "a" * 254, {}) == "name is 254 bytes; at most 253"


def test_event_texts(ctx):
    cm = o.new_object(kinds.CONFIG_MAP, "a", "ns")
    assert refused(ctx.event, cm, EventType.NORMAL, "", "Reconcile") == "event reason must not be empty"
    assert refused(ctx.event, cm, EventType.NORMAL, "Made", "") == "event action must not be empty"
    assert refused(ctx.event, cm, EventType.NORMAL, "R" * 129, "A") == "event reason is 129 bytes; at most 128"
    assert refused(ctx.event, cm, EventType.NORMAL, "R", "A" * 129) == "event action is 129 bytes; at most 128"
    assert refused(ctx.event, cm, EventType.NORMAL, "R", "A", "n" * 1025) == "event note is 1025 bytes; at most 1024"
    long_name = o.new_object(kinds.CONFIG_MAP, "a" * 254, "ns")
    assert refused(ctx.event, long_name, EventType.NORMAL, "R", "A") == "name is 254 bytes; at most 253"


def test_cut_keeps_whole_characters():
    assert cut("short") == "short"
    assert cut("x" * 70_000) == "x" * 65_536
    assert cut("€" * 30_000) == "€" * 21_845, "65 535 bytes: the 3-byte character at 65 536 is dropped whole"
