"""The Kubernetes sample-controller as a kubewasm plugin, in Python.

A `Foo` (samplecontroller.k8s.io/v1alpha1) asks for an nginx Deployment named
`spec.deploymentName` with `spec.replicas` replicas (default 1). The controller applies that
Deployment, owned by the Foo, and reports the Deployment's available replicas and the Foo's
observed generation in the Foo's status. A Deployment of that name that the Foo does not control
is left alone, with a Warning Event on the Foo.
"""

from kubewasm import Action, Context, Controller, EventType, Gvk, Manifest, Object, kinds
from kubewasm import objects as o

FOO = Gvk("samplecontroller.k8s.io", "v1alpha1", "Foo")


class SampleController(Controller):
    def manifest(self) -> Manifest:
        return (
            Manifest("sample-controller", "0.1.0")
            .primary(FOO)
            .owns(kinds.DEPLOYMENT)
            .permission(kinds.DEPLOYMENT, ["create", "patch"])
            .status_permission(FOO, ["patch"])
            # Parse only what is read: a Foo's spec, a Deployment's available replicas (and,
            # of both, the metadata, which every object keeps).
            .reads_fields(FOO, "spec")
            .reads_fields(kinds.DEPLOYMENT, "status.availableReplicas")
            .max_concurrency(2)
        )

    def reconcile(self, foo: Object, ctx: Context) -> Action:
        namespace, foo_name = o.namespace(foo), o.name(foo)
        name = o.field(foo, "spec.deploymentName")
        if not name:
            ctx.event(foo, EventType.WARNING, "InvalidSpec", "Reconcile", "spec.deploymentName must be set")
            return Action.done()

        existing = ctx.get(kinds.DEPLOYMENT, namespace, name)
        if existing is not None and not o.is_controlled_by(existing, foo):
            note = f'Resource "{name}" already exists and is not managed by Foo'
            ctx.event(foo, EventType.WARNING, "ErrResourceExists", "Reconcile", note)
            return Action.done()

        replicas = o.field(foo, "spec.replicas")
        labels = {"app": "nginx", "controller": foo_name}
        deployment = ctx.apply(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "ownerReferences": [o.controller_owner_ref(foo)],
                },
                "spec": {
                    "replicas": 1 if replicas is None else replicas,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]},
                    },
                },
            }
        )

        ctx.apply_status(
            o.status_object(
                foo,
                {
                    "availableReplicas": o.field(deployment, "status.availableReplicas", 0),
                    "observedGeneration": o.generation(foo),
                },
            )
        )
        return Action.done()
