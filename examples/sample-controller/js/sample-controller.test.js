// Unit tests of the sample-controller's logic under Node: `npm test` (or `node --test`).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { DONE, Forbidden, kinds } from '@kubewasm/sdk';
import { Harness } from '@kubewasm/sdk/testing';
import SampleController, { FOO } from './sample-controller.js';

const foo = (spec = {}) => ({
  apiVersion: 'samplecontroller.k8s.io/v1alpha1',
  kind: 'Foo',
  metadata: { name: 'example-foo', namespace: 'default', uid: 'foo-uid', generation: 3 },
  spec,
});

function expectedDeployment(replicas) {
  const labels = { app: 'nginx', controller: 'example-foo' };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      name: 'web',
      namespace: 'default',
      ownerReferences: [
        { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', name: 'example-foo', uid: 'foo-uid', controller: true, blockOwnerDeletion: true },
      ],
    },
    spec: {
      replicas,
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: { containers: [{ name: 'nginx', image: 'nginx:latest' }] } },
    },
  };
}

const expectedStatus = (available, generation = 3) => ({
  apiVersion: 'samplecontroller.k8s.io/v1alpha1',
  kind: 'Foo',
  metadata: { name: 'example-foo', namespace: 'default' },
  status: { availableReplicas: available, observedGeneration: generation },
});

const events = (h) => h.host.events.map((e) => [e.eventType, e.reason, e.action, e.note]);

test('manifest', () => {
  const m = new Harness(SampleController).manifest;
  assert.deepEqual([m.name, m.version, m.primary, m.owns, m.maxConcurrency], ['sample-controller', '0.1.0', FOO, [kinds.DEPLOYMENT], 2]);
  assert.deepEqual(
    m.permissions.map((p) => [p.resource, p.subresource, p.verbs]),
    [
      [kinds.DEPLOYMENT, undefined, ['create', 'patch']],
      [FOO, 'status', ['patch']],
    ],
  );
  assert.deepEqual(m.watches, []);
  assert.equal(m.finalizer, undefined);
});

test('creates the Deployment and the status', () => {
  const f = foo({ deploymentName: 'web', replicas: 2 });
  const h = new Harness(SampleController, { objects: [f] });
  assert.equal(h.reconcile(f), DONE);
  assert.deepEqual(h.host.applied(), [expectedDeployment(2)]);
  assert.deepEqual(h.host.statusApplied(), [expectedStatus(0)]);
  assert.ok(h.host.calls.every((c) => c.force === true));
  assert.deepEqual(h.host.events, []);
});

test('replicas default to one, and zero is kept', () => {
  const h = new Harness(SampleController, { objects: [foo()] });
  h.reconcile(foo({ deploymentName: 'web' }));
  h.reconcile(foo({ deploymentName: 'web', replicas: 0 }));
  assert.deepEqual(
    h.host.applied().map((d) => d.spec.replicas),
    [1, 0],
  );
});

test('the status reports the available replicas of the applied Deployment', () => {
  const f = foo({ deploymentName: 'web', replicas: 3 });
  const owned = { ...expectedDeployment(3), status: { availableReplicas: 2 } };
  const h = new Harness(SampleController, { objects: [f, owned] });
  h.reconcile(f);
  assert.deepEqual(h.host.statusApplied(), [expectedStatus(2)]);
});

test('a missing deploymentName is a Warning', () => {
  for (const spec of [{}, { deploymentName: '' }, { deploymentName: null }]) {
    const h = new Harness(SampleController);
    assert.equal(h.reconcile(foo(spec)), DONE);
    assert.deepEqual(h.host.calls, []);
    assert.deepEqual(events(h), [['warning', 'InvalidSpec', 'Reconcile', 'spec.deploymentName must be set']]);
    assert.deepEqual(h.host.events[0].regarding, { resource: FOO, namespace: 'default', name: 'example-foo' });
  }
});

test('a Deployment the Foo does not control is left alone', () => {
  for (const owners of [
    [],
    [{ apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', name: 'other', uid: 'other-uid', controller: true }],
    [{ apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', name: 'example-foo', uid: 'foo-uid' }],
  ]) {
    const f = foo({ deploymentName: 'web' });
    const taken = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web', namespace: 'default', ownerReferences: owners } };
    const h = new Harness(SampleController, { objects: [f, taken] });
    assert.equal(h.reconcile(f), DONE);
    assert.deepEqual(h.host.calls, []);
    assert.deepEqual(events(h), [['warning', 'ErrResourceExists', 'Reconcile', 'Resource "web" already exists and is not managed by Foo']]);
  }
});

test('host errors propagate', () => {
  const h = new Harness(SampleController);
  h.host.fail('applyStatus', new Forbidden('no'));
  assert.throws(() => h.reconcile(foo({ deploymentName: 'web' })), Forbidden);
});
