import assert from 'node:assert/strict';
import { test } from 'node:test';

import { apiVersion, gvk, gvkFromApiVersion, gvkString, kinds, objectKey, objects as o } from '@kubewasm/sdk';

const FOO = gvk('samplecontroller.k8s.io', 'v1alpha1', 'Foo');

function foo(meta = {}) {
  return {
    apiVersion: 'samplecontroller.k8s.io/v1alpha1',
    kind: 'Foo',
    metadata: { name: 'example', namespace: 'default', uid: 'u-1', generation: 4, ...meta },
    spec: { deploymentName: 'web', replicas: 0 },
  };
}

test('identity', () => {
  const f = foo();
  assert.equal(o.name(f), 'example');
  assert.equal(o.namespace(f), 'default');
  assert.equal(o.uid(f), 'u-1');
  assert.equal(o.generation(f), 4);
  assert.deepEqual(o.key(f), objectKey('default', 'example'));
  assert.deepEqual(o.gvkOf(f), FOO);
  assert.deepEqual(o.objectRef(f), { resource: FOO, namespace: 'default', name: 'example' });
});

test('missing metadata reads as empty', () => {
  const bare = { apiVersion: 'v1', kind: 'Node' };
  assert.equal(o.name(bare), '');
  assert.equal(o.namespace(bare), undefined);
  assert.equal(o.uid(bare), undefined);
  assert.deepEqual(o.labels(bare), {});
  assert.deepEqual(o.ownerReferences(bare), []);
  assert.deepEqual(o.key(bare), { namespace: undefined, name: '' });
});

test('gvk', () => {
  assert.deepEqual(gvkFromApiVersion('apps/v1', 'Deployment'), kinds.DEPLOYMENT);
  assert.deepEqual(gvkFromApiVersion('v1', 'Node'), kinds.NODE);
  assert.equal(apiVersion(kinds.NODE), 'v1');
  assert.equal(apiVersion(kinds.DEPLOYMENT), 'apps/v1');
  assert.equal(gvkString(kinds.DEPLOYMENT), 'Deployment.v1.apps');
  assert.equal(gvkString(kinds.NODE), 'Node.v1');
  assert.ok(Object.isFrozen(kinds.NODE));
});

test('newObject', () => {
  assert.deepEqual(o.newObject(kinds.CONFIG_MAP, 'c', 'ns', { data: { a: 'b' } }), {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'c', namespace: 'ns' },
    data: { a: 'b' },
  });
  assert.ok(!('namespace' in o.newObject(kinds.NODE, 'n1').metadata));
});

test('field', () => {
  const f = foo();
  assert.equal(o.field(f, 'spec.deploymentName'), 'web');
  assert.equal(o.field(f, 'spec.replicas', 1), 0, 'a present zero is not missing');
  assert.equal(o.field(f, 'spec.missing', 7), 7);
  assert.equal(o.field(f, 'spec.deploymentName.deeper'), undefined);
  assert.equal(o.field({ a: null }, 'a', 'd'), 'd');
  assert.equal(o.field({ a: [{ b: 1 }] }, ['a', 0, 'b']), 1);
  assert.equal(o.field({ a: [1] }, ['a', 3]), undefined);
  assert.equal(o.field({ a: { toString: 1 } }, 'a.toString'), 1);
  assert.equal(o.field({ a: {} }, 'a.toString'), undefined, 'inherited properties are not fields');
  assert.equal(o.field({ metadata: { annotations: { 'example.com/x': 'y' } } }, ['metadata', 'annotations', 'example.com/x']), 'y');
});

test('setField', () => {
  const obj = {};
  o.setField(obj, 'spec.template.replicas', 3);
  assert.deepEqual(obj, { spec: { template: { replicas: 3 } } });
});

test('labels and annotations', () => {
  const obj = { metadata: {} };
  o.setLabel(obj, 'app', 'web');
  o.setAnnotation(obj, 'a/b', 'c');
  assert.equal(o.label(obj, 'app'), 'web');
  assert.equal(o.label(obj, 'nope', 'd'), 'd');
  assert.equal(o.annotation(obj, 'a/b'), 'c');
  assert.ok(o.hasAnnotation(obj, 'a/b'));
  assert.ok(!o.hasAnnotation(obj, 'x'));
  assert.ok(!o.hasAnnotation(obj, 'constructor'));
  assert.ok(o.hasAnnotation({ metadata: { annotations: { k: '' } } }, 'k'), 'an empty value is still present');
});

test('controllerOwnerRef', () => {
  assert.deepEqual(o.controllerOwnerRef(foo()), {
    apiVersion: 'samplecontroller.k8s.io/v1alpha1',
    kind: 'Foo',
    name: 'example',
    uid: 'u-1',
    controller: true,
    blockOwnerDeletion: true,
  });
  assert.deepEqual(o.ownerRef(foo()), { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', name: 'example', uid: 'u-1' });
});

test('isControlledBy', () => {
  const owner = foo();
  const child = { metadata: { ownerReferences: [o.controllerOwnerRef(owner)] } };
  assert.ok(o.isControlledBy(child, owner));
  assert.equal(o.controllerRef(child).uid, 'u-1');
  assert.ok(!o.isControlledBy(child, foo({ uid: 'u-2' })));
  assert.ok(!o.isControlledBy({ metadata: { ownerReferences: [o.ownerRef(owner)] } }, owner));
  assert.ok(!o.isControlledBy({ metadata: {} }, owner));
  assert.ok(!o.isControlledBy(child, { metadata: {} }), 'an owner without uid controls nothing');
});

test('finalizers', () => {
  const obj = { metadata: {} };
  assert.ok(o.addFinalizer(obj, 'example.com/cleanup'));
  assert.ok(!o.addFinalizer(obj, 'example.com/cleanup'));
  assert.ok(o.hasFinalizer(obj, 'example.com/cleanup'));
  assert.ok(o.removeFinalizer(obj, 'example.com/cleanup'));
  assert.ok(!o.removeFinalizer(obj, 'example.com/cleanup'));
  assert.deepEqual(o.finalizers(obj), []);
  assert.ok(!o.isDeleting(obj));
  assert.ok(o.isDeleting({ metadata: { deletionTimestamp: '2024-01-01T00:00:00Z' } }));
});

test('conditions', () => {
  const node = {
    status: {
      conditions: [
        { type: 'Ready', status: 'True' },
        { type: 'DiskPressure', status: 'False' },
      ],
    },
  };
  assert.equal(o.conditionStatus(node, 'Ready'), 'True');
  assert.ok(o.isConditionTrue(node, 'Ready'));
  assert.ok(!o.isConditionTrue(node, 'DiskPressure'));
  assert.equal(o.conditionStatus(node, 'Missing'), undefined);
  assert.deepEqual(o.getCondition(node, 'DiskPressure'), { type: 'DiskPressure', status: 'False' });
  assert.deepEqual(o.conditions({}), []);
});

test('setCondition keeps the transition time unless the status changes', () => {
  const obj = {};
  assert.ok(o.setCondition(obj, { type: 'Ready', status: true, reason: 'Applied', message: 'ok', observedGeneration: 2, now: 't1' }));
  assert.deepEqual(o.getCondition(obj, 'Ready'), {
    type: 'Ready',
    status: 'True',
    reason: 'Applied',
    message: 'ok',
    observedGeneration: 2,
    lastTransitionTime: 't1',
  });
  assert.ok(!o.setCondition(obj, { type: 'Ready', status: 'True', reason: 'Applied', message: 'ok', observedGeneration: 2, now: 't2' }));
  assert.equal(o.getCondition(obj, 'Ready').lastTransitionTime, 't1');
  assert.ok(o.setCondition(obj, { type: 'Ready', status: 'True', reason: 'Applied', message: 'new', observedGeneration: 2, now: 't3' }));
  assert.equal(o.getCondition(obj, 'Ready').lastTransitionTime, 't1');
  assert.ok(o.setCondition(obj, { type: 'Ready', status: false, reason: 'Failed', now: 't4' }));
  assert.equal(o.getCondition(obj, 'Ready').lastTransitionTime, 't4');
  assert.ok(o.removeCondition(obj, 'Ready'));
  assert.ok(!o.removeCondition(obj, 'Ready'));
  assert.throws(() => o.setCondition({}, { type: 'Ready', status: 'yes', reason: 'r' }), TypeError);
  const fresh = {};
  o.setCondition(fresh, { type: 'Ready', status: true, reason: 'r' });
  assert.match(o.getCondition(fresh, 'Ready').lastTransitionTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
});

test('statusObject', () => {
  const f = { ...foo(), status: { old: 1 } };
  assert.deepEqual(o.statusObject(f, { availableReplicas: 2 }), {
    apiVersion: 'samplecontroller.k8s.io/v1alpha1',
    kind: 'Foo',
    metadata: { name: 'example', namespace: 'default' },
    status: { availableReplicas: 2 },
  });
  assert.deepEqual(o.status(f), { old: 1 });
  assert.deepEqual(o.status({}), {});
});

test('sortedKeys', () => {
  const objs = [{ metadata: { name: 'b' } }, { metadata: { name: 'a', namespace: 'x' } }, { metadata: { name: 'a' } }];
  assert.deepEqual(o.sortedKeys(objs), [objectKey(undefined, 'a'), objectKey(undefined, 'b'), objectKey('x', 'a')]);
});
