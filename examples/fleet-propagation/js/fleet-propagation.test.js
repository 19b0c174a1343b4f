// Unit tests of fleet propagation under Node, against the fake host and its member clusters:
// `npm test` (or `node --test`).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Action, DONE, Forbidden, Members, Unavailable, kinds } from '@kubewasm/sdk';
import { Harness } from '@kubewasm/sdk/testing';
import FleetPropagation, { FINALIZER, PROPAGATE, SOURCE } from './fleet-propagation.js';

const source = (data = { color: 'blue' }) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'settings', namespace: 'apps', uid: 'source-uid', labels: { [PROPAGATE]: 'true' } },
  data,
});

const copy = (data = { color: 'blue' }) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'settings', namespace: 'apps', labels: { [SOURCE]: 'settings' } },
  data,
});

/** A hub with two prod members and a dev one. */
function fleet(settings = {}) {
  const h = new Harness(FleetPropagation, { settings, objects: [source()] });
  const members = {};
  for (const [name, env] of [
    ['eu', 'prod'],
    ['us', 'prod'],
    ['dev', 'dev'],
  ]) {
    members[name] = h.host.addMember(name, { labels: { env } });
  }
  return { h, members };
}

test('manifest', () => {
  const { manifest } = new Harness(FleetPropagation);
  assert.deepEqual(
    [manifest.name, manifest.primary, manifest.primarySelector, manifest.finalizer],
    ['fleet-propagation', kinds.CONFIG_MAP, `${PROPAGATE}=true`, FINALIZER],
  );
  assert.deepEqual(manifest.scope, { serveLocal: true, serve: Members.none, reach: Members.matching('env=prod') });
  assert.deepEqual(manifest.permissions, [{ resource: kinds.CONFIG_MAP, subresource: undefined, verbs: ['create', 'patch', 'delete'], namespaces: [] }]);
  assert.deepEqual(new Harness(FleetPropagation, { settings: { members: 'region=eu' } }).manifest.scope.reach, Members.matching('region=eu'));
});

test('copies into every member it reaches', () => {
  const { h, members } = fleet();
  assert.equal(h.reconcile(source()), DONE);
  for (const name of ['eu', 'us']) assert.deepEqual(members[name].applied(), [copy()], name);
  assert.deepEqual(members.dev.calls, [], 'dev is outside env=prod');
  assert.deepEqual(h.host.writes(), [], 'nothing written in the hub');
  assert.deepEqual(
    h.host.events.map((e) => [e.eventType, e.reason, e.note]),
    [['normal', 'Propagated', 'copied to 2 member cluster(s): eu,us']],
  );
});

test('a member that does not answer is tried again without holding up the others', () => {
  const { h, members } = fleet();
  members.eu.fail('apply', new Unavailable('the API server of eu does not answer'));
  assert.deepEqual(h.reconcile(source()), Action.requeueAfter(30_000));
  assert.equal(members.eu.get(kinds.CONFIG_MAP, 'apps', 'settings'), undefined);
  assert.deepEqual(members.us.get(kinds.CONFIG_MAP, 'apps', 'settings').data, { color: 'blue' });
  assert.equal(h.host.events[0].note, 'copied to 1 member cluster(s): us');
  assert.ok(h.host.logs.some((l) => l.level === 'warn' && l.message === 'cluster eu did not answer: the API server of eu does not answer'));
  assert.equal(h.reconcile(source()), DONE, 'once eu answers');
  assert.ok(members.eu.get(kinds.CONFIG_MAP, 'apps', 'settings'));
});

test('another failure fails the call, naming the member', () => {
  const { h, members } = fleet();
  members.us.fail('apply', new Forbidden('RBAC says no'));
  assert.throws(
    () => h.reconcile(source()),
    (e) => e instanceof Forbidden && e.message === 'cluster us: RBAC says no',
  );
});

test('a new member and changed data', () => {
  const { h, members } = fleet({ members: 'env in (prod,dev)' });
  h.reconcile(source());
  const ap = h.host.addMember('ap', { labels: { env: 'prod' } });
  h.reconcile(source({ color: 'red' }));
  assert.deepEqual(ap.get(kinds.CONFIG_MAP, 'apps', 'settings').data, { color: 'red' });
  assert.deepEqual(members.dev.get(kinds.CONFIG_MAP, 'apps', 'settings').data, { color: 'red' });
  assert.equal(h.host.events.at(-1).note, 'copied to 4 member cluster(s): ap,dev,eu,us');
});

test('finalize deletes the copies, and a missing one is fine', () => {
  const { h, members } = fleet();
  h.reconcile(source());
  members.us.objects.clear(); // deleted by someone else
  assert.equal(h.finalize(source()), DONE);
  assert.equal(members.eu.get(kinds.CONFIG_MAP, 'apps', 'settings'), undefined);
  assert.deepEqual(
    members.us.calls.map((c) => c.op),
    ['apply', 'delete'],
  );
});

test('finalize tries again while a member does not answer', () => {
  const { h, members } = fleet();
  h.reconcile(source());
  members.eu.fail('delete', new Unavailable('eu is down'));
  assert.deepEqual(h.finalize(source()), Action.requeueAfter(30_000));
  assert.equal(members.us.get(kinds.CONFIG_MAP, 'apps', 'settings'), undefined);
  assert.equal(h.finalize(source()), DONE);
  assert.equal(members.eu.get(kinds.CONFIG_MAP, 'apps', 'settings'), undefined);
});
