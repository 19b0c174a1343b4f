"""Member clusters (contract 0.1.4): the manifest's cluster scope (the `clusters` export), the
context's `cluster`, `clusters` and `in_cluster` (the `fleet` import), and the fake host's
members."""

import pytest

from kubewasm import (
    DONE,
    Cluster,
    ClusterScope,
    CompositeController,
    Context,
    Controller,
    EventType,
    Forbidden,
    Gvk,
    Invalid,
    Manifest,
    Members,
    NotFound,
    ObjectKey,
    PatchType,
    SyncResponse,
    Unavailable,
    kinds,
)
from kubewasm import objects as o
from kubewasm.runtime import Refused, Runner
from kubewasm.testing import FakeHost, Harness

FOO = Gvk("example.com", "v1", "Foo")


def cm(name, ns="default", **data):
    return o.new_object(kinds.CONFIG_MAP, name, ns, data=data)


# --- the manifest ---


def test_members_and_the_default_scope():
    assert Members.NONE.kind == "none" and Members.ALL.kind == "all"
    assert Members.matching("env=prod") == Members("matching", "env=prod")
    assert repr(Members.matching("a=b")) == "Members.matching('a=b')" and repr(Members.ALL) == "Members.ALL"
    m = Manifest("x", "0").primary(FOO)
    assert m.spec.scope == ClusterScope(serve_local=True, serve=Members.NONE, reach=Members.NONE), "the host's own cluster only"
    with pytest.raises(TypeError, match="a member selector is a label selector string"):
        Members.matching(["env=prod"])  # type: ignore[arg-type]


def test_builder_sets_the_scope_in_any_order():
    m = Manifest("x", "0").serve_members(Members.matching("env=prod")).serve_local(False).primary(FOO).reach_members(Members.ALL)
    assert m.for_host().scope == ClusterScope(serve_local=False, serve=Members.matching("env=prod"), reach=Members.ALL)
    with pytest.raises(TypeError, match=r"expected Members.NONE, Members.ALL or Members.matching\(selector\), not 'all'"):
        Manifest("x", "0").reach_members("all")  # type: ignore[arg-type]


class Hub(Controller):
    """Copies its primary ConfigMap into the member clusters it reaches (`mode` picks other
    uses of a named cluster)."""

    settings_defaults = {"serve": None, "reach": "env=prod"}

    def manifest(self):
        m = Manifest("hub", "0.1.0").primary(kinds.CONFIG_MAP).reach_members(Members.matching(self.settings["reach"]))
        if self.settings["serve"] is not None:
            m.serve_members(Members.matching(self.settings["serve"]))
        return m

    def reconcile(self, obj, ctx):
        mode = o.field(obj, "data.mode", "copy")
        if mode == "copy":
            copy = cm(o.name(obj), o.namespace(obj), copied="yes")
            for member in ctx.clusters():
                ctx.in_cluster(member.name).apply(copy)
            ctx.event(obj, EventType.NORMAL, "Copied", "Reconcile", ",".join(c.name for c in ctx.clusters()))
        elif mode.startswith("to:"):
            ctx.in_cluster(mode[3:] or None).apply(cm(o.name(obj) + "-copy", o.namespace(obj)))
        elif mode == "where":
            ctx.apply(cm("here", o.namespace(obj), cluster=str(ctx.cluster()), inside=str(ctx.in_cluster("eu").cluster())))
        elif mode == "hub":
            ctx.in_cluster(None).apply(cm("from-" + str(ctx.cluster()), o.namespace(obj)))
        return DONE


def source(name="config", mode="copy"):
    return cm(name, mode=mode)


# --- the runner and the fake host ---


def test_the_scope_is_what_the_clusters_export_answers():
    h = Harness(Hub, settings={"serve": "tier=edge"})
    assert h.runner.scope() == ClusterScope(True, Members.matching("tier=edge"), Members.matching("env=prod"))
    assert h.host.scope == h.runner.scope(), "the fake host reaches members by it"
    assert Runner(Hub, FakeHost()).scope() == ClusterScope(), "before describe: the host's own cluster only"


def test_writes_land_in_the_members_the_plugin_reaches():
    h = Harness(Hub, objects=[source()])
    eu = h.host.add_member("eu", labels={"env": "prod", "region": "eu"})
    us = h.host.add_member("us", labels={"env": "prod"})
    dev = h.host.add_member("dev", labels={"env": "dev"})
    assert h.reconcile(source()) == DONE
    assert [c.name for c in h.host.clusters()] == ["eu", "us"], "sorted by name, only those within the scope"
    assert h.host.clusters()[0] == Cluster("eu", {"env": "prod", "region": "eu"})
    for member in (eu, us):
        assert member.get(kinds.CONFIG_MAP, "default", "config")["data"] == {"copied": "yes"}
        assert [c.op for c in member.calls] == ["apply"]
    assert dev.calls == [] and h.host.writes() == [], "nothing in a member out of reach, nor in the hub"
    assert [e["note"] for e in h.host.events] == ["eu,us"], "Events stay with the call"


def test_an_unknown_member_is_unavailable_and_one_out_of_reach_forbidden():
    h = Harness(Hub)
    h.host.add_member("dev", labels={"env": "dev"})
    with pytest.raises(Unavailable) as unknown:
        h.reconcile(source(mode="to:mars"))
    assert unknown.value.message == 'cluster "mars" is not engaged by this host now'
    with pytest.raises(Forbidden) as outside:
        h.reconcile(source(mode="to:dev"))
    assert outside.value.message == 'cluster "dev" is not within the plugin\'s clusters (its `clusters` scope)'
    assert h.host.refused == [outside.value.message]
    h.host.add_member("eu", labels={"env": "prod"})
    h.reconcile(source(mode="to:eu"))
    h.host.remove_member("eu")
    with pytest.raises(Unavailable, match="not engaged"):
        h.reconcile(source(mode="to:eu"))


def test_none_names_the_hosts_own_cluster():
    h = Harness(Hub)
    h.reconcile(source(mode="to:"))
    assert h.host.get(kinds.CONFIG_MAP, "default", "config-copy") is not None


def test_a_members_failure_is_its_own():
    h = Harness(Hub)
    eu = h.host.add_member("eu", labels={"env": "prod"})
    us = h.host.add_member("us", labels={"env": "prod"})
    eu.fail("apply", Unavailable("the API server of eu does not answer"))
    with pytest.raises(Unavailable, match="does not answer"):
        h.reconcile(source())
    assert us.calls == [], "the copy into eu came first and failed the call"
    h.reconcile(source())
    assert eu.get(kinds.CONFIG_MAP, "default", "config") is not None and us.get(kinds.CONFIG_MAP, "default", "config") is not None


def test_every_read_and_write_goes_to_the_named_cluster():
    host = FakeHost([cm("a", x="hub")])
    eu = host.add_member("eu", objects=[cm("a", x="eu"), cm("b", x="eu")])
    ctx = Context(host, ObjectKey("default", "a"))
    there = ctx.in_cluster("eu")
    assert ctx.get(kinds.CONFIG_MAP, "default", "a")["data"] == {"x": "hub"}
    assert there.get(kinds.CONFIG_MAP, "default", "a")["data"] == {"x": "eu"}
    assert [o.name(c) for c in there.list(kinds.CONFIG_MAP, "default")] == ["a", "b"]
    assert there.create(cm("c"))["metadata"]["name"] == "c"
    stored = there.get(kinds.CONFIG_MAP, "default", "c")
    stored["data"] = {"y": "1"}
    there.update(stored)
    there.update_status({**there.get(kinds.CONFIG_MAP, "default", "c"), "status": {"ok": True}})
    there.apply_status({**cm("c"), "status": {"more": 1}})
    there.patch(kinds.CONFIG_MAP, "default", "c", {"data": {"z": "2"}})
    there.patch(kinds.CONFIG_MAP, "default", "c", [{"op": "add", "path": "/data/w", "value": "3"}], PatchType.JSON)
    assert eu.get(kinds.CONFIG_MAP, "default", "c")["data"] == {"y": "1", "z": "2", "w": "3"}
    assert eu.get(kinds.CONFIG_MAP, "default", "c")["status"] == {"ok": True, "more": 1}
    there.delete(kinds.CONFIG_MAP, "default", "c")
    with pytest.raises(NotFound):
        there.delete(kinds.CONFIG_MAP, "default", "c")
    assert [c.op for c in eu.calls] == ["create", "update", "update_status", "apply_status", "patch", "patch", "delete", "delete"]
    assert host.calls == [], "nothing written in the hub"
    assert ctx.in_cluster("eu").in_cluster(None).get(kinds.CONFIG_MAP, "default", "a")["data"] == {"x": "hub"}
    assert host.clusters() == [Cluster("eu", {})], "a FakeHost without a scope reaches every member"
    there.event(cm("a"), "Normal", "Seen", "Reconcile")
    there.info("logged")
    assert len(host.events) == 1 and eu.events == [] and host.logs[0][1] == "logged", "Events and logs stay with the call"


def test_list_controlled_and_long_cluster_names_are_refused_in_a_named_cluster():
    host = FakeHost()
    host.add_member("eu")
    ctx = Context(host)
    with pytest.raises(Invalid) as refused:
        ctx.in_cluster("eu").list_controlled(kinds.CONFIG_MAP, "uid-1", "default")
    assert refused.value.message == "list_controlled reads the call's own cluster only: list by label in another"
    with pytest.raises(Invalid, match="list_controlled reads the call's own cluster only"):
        ctx.in_cluster(None).delete_controlled(cm("parent") | {"metadata": {"name": "p", "uid": "u"}}, [(kinds.CONFIG_MAP, True)])
    with pytest.raises(Invalid) as long:
        ctx.in_cluster("é" * 127)
    assert long.value.message == "cluster is 254 bytes; at most 253"
    assert ctx.in_cluster("c" * 253) is not None


# --- a plugin that serves members ---


def test_a_call_in_a_served_member_acts_there():
    h = Harness(Hub, settings={"serve": "tier=edge"})
    edge = h.host.add_member("edge-1", labels={"tier": "edge"}, objects=[source("there", mode="where")])
    h.host.add_member("eu", labels={"env": "prod"})
    assert h.reconcile(ObjectKey("default", "there"), cluster="edge-1") == DONE
    here = edge.get(kinds.CONFIG_MAP, "default", "here")
    assert here["data"] == {"cluster": "edge-1", "inside": "edge-1"}, "ctx.cluster() is the call's, in any context"
    assert h.host.current is None and h.runner.host is h.host, "restored after the call"
    h.reconcile(source(mode="where"))
    assert h.host.get(kinds.CONFIG_MAP, "default", "here")["data"] == {"cluster": "None", "inside": "None"}
    h.reconcile(source(mode="hub"), cluster="edge-1")
    assert h.host.get(kinds.CONFIG_MAP, "default", "from-edge-1") is not None, "in_cluster(None): the host's own"
    h.reconcile(source(mode="to:edge-1"), cluster="edge-1")
    assert edge.get(kinds.CONFIG_MAP, "default", "config-copy") is not None, "naming the call's own cluster"


def test_the_harness_calls_only_clusters_the_plugin_serves():
    h = Harness(Hub)
    h.host.add_member("eu", labels={"env": "prod"})
    with pytest.raises(ValueError, match="does not serve member cluster 'eu'"):
        h.reconcile(source(), cluster="eu")
    with pytest.raises(LookupError, match="no member cluster 'mars'"):
        h.finalize(source(), cluster="mars")

    class Members_Only(Hub):
        def manifest(self):
            return super().manifest().serve_members(Members.ALL).serve_local(False)

    m = Harness(Members_Only)
    m.host.add_member("eu")
    with pytest.raises(ValueError, match="does not serve the host's own cluster"):
        m.reconcile(source())
    assert m.released(source(), cluster="eu") == DONE


class Mirror(CompositeController):
    """A declarative controller reading a member through the fleet, and trying to write there."""

    def manifest(self):
        return Manifest("mirror", "0.1.0").primary(FOO).child(kinds.CONFIG_MAP).reach_members(Members.ALL).metadata_only(kinds.SECRET)

    def sync(self, request):
        remote = self.ctx.in_cluster("eu")
        if o.field(request.parent, "spec.write"):
            remote.create(cm("x"))
        secret = remote.get(kinds.SECRET, "default", "s")
        return SyncResponse(status={"secretData": secret.get("data") if secret else None})


def test_a_declarative_controller_reads_members_and_writes_nowhere():
    h = Harness(Mirror)
    eu = h.host.add_member("eu", objects=[{**o.new_object(kinds.SECRET, "s", "default"), "data": {"k": "dg=="}}])
    parent = o.new_object(FOO, "p", "default")
    assert h.sync(parent).status == {"secretData": None}, "a metadata-only kind is handed as metadata in a member too"
    with pytest.raises(Forbidden, match="create ConfigMap.v1 refused"):
        h.sync({**parent, "spec": {"write": True}})
    assert eu.calls == [] and h.host.refused[-1].startswith("create ConfigMap.v1 refused")


def test_a_member_selector_that_does_not_parse_refuses_the_plugin():
    with pytest.raises(Refused) as refused:
        Harness(Hub, settings={"reach": "env in ("})
    assert str(refused.value) == "manifest field `clusters.reach`: label selector 'env in (': unbalanced '('"
