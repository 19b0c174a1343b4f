// The Kubernetes sample-controller as a kubewasm plugin, in JavaScript.
//
// A `Foo` (samplecontroller.k8s.io/v1alpha1) asks for an nginx Deployment named
// `spec.deploymentName` with `spec.replicas` replicas (default 1). The controller applies that
// Deployment, owned by the Foo, and reports the Deployment's available replicas and the Foo's
// observed generation in the Foo's status. A Deployment of that name that the Foo does not
// control is left alone, with a Warning Event on the Foo.

import { Action, Controller, Manifest, gvk, kinds, objects as o } from '@kubewasm/sdk';

export const FOO = gvk('samplecontroller.k8s.io', 'v1alpha1', 'Foo');

export default class SampleController extends Controller {
  manifest() {
    // readsFields: parse only what is read, a Foo's spec and a Deployment's available replicas
    // (and, of both, the metadata, which every object keeps).
    return new Manifest('sample-controller', '0.1.0')
      .primary(FOO)
      .owns(kinds.DEPLOYMENT)
      .permission(kinds.DEPLOYMENT, ['create', 'patch'])
      .statusPermission(FOO, ['patch'])
      .readsFields(FOO, 'spec')
      .readsFields(kinds.DEPLOYMENT, 'status.availableReplicas')
      .maxConcurrency(2);
  }

  reconcile(foo, ctx) {
    const namespace = o.namespace(foo);
    const fooName = o.name(foo);
    const name = o.field(foo, 'spec.deploymentName');
    if (!name) {
      ctx.event(foo, 'warning', 'InvalidSpec', 'Reconcile', 'spec.deploymentName must be set');
      return Action.done();
    }

    const existing = ctx.get(kinds.DEPLOYMENT, namespace, name);
    if (existing !== undefined && !o.isControlledBy(existing, foo)) {
      ctx.event(foo, 'warning', 'ErrResourceExists', 'Reconcile', `Resource "${name}" already exists and is not managed by Foo`);
      return Action.done();
    }

    const labels = { app: 'nginx', controller: fooName };
    const deployment = ctx.apply({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name, namespace, ownerReferences: [o.controllerOwnerRef(foo)] },
      spec: {
        replicas: o.field(foo, 'spec.replicas', 1),
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: { containers: [{ name: 'nginx', image: 'nginx:latest' }] },
        },
      },
    });

    ctx.applyStatus(
      o.statusObject(foo, {
        availableReplicas: o.field(deployment, 'status.availableReplicas', 0),
        observedGeneration: o.generation(foo) ?? null,
      }),
    );
    return Action.done();
  }
}
