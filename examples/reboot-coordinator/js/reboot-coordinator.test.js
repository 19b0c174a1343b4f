// Unit tests of the reboot coordinator's logic under Node: `npm test` (or `node --test`).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { DONE, Mapping, kinds, objectKey } from '@kubewasm/sdk';
import { Harness, Refused } from '@kubewasm/sdk/testing';
import RebootCoordinator, { REBOOT_NEEDED, REBOOT_NOW } from './reboot-coordinator.js';

function node(name, { ready = true, needed = false, now = false } = {}) {
  const annotations = {};
  if (needed) annotations[REBOOT_NEEDED] = 'true';
  if (now) annotations[REBOOT_NOW] = 'true';
  const conditions = ready === null ? [] : [{ type: 'Ready', status: ready ? 'True' : 'False' }];
  return { apiVersion: 'v1', kind: 'Node', metadata: { name, annotations }, status: { conditions } };
}

const GRANT = { metadata: { annotations: { [REBOOT_NOW]: 'true' } } };

test('manifest', () => {
  const m = new Harness(RebootCoordinator).manifest;
  assert.deepEqual([m.name, m.version, m.primary, m.maxConcurrency], ['reboot-coordinator', '0.1.0', kinds.NODE, 1]);
  assert.deepEqual(m.watches, [{ resource: kinds.NODE, mapping: Mapping.mapRelated(), labelSelector: undefined }]);
  assert.deepEqual(
    m.permissions.map((p) => [p.resource, p.subresource, p.verbs]),
    [[kinds.NODE, undefined, ['patch']]],
  );
  assert.deepEqual(m.owns, []);
});

test('settings', () => {
  for (const [settings, expected] of [
    [{}, 1],
    [{ maxUnavailable: 3 }, 3],
  ]) {
    assert.equal(new Harness(RebootCoordinator, { settings }).controller.maxUnavailable, expected);
  }
});

test('invalid settings refuse loading', () => {
  for (const bad of ['2', 1.5, 0, -1, true, null, [1]]) {
    assert.throws(
      () => new Harness(RebootCoordinator, { settings: { maxUnavailable: bad } }),
      (e) => e instanceof Refused && /^maxUnavailable must be an integer of at least 1, not /.test(e.message),
      JSON.stringify(bad),
    );
  }
});

test('grants a reboot when nothing is unavailable', () => {
  const nodes = [node('a', { needed: true }), node('b')];
  const h = new Harness(RebootCoordinator, { objects: nodes });
  assert.equal(h.reconcile(nodes[0]), DONE);
  const [patch, ...more] = h.host.writes('patch');
  assert.deepEqual(more, []);
  assert.deepEqual([patch.resource, patch.namespace, patch.name, patch.patchType, patch.object], [kinds.NODE, undefined, 'a', 'merge', GRANT]);
  assert.equal(h.host.logs[0].fields.node, 'a');
});

test('waits while maxUnavailable nodes are unavailable', () => {
  for (const other of [node('b', { now: true }), node('b', { ready: false }), node('b', { ready: null }), node('b', { ready: false, now: true })]) {
    const me = node('a', { needed: true });
    const h = new Harness(RebootCoordinator, { objects: [me, other] });
    assert.equal(h.reconcile(me), DONE);
    assert.deepEqual(h.host.calls, []);
  }
});

test('counts the candidate itself when it is not ready', () => {
  const me = node('a', { needed: true, ready: false });
  const h = new Harness(RebootCoordinator, { objects: [me] });
  h.reconcile(me);
  assert.deepEqual(h.host.calls, []);
});

test('maxUnavailable 2', () => {
  const nodes = [node('a', { needed: true }), node('b', { now: true }), node('c')];
  const h = new Harness(RebootCoordinator, { settings: { maxUnavailable: 2 }, objects: nodes });
  h.reconcile(nodes[0]);
  assert.equal(h.host.writes('patch').length, 1);
});

test('nothing to do unless waiting', () => {
  for (const n of [node('a'), node('a', { needed: true, now: true }), node('a', { now: true })]) {
    const h = new Harness(RebootCoordinator, { objects: [n] });
    assert.equal(h.reconcile(n), DONE);
    assert.deepEqual(h.host.calls, []);
  }
});

test('one at a time', () => {
  const h = new Harness(RebootCoordinator, { objects: [node('a', { needed: true }), node('b', { needed: true })] });
  h.reconcile(objectKey(undefined, 'a'));
  h.reconcile(objectKey(undefined, 'b'));
  assert.deepEqual(
    h.host.writes('patch').map((c) => c.name),
    ['a'],
  );
});

test('mapRelated returns the waiting nodes, sorted', () => {
  const nodes = [node('c', { needed: true }), node('a', { needed: true }), node('b', { needed: true, now: true }), node('d')];
  const h = new Harness(RebootCoordinator, { objects: nodes });
  assert.deepEqual(h.mapRelated(kinds.NODE, node('d')), [objectKey(undefined, 'a'), objectKey(undefined, 'c')]);
  assert.deepEqual(new Harness(RebootCoordinator).mapRelated(kinds.NODE, node('x')), []);
});
