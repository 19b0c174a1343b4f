"""Unit tests of the reboot coordinator's logic under plain CPython: `pytest` in this directory
(with the SDK installed: `pip install ../../../plugins/python`)."""

import pytest
from reboot_coordinator import REBOOT_NEEDED, REBOOT_NOW, RebootCoordinator

from kubewasm import DONE, Mapping, ObjectKey, PatchType, kinds
from kubewasm.runtime import Refused
from kubewasm.testing import Harness


def node(name, ready=True, needed=False, now=False):
    annotations = {}
    if needed:
        annotations[REBOOT_NEEDED] = "true"
    if now:
        annotations[REBOOT_NOW] = "true"
    conditions = [] if ready is None else [{"type": "Ready", "status": "True" if ready else "False"}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": annotations},
        "status": {"conditions": conditions},
    }


GRANT = {"metadata": {"annotations": {REBOOT_NOW: "true"}}}


def test_manifest():
    m = Harness(RebootCoordinator).manifest
    assert (m.name, m.version, m.primary, m.max_concurrency) == ("reboot-coordinator", "0.1.0", kinds.NODE, 1)
    assert [(w.resource, w.mapping, w.label_selector) for w in m.watches] == [(kinds.NODE, Mapping.map_related(), None)]
    assert [(p.resource, p.subresource, [v.value for v in p.verbs]) for p in m.permissions] == [(kinds.NODE, None, ["patch"])]
    assert m.owns == []


@pytest.mark.parametrize(
    "settings,expected",
    [({}, 1), ({"maxUnavailable": 3}, 3)],
)
def test_settings(settings, expected):
    assert Harness(RebootCoordinator, settings=settings).controller.max_unavailable == expected


@pytest.mark.parametrize("bad", ["2", 1.5, 2.0, 0, -1, True, None, [1]])
def test_invalid_settings_refuse_loading(bad):
    with pytest.raises(Refused, match="maxUnavailable must be an integer of at least 1"):
        Harness(RebootCoordinator, settings={"maxUnavailable": bad})


def test_grants_reboot_when_nothing_is_unavailable():
    nodes = [node("a", needed=True), node("b")]
    h = Harness(RebootCoordinator, objects=nodes)
    assert h.reconcile(nodes[0]) == DONE
    [patch] = h.host.writes("patch")
    assert (patch.resource, patch.namespace, patch.name, patch.patch_type, patch.object) == (kinds.NODE, None, "a", PatchType.MERGE, GRANT)
    assert h.host.logs and h.host.logs[0][2]["node"] == "a"


@pytest.mark.parametrize(
    "others",
    [
        [node("b", now=True)],  # rebooting
        [node("b", ready=False)],  # not ready
        [node("b", ready=None)],  # no Ready condition
        [node("b", ready=False, now=True)],
    ],
)
def test_waits_while_max_unavailable_reached(others):
    me = node("a", needed=True)
    h = Harness(RebootCoordinator, objects=[me, *others])
    assert h.reconcile(me) == DONE
    assert h.host.calls == []


def test_counts_the_candidate_itself_when_it_is_not_ready():
    me = node("a", needed=True, ready=False)
    h = Harness(RebootCoordinator, objects=[me])
    h.reconcile(me)
    assert h.host.calls == [], "a not-ready node is unavailable, so 1 >= maxUnavailable"


def test_max_unavailable_two():
    nodes = [node("a", needed=True), node("b", now=True), node("c")]
    h = Harness(RebootCoordinator, settings={"maxUnavailable": 2}, objects=nodes)
    h.reconcile(nodes[0])
    assert len(h.host.writes("patch")) == 1


@pytest.mark.parametrize("n", [node("a"), node("a", needed=True, now=True), node("a", now=True)])
def test_nothing_to_do_unless_waiting(n):
    h = Harness(RebootCoordinator, objects=[n])
    assert h.reconcile(n) == DONE
    assert h.host.calls == []


def test_one_at_a_time():
    nodes = [node("a", needed=True), node("b", needed=True)]
    h = Harness(RebootCoordinator, objects=nodes)
    h.reconcile(ObjectKey(None, "a"))
    h.reconcile(ObjectKey(None, "b"))  # sees a's reboot-now in the (fake) cache
    assert [c.name for c in h.host.writes("patch")] == ["a"]


def test_map_related_returns_waiting_nodes_sorted():
    nodes = [node("c", needed=True), node("a", needed=True), node("b", needed=True, now=True), node("d")]
    h = Harness(RebootCoordinator, objects=nodes)
    assert h.map_related(kinds.NODE, node("d")) == [ObjectKey(None, "a"), ObjectKey(None, "c")]
    assert Harness(RebootCoordinator).map_related(kinds.NODE, node("x")) == []
