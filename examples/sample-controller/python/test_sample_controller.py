"""Unit tests of the sample-controller's logic under plain CPython: `pytest` in this directory
(with the SDK installed: `pip install ../../../plugins/python`)."""

import pytest
from sample_controller import FOO, SampleController

from kubewasm import DONE, EventType, Forbidden, kinds
from kubewasm.testing import Harness


def foo(**spec):
    return {
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "metadata": {"name": "example-foo", "namespace": "default", "uid": "foo-uid", "generation": 3},
        "spec": spec,
    }


def expected_deployment(replicas):
    labels = {"app": "nginx", "controller": "example-foo"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "ownerReferences": [
                {
                    "apiVersion": "samplecontroller.k8s.io/v1alpha1",
                    "kind": "Foo",
                    "name": "example-foo",
                    "uid": "foo-uid",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}},
        },
    }


def expected_status(available, generation=3):
    return {
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "metadata": {"name": "example-foo", "namespace": "default"},
        "status": {"availableReplicas": available, "observedGeneration": generation},
    }


def test_manifest():
    m = Harness(SampleController).manifest
    assert (m.name, m.version, m.primary, m.owns, m.max_concurrency) == ("sample-controller", "0.1.0", FOO, [kinds.DEPLOYMENT], 2)
    assert [(p.resource, p.subresource, [v.value for v in p.verbs]) for p in m.permissions] == [
        (kinds.DEPLOYMENT, None, ["create", "patch"]),
        (FOO, "status", ["patch"]),
    ]
    assert m.watches == [] and m.finalizer is None


def test_creates_deployment_and_status():
    f = foo(deploymentName="web", replicas=2)
    h = Harness(SampleController, objects=[f])
    assert h.reconcile(f) == DONE
    assert h.host.applied() == [expected_deployment(2)]
    assert h.host.status_applied() == [expected_status(0)]
    assert all(c.force for c in h.host.calls)
    assert h.host.events == []


def test_replicas_default_to_one_and_zero_is_kept():
    h = Harness(SampleController, objects=[foo()])
    h.reconcile(foo(deploymentName="web"))
    h.reconcile(foo(deploymentName="web", replicas=0))
    assert [d["spec"]["replicas"] for d in h.host.applied()] == [1, 0]


def test_status_reports_available_replicas_of_the_applied_deployment():
    f = foo(deploymentName="web", replicas=3)
    owned = expected_deployment(3) | {"status": {"availableReplicas": 2}}
    h = Harness(SampleController, objects=[f, owned])
    h.reconcile(f)
    assert h.host.status_applied() == [expected_status(2)]


@pytest.mark.parametrize("spec", [{}, {"deploymentName": ""}, {"deploymentName": None}])
def test_missing_deployment_name_is_a_warning(spec):
    h = Harness(SampleController)
    assert h.reconcile(foo(**spec)) == DONE
    assert h.host.calls == []
    assert [(e["event_type"], e["reason"], e["action"], e["note"]) for e in h.host.events] == [
        (EventType.WARNING, "InvalidSpec", "Reconcile", "spec.deploymentName must be set")
    ]
    assert h.host.events[0]["regarding"] == {"resource": FOO, "namespace": "default", "name": "example-foo"}


@pytest.mark.parametrize(
    "owners",
    [
        [],
        [{"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "other", "uid": "other-uid", "controller": True}],
        [{"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "example-foo", "uid": "foo-uid"}],
    ],
)
def test_foreign_deployment_is_left_alone(owners):
    f = foo(deploymentName="web")
    taken = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default", "ownerReferences": owners}}
    h = Harness(SampleController, objects=[f, taken])
    assert h.reconcile(f) == DONE
    assert h.host.calls == []
    assert [(e["event_type"], e["reason"], e["action"], e["note"]) for e in h.host.events] == [
        (EventType.WARNING, "ErrResourceExists", "Reconcile", 'Resource "web" already exists and is not managed by Foo')
    ]


def test_host_errors_propagate():
    h = Harness(SampleController)
    h.host.fail("apply_status", Forbidden("no"))
    with pytest.raises(Forbidden):
        h.reconcile(foo(deploymentName="web"))
