"""Unit tests of fleet propagation under plain CPython, against the fake host and its member
clusters: `pytest` in this directory (with the SDK installed: `pip install ../../../plugins/python`)."""

import pytest
from fleet_propagation import FINALIZER, PROPAGATE, SOURCE, FleetPropagation

from kubewasm import DONE, Action, EventType, Forbidden, Members, Unavailable, kinds
from kubewasm.testing import Harness


def source(**data):
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "apps", "uid": "source-uid", "labels": {PROPAGATE: "true"}},
        "data": data or {"color": "blue"},
    }


def copy(**data):
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "apps", "labels": {SOURCE: "settings"}},
        "data": data or {"color": "blue"},
    }


def fleet(settings=None):
    """A hub with two prod members and a dev one."""
    h = Harness(FleetPropagation, settings=settings, objects=[source()])
    members = {name: h.host.add_member(name, labels={"env": env}) for name, env in (("eu", "prod"), ("us", "prod"), ("dev", "dev"))}
    return h, members


def test_manifest():
    m = Harness(FleetPropagation).manifest
    assert (m.name, m.primary, m.primary_selector, m.finalizer) == ("fleet-propagation", kinds.CONFIG_MAP, f"{PROPAGATE}=true", FINALIZER)
    assert m.scope.reach == Members.matching("env=prod") and m.scope.serve == Members.NONE and m.scope.serve_local
    assert [(p.resource, [v.value for v in p.verbs]) for p in m.permissions] == [(kinds.CONFIG_MAP, ["create", "patch", "delete"])]
    assert Harness(FleetPropagation, settings={"members": "region=eu"}).manifest.scope.reach == Members.matching("region=eu")


def test_copies_into_every_member_it_reaches():
    h, members = fleet()
    assert h.reconcile(source()) == DONE
    for name in ("eu", "us"):
        assert members[name].applied() == [copy()], name
    assert members["dev"].calls == [], "dev is outside env=prod"
    assert h.host.writes() == [], "nothing written in the hub"
    (event,) = h.host.events
    assert (event["event_type"], event["reason"], event["note"]) == (EventType.NORMAL, "Propagated", "copied to 2 member cluster(s): eu,us")


def test_a_member_that_does_not_answer_is_tried_again_without_holding_up_the_others():
    h, members = fleet()
    members["eu"].fail("apply", Unavailable("the API server of eu does not answer"))
    assert h.reconcile(source()) == Action.requeue_after(30)
    assert members["eu"].get(kinds.CONFIG_MAP, "apps", "settings") is None
    assert members["us"].get(kinds.CONFIG_MAP, "apps", "settings")["data"] == {"color": "blue"}
    assert h.host.events[0]["note"] == "copied to 1 member cluster(s): us"
    assert any("cluster eu did not answer: unavailable: the API server of eu does not answer" in message for _, message, _ in h.host.logs)
    assert h.reconcile(source()) == DONE, "once eu answers"
    assert members["eu"].get(kinds.CONFIG_MAP, "apps", "settings") is not None


def test_another_failure_fails_the_call_naming_the_member():
    h, members = fleet()
    members["us"].fail("apply", Forbidden("RBAC says no"))
    with pytest.raises(Forbidden) as raised:
        h.reconcile(source())
    assert raised.value.message == "cluster us: RBAC says no"


def test_a_new_member_and_changed_data():
    h, members = fleet(settings={"members": "env in (prod,dev)"})
    h.reconcile(source())
    ap = h.host.add_member("ap", labels={"env": "prod"})
    h.reconcile(source(color="red"))
    assert ap.get(kinds.CONFIG_MAP, "apps", "settings")["data"] == {"color": "red"}
    assert members["dev"].get(kinds.CONFIG_MAP, "apps", "settings")["data"] == {"color": "red"}
    assert h.host.events[-1]["note"] == "copied to 4 member cluster(s): ap,dev,eu,us"


def test_no_members_no_copies():
    h = Harness(FleetPropagation, objects=[source()])
    assert h.reconcile(source()) == DONE
    assert h.host.events[0]["note"] == "copied to 0 member cluster(s): "


def test_finalize_deletes_the_copies_and_a_missing_one_is_fine():
    h, members = fleet()
    h.reconcile(source())
    members["us"].objects.clear()  # deleted by someone else
    assert h.finalize(source()) == DONE
    assert members["eu"].get(kinds.CONFIG_MAP, "apps", "settings") is None
    assert [c.op for c in members["us"].calls] == ["apply", "delete"]


def test_finalize_tries_again_while_a_member_does_not_answer():
    h, members = fleet()
    h.reconcile(source())
    members["eu"].fail("delete", Unavailable("eu is down"))
    assert h.finalize(source()) == Action.requeue_after(30)
    assert members["us"].get(kinds.CONFIG_MAP, "apps", "settings") is None
    assert h.finalize(source()) == DONE
    assert members["eu"].get(kinds.CONFIG_MAP, "apps", "settings") is None
