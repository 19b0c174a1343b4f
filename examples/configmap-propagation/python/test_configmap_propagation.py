"""Unit tests of configmap-propagation's logic under plain CPython: `pytest` in this directory
(with the SDK installed: `pip install ../../../plugins/python`). The shared table tests of the
built component are in ../cases (`make cases`)."""

import pytest
from configmap_propagation import CONFIG_MAP_PROPAGATION, ConfigMapPropagation

from kubewasm import ChildRule, ChildSelector, Composition, LogLevel, Mapping, RelatedRule, SyncResponse, UpdateStrategy, kinds
from kubewasm import objects as o
from kubewasm.manifest import Watch
from kubewasm.testing import Harness

SOURCE_DATA = {"some": "value", "other": "value"}


def propagation(targets=("one", "two", "three"), name="settings-propagation", uid="cmp-uid", version="v1", **spec):
    return {
        "apiVersion": "examples.metacontroller.io/v1alpha1",
        "kind": "ConfigMapPropagation",
        "metadata": {"name": name, "uid": uid, "generation": 1, "labels": {"version": version}},
        "spec": {"sourceName": "settings", "sourceNamespace": "original", "targetNamespaces": list(targets)} | spec,
    }


def source(data=None, namespace="original", name="settings"):
    return o.new_object(kinds.CONFIG_MAP, name, namespace, data=SOURCE_DATA if data is None else data)


def copy(namespace, data=None):
    return o.new_object(kinds.CONFIG_MAP, "settings", namespace, data=SOURCE_DATA if data is None else data)


def owned_copy(namespace, parent, data=None):
    """A copy as the host leaves it: controlled by the propagation, with the generated label."""
    child = copy(namespace, data)
    child["metadata"] |= {
        "uid": f"copy-{namespace}-uid",
        "labels": {"kubewasm.io/controller-uid": o.uid(parent)},
        "ownerReferences": [o.controller_owner_ref(parent)],
    }
    return child


def test_manifest():
    m = Harness(ConfigMapPropagation).manifest
    assert (m.name, m.version, m.primary, m.primary_selector) == ("configmap-propagation", "0.1.0", CONFIG_MAP_PROPAGATION, "version=v1")
    assert m.owns == [kinds.CONFIG_MAP]
    assert m.composition == Composition([ChildRule(kinds.CONFIG_MAP, UpdateStrategy.IN_PLACE)], ChildSelector.GENERATED)
    assert m.watches == [Watch(kinds.CONFIG_MAP, Mapping.map_related())]
    # The host grants what managing the copies takes; nothing else is asked for.
    assert (m.permissions, m.rules, m.finalizer) == ([], [], None)


def test_customize_names_the_source():
    h = Harness(ConfigMapPropagation)
    assert h.customize(propagation()) == [RelatedRule(kinds.CONFIG_MAP, "original", ["settings"])]


def test_copies_into_every_target_namespace_in_order():
    parent = propagation(["three", "one", "two"])
    # Beside the source, ConfigMaps that customize's rule does not select.
    h = Harness(ConfigMapPropagation, objects=[source(), source({"not": "copied"}, name="other"), source({"not": "copied"}, namespace="elsewhere")])
    assert h.sync(parent) == SyncResponse(
        status={"expected_copies": 3, "actual_copies": 0},
        children=[copy("three"), copy("one"), copy("two")],
    )
    assert h.host.calls == [] and h.host.refused == []


def test_no_source_no_copies():
    parent = propagation()
    h = Harness(ConfigMapPropagation, objects=[owned_copy("one", parent)])
    assert h.sync(parent) == SyncResponse(status={"expected_copies": 3, "actual_copies": 1}, children=[])
    assert (LogLevel.INFO, "no source ConfigMap: no copies", {"propagation": "settings-propagation", "source": "original/settings"}) in h.host.logs


def test_status_counts_the_copies_it_was_handed():
    parent = propagation()
    other = propagation(name="other", uid="other-uid")
    # Its own copies in every namespace (it is cluster-scoped), not another propagation's.
    store = [source(), owned_copy("one", parent), owned_copy("two", parent), owned_copy("three", other)]
    h = Harness(ConfigMapPropagation, objects=store)
    assert h.sync(parent).status == {"expected_copies": 3, "actual_copies": 2}
    assert h.sync(parent, children=[copy("one")], related=[source()]).status == {"expected_copies": 3, "actual_copies": 1}


def test_copies_follow_the_source_data():
    parent = propagation(["one"])
    h = Harness(ConfigMapPropagation)
    stale = owned_copy("one", parent)
    answer = h.sync(parent, children=[stale], related=[source({"some": "new-value"})])
    assert answer.children == [copy("one", {"some": "new-value"})]


def test_a_source_without_data_gives_empty_copies():
    h = Harness(ConfigMapPropagation)
    empty = o.new_object(kinds.CONFIG_MAP, "settings", "original")
    assert h.sync(propagation(["one"]), related=[empty]).children == [copy("one", {})]


def test_no_targets_no_copies():
    h = Harness(ConfigMapPropagation, objects=[source()])
    assert h.sync(propagation([])) == SyncResponse(status={"expected_copies": 0, "actual_copies": 0}, children=[])


@pytest.mark.parametrize("missing", ["sourceName", "sourceNamespace"])
def test_without_a_source_name_nothing_is_asked_or_copied(missing):
    # The CRD requires them; a parent without one is answered, not a fault.
    parent = propagation()
    del parent["spec"][missing]
    h = Harness(ConfigMapPropagation, objects=[source()])
    assert h.customize(parent) == []
    assert h.sync(parent) == SyncResponse(status={"expected_copies": 3, "actual_copies": 0}, children=[])


def test_without_target_namespaces_there_is_nothing_to_expect():
    parent = propagation()
    del parent["spec"]["targetNamespaces"]
    h = Harness(ConfigMapPropagation, objects=[source()])
    assert h.sync(parent) == SyncResponse(status={"expected_copies": 0, "actual_copies": 0}, children=[])
