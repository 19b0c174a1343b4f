from types import MappingProxyType

from kubewasm import Gvk, ObjectKey, kinds
from kubewasm import objects as o

FOO = Gvk("samplecontroller.k8s.io", "v1alpha1", "Foo")


def foo(**meta):
    return {
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "metadata": {"name": "example", "namespace": "default", "uid": "u-1", "generation": 4, **meta},
        "spec": {"deploymentName": "web", "replicas": 0},
    }


def test_identity():
    f = foo()
    assert o.name(f) == "example"
    assert o.namespace(f) == "default"
    assert o.uid(f) == "u-1"
    assert o.generation(f) == 4
    assert o.key(f) == ObjectKey("default", "example")
    assert o.gvk(f) == FOO
    assert o.object_ref(f) == (FOO, "default", "example")


def test_missing_metadata_reads_as_empty():
    bare = {"apiVersion": "v1", "kind": "Node"}
    assert o.name(bare) == ""
    assert o.namespace(bare) is None
    assert o.uid(bare) is None
    assert o.labels(bare) == {}
    assert o.owner_references(bare) == []
    assert o.key(bare) == ObjectKey(None, "")


def test_gvk():
    assert Gvk.from_api_version("apps/v1", "Deployment") == kinds.DEPLOYMENT
    assert Gvk.from_api_version("v1", "Node") == kinds.NODE
    assert kinds.NODE.api_version == "v1"
    assert kinds.DEPLOYMENT.api_version == "apps/v1"
    assert str(kinds.DEPLOYMENT) == "Deployment.v1.apps"
    assert str(kinds.NODE) == "Node.v1"


def test_new_object():
    cm = o.new_object(kinds.CONFIG_MAP, "c", "ns", data={"a": "b"})
    assert cm == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}, "data": {"a": "b"}}
    node = o.new_object(kinds.NODE, "n1")
    assert "namespace" not in node["metadata"]


def test_field():
    f = foo()
    assert o.field(f, "spec.deploymentName") == "web"
    assert o.field(f, "spec.replicas", 1) == 0  # present zero is not missing
    assert o.field(f, "spec.missing", 7) == 7
    assert o.field(f, "spec.deploymentName.deeper") is None
    assert o.field({"a": None}, "a", "d") == "d"
    assert o.field({"a": [{"b": 1}]}, ["a", 0, "b"]) == 1
    assert o.field({"a": [1]}, ["a", 3]) is None
    annotated = {"metadata": {"annotations": {"example.com/x": "y"}}}
    assert o.field(annotated, ["metadata", "annotations", "example.com/x"]) == "y"
    # Any Mapping, not only the dicts JSON parses into; an index into a mapping is no key.
    assert o.field(MappingProxyType({"a": MappingProxyType({"b": 2})}), "a.b") == 2
    assert o.field({"a": {0: "x"}}, ["a", 0], "d") == "d"
    assert o.field({"a": ["x"]}, "a.0", "d") == "d"


def test_set_field():
    obj = {}
    o.set_field(obj, "spec.template.replicas", 3)
    assert obj == {"spec": {"template": {"replicas": 3}}}


def test_labels_and_annotations():
    obj = {"metadata": {}}
    o.set_label(obj, "app", "web")
    o.set_annotation(obj, "a/b", "c")
    assert o.label(obj, "app") == "web"
    assert o.label(obj, "nope", "d") == "d"
    assert o.annotation(obj, "a/b") == "c"
    assert o.has_annotation(obj, "a/b")
    assert not o.has_annotation(obj, "x")
    assert o.has_annotation({"metadata": {"annotations": {"k": ""}}}, "k"), "an empty value is still present"


def test_controller_owner_ref():
    assert o.controller_owner_ref(foo()) == {
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "name": "example",
        "uid": "u-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert o.owner_ref(foo()) == {"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "example", "uid": "u-1"}


def test_is_controlled_by():
    owner = foo()
    child = {"metadata": {"ownerReferences": [o.controller_owner_ref(owner)]}}
    assert o.is_controlled_by(child, owner)
    assert o.controller_ref(child)["uid"] == "u-1"
    other = foo(uid="u-2")
    assert not o.is_controlled_by(child, other)
    not_controller = {"metadata": {"ownerReferences": [o.owner_ref(owner)]}}
    assert not o.is_controlled_by(not_controller, owner)
    assert not o.is_controlled_by({"metadata": {}}, owner)
    assert not o.is_controlled_by(child, {"metadata": {}}), "an owner without uid controls nothing"


def test_finalizers():
    obj = {"metadata": {}}
    assert o.add_finalizer(obj, "example.com/cleanup")
    assert not o.add_finalizer(obj, "example.com/cleanup")
    assert o.has_finalizer(obj, "example.com/cleanup")
    assert o.remove_finalizer(obj, "example.com/cleanup")
    assert not o.remove_finalizer(obj, "example.com/cleanup")
    assert o.finalizers(obj) == []
    assert not o.is_deleting(obj)
    assert o.is_deleting({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}})


def test_conditions():
    node = {"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}]}}
    assert o.condition_status(node, "Ready") == "True"
    assert o.is_condition_true(node, "Ready")
    assert not o.is_condition_true(node, "DiskPressure")
    assert o.condition_status(node, "Missing") is None
    assert o.get_condition(node, "DiskPressure") == {"type": "DiskPressure", "status": "False"}
    assert o.conditions({}) == []


def test_set_condition_keeps_transition_time_unless_status_changes():
    obj = {}
    assert o.set_condition(obj, "Ready", True, "Applied", "ok", observed_generation=2, now="t1")
    cond = o.get_condition(obj, "Ready")
    assert cond == {"type": "Ready", "status": "True", "reason": "Applied", "message": "ok", "observedGeneration": 2, "lastTransitionTime": "t1"}
    assert not o.set_condition(obj, "Ready", "True", "Applied", "ok", observed_generation=2, now="t2")
    assert o.get_condition(obj, "Ready")["lastTransitionTime"] == "t1"
    assert o.set_condition(obj, "Ready", "True", "Applied", "changed message", observed_generation=2, now="t3")
    assert o.get_condition(obj, "Ready")["lastTransitionTime"] == "t1"
    assert o.set_condition(obj, "Ready", False, "Failed", now="t4")
    assert o.get_condition(obj, "Ready")["lastTransitionTime"] == "t4"
    assert o.remove_condition(obj, "Ready")
    assert not o.remove_condition(obj, "Ready")


def test_set_condition_rejects_bad_status():
    import pytest

    with pytest.raises(ValueError):
        o.set_condition({}, "Ready", "yes", "r")


def test_status_object():
    f = foo()
    f["status"] = {"old": 1}
    body = o.status_object(f, {"availableReplicas": 2})
    assert body == {
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "metadata": {"name": "example", "namespace": "default"},
        "status": {"availableReplicas": 2},
    }
    assert o.status(f) == {"old": 1}
    assert o.status({}) == {}


def test_sorted_keys():
    objs = [{"metadata": {"name": "b"}}, {"metadata": {"name": "a", "namespace": "x"}}, {"metadata": {"name": "a"}}]
    assert o.sorted_keys(objs) == [ObjectKey(None, "a"), ObjectKey(None, "b"), ObjectKey("x", "a")]
