import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  Action,
  AlreadyExists,
  Conflict,
  DONE,
  ErrorCode,
  EventType,
  Forbidden,
  Invalid,
  KubewasmError,
  Manifest,
  Mapping,
  NotFound,
  Other,
  PatchType,
  Unavailable,
  Verb,
  kinds,
} from '@kubewasm/sdk';

test('actions', () => {
  assert.equal(Action.done(), DONE);
  assert.ok(DONE.isDone);
  assert.equal(Action.requeueAfter(1500).requeueAfterMs, 1500);
  assert.ok(!Action.requeueAfter(0).isDone);
  assert.throws(() => Action.requeueAfter(-1), RangeError);
  assert.throws(() => Action.requeueAfter(NaN), RangeError);
});

test('requeue delays are milliseconds, rounded up to whole ones', () => {
  assert.equal(Action.requeueAfter(2500).requeueAfterMs, 2500);
  assert.equal(Action.requeueAfter(0.4).requeueAfterMs, 1, 'a positive delay never becomes 0');
  assert.equal(Action.requeueAfter(1.5).requeueAfterMs, 2);
  assert.equal(Action.requeueAfter(1000.0000000000001).requeueAfterMs, 1000, 'no float noise');
  assert.equal(Action.requeueAfter(Infinity).requeueAfterMs, Infinity);
});

test('errors map codes to classes', () => {
  const table = {
    'not-found': NotFound,
    'already-exists': AlreadyExists,
    conflict: Conflict,
    forbidden: Forbidden,
    invalid: Invalid,
    unavailable: Unavailable,
    other: Other,
  };
  for (const [code, cls] of Object.entries(table)) {
    const e = KubewasmError.fromCode(code, 'msg');
    assert.ok(e instanceof cls && e instanceof KubewasmError && e instanceof Error, code);
    assert.equal(e.code, code);
    assert.equal(e.message, 'msg');
    assert.equal(e.name, cls.name);
    assert.equal(String(e), `${code}: msg`);
  }
  assert.equal(new KubewasmError('x').code, 'other');
  assert.equal(new KubewasmError('x', 'conflict').code, 'conflict');
  assert.equal(new NotFound('x').code, 'not-found');
  assert.throws(() => KubewasmError.fromCode('bogus', 'x'), TypeError);
});

test('enums are the WIT case names', () => {
  assert.equal(Verb.PATCH, 'patch');
  assert.equal(Verb.parse('PATCH'), 'patch');
  assert.equal(EventType.parse('Warning'), 'warning');
  assert.equal(PatchType.JSON, 'json');
  assert.equal(ErrorCode.NOT_FOUND, 'not-found');
  assert.deepEqual(Verb.values, ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete']);
  assert.throws(() => Verb.parse('escalate'), /not a Verb/);
});

test('manifest builder', () => {
  const m = new Manifest('demo', '1.2.3')
    .primary(kinds.CONFIG_MAP)
    .primarySelector('app=demo')
    .owns(kinds.DEPLOYMENT)
    .watches(kinds.SECRET, Mapping.label('owner'), 'team=a')
    .watches(kinds.NODE)
    .finalizer('example.com/cleanup')
    .resyncSeconds(300)
    .maxConcurrency(3)
    .limits({ deadlineMs: 2000, memoryBytes: 96 << 20 })
    .permission(kinds.DEPLOYMENT, ['create', 'PATCH'], ['a'])
    .statusPermission(kinds.CONFIG_MAP, 'patch');
  assert.deepEqual(m.spec, {
    name: 'demo',
    version: '1.2.3',
    primary: kinds.CONFIG_MAP,
    primarySelector: 'app=demo',
    owns: [kinds.DEPLOYMENT],
    watches: [
      { resource: kinds.SECRET, mapping: { tag: 'label', val: 'owner' }, labelSelector: 'team=a' },
      { resource: kinds.NODE, mapping: { tag: 'map-related' }, labelSelector: undefined },
    ],
    metadataOnly: [],
    readsFields: [],
    finalizer: 'example.com/cleanup',
    resyncSeconds: 300,
    maxConcurrency: 3,
    limits: { deadlineMs: 2000, memoryBytes: 96 << 20 },
    permissions: [
      { resource: kinds.DEPLOYMENT, subresource: undefined, verbs: ['create', 'patch'], namespaces: ['a'] },
      { resource: kinds.CONFIG_MAP, subresource: 'status', verbs: ['patch'], namespaces: [] },
    ],
    rules: [],
    composition: { children: [], selector: 'generated' },
    scope: { serveLocal: true, serve: { tag: 'none' }, reach: { tag: 'none' } },
    webhooks: [],
    conversions: [],
  });
});

test('manifest metadata-only kinds', () => {
  const m = new Manifest('x', '0').primary(kinds.NAMESPACE).owns(kinds.POD).watches(kinds.SECRET).metadataOnly(kinds.POD).metadataOnly(kinds.SECRET);
  assert.deepEqual(m.spec.metadataOnly, [kinds.POD, kinds.SECRET]);
  assert.deepEqual(m.forHost().metadataOnly, [kinds.POD, kinds.SECRET]);
  assert.deepEqual(m.spec.owns, [kinds.POD], 'declaring a kind metadata-only owns nothing');
});

test('manifest rules', () => {
  const m = new Manifest('x', '0')
    .primary(kinds.NAMESPACE)
    .grantNamed(kinds.CONFIG_MAP, ['get', 'UPDATE'], ['kube-system'], ['cluster-info'])
    .bindClusterRole('edit')
    .rule(kinds.POD, 'eviction', 'create')
    .rule(kinds.SECRET, undefined, ['deletecollection'], ['a']);
  assert.deepEqual(m.spec.rules, [
    { resource: kinds.CONFIG_MAP, subresource: undefined, verbs: ['get', 'update'], namespaces: ['kube-system'], resourceNames: ['cluster-info'] },
    { resource: kinds.CLUSTER_ROLE, subresource: undefined, verbs: ['bind'], namespaces: [], resourceNames: ['edit'] },
    { resource: kinds.POD, subresource: 'eviction', verbs: ['create'], namespaces: [], resourceNames: [] },
    { resource: kinds.SECRET, subresource: undefined, verbs: ['deletecollection'], namespaces: ['a'], resourceNames: [] },
  ]);
  assert.deepEqual(m.spec.permissions, [], 'rules are not permissions');
  assert.throws(() => new Manifest('x', '0').rule(kinds.POD, undefined, ['*']), /not an RBAC verb/);
});

test('a finalizer adds a patch grant on the primary for the host', () => {
  // The finalizer first, the primary after: the order of the builder calls does not matter.
  const m = new Manifest('x', '0').finalizer('example.com/cleanup').primary(kinds.CONFIG_MAP).statusPermission(kinds.CONFIG_MAP, ['patch']);
  assert.deepEqual(m.forHost().permissions, [
    { resource: kinds.CONFIG_MAP, subresource: 'status', verbs: ['patch'], namespaces: [] },
    { resource: kinds.CONFIG_MAP, subresource: undefined, verbs: ['patch'], namespaces: [] },
  ]);
  assert.equal(m.spec.permissions.length, 1, "the builder's spec is left as written");
  const granted = new Manifest('x', '0').primary(kinds.CONFIG_MAP).finalizer('example.com/cleanup').permission(kinds.CONFIG_MAP, ['create', 'patch']);
  assert.deepEqual(granted.forHost().permissions, [{ resource: kinds.CONFIG_MAP, subresource: undefined, verbs: ['create', 'patch'], namespaces: [] }]);
  assert.deepEqual(new Manifest('x', '0').primary(kinds.CONFIG_MAP).forHost().permissions, [], 'no finalizer, no grant');
});

test('owned kinds say which may be deleted', () => {
  const m = new Manifest('x', '0')
    .primary(kinds.CONFIG_MAP)
    .owns(kinds.DEPLOYMENT)
    .owns(kinds.SECRET)
    .owns(kinds.SERVICE)
    .permission(kinds.DEPLOYMENT, ['patch', 'delete'])
    .statusPermission(kinds.SECRET, ['delete']);
  assert.deepEqual(m.owned(), [
    [kinds.DEPLOYMENT, true],
    [kinds.SECRET, false],
    [kinds.SERVICE, false],
  ]);
});

test('manifest defaults', () => {
  const s = new Manifest('x', '0').spec;
  assert.equal(s.primary, undefined);
  assert.equal(s.maxConcurrency, 1);
  assert.deepEqual(s.limits, { deadlineMs: undefined, memoryBytes: undefined });
  assert.deepEqual(s.metadataOnly, [], 'every kind handed whole');
  assert.deepEqual(Mapping.ownerReferences(), { tag: 'owner-references' });
  assert.throws(() => new Manifest('x', '0').permission(kinds.POD, ['fly']), /not a Verb/);
});
