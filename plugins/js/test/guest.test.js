// The component glue (src/guest.js) under Node: its WIT imports resolve to
// test/fixtures/wit-imports.js (module hooks), which forward to a FakeHost the way
// componentize-js presents a host (a failure is an Error whose payload is the WIT error). What the
// exports return and throw is what componentize-js lowers: a thrown plain `{ code, message }` is
// an `err`, a thrown Error whose payload's code is no WIT error code traps.
import assert from 'node:assert/strict';
import { register } from 'node:module';
import { beforeEach, test } from 'node:test';

import {
  Composite,
  Context,
  Controller,
  DONE,
  KubewasmError,
  Manifest,
  Members,
  NotFound,
  Unavailable,
  UpdateStrategy,
  gvk,
  kinds,
  objects as o,
} from '@kubewasm/sdk';
import { COMPOSING, FakeHost } from '@kubewasm/sdk/testing';

register('./fixtures/wit-hooks.js', import.meta.url);
const { exportsFor, wasmHost } = await import('../src/guest.js');

const SITE = gvk('example.com', 'v1', 'Site');
const MAX_U64 = 2n ** 64n - 1n;

/** The WIT imports over a fake host, failures thrown as componentize-js throws them. */
function witImports(host) {
  const wrap =
    (fn) =>
    (...args) => {
      try {
        return fn(...args);
      } catch (e) {
        if (e instanceof KubewasmError) throw Object.assign(new Error(e.message), { payload: { code: e.code, message: e.message } });
        throw e;
      }
    };
  return {
    get: wrap((...a) => host.cacheGet(...a)),
    listObjects: wrap((...a) => host.cacheList(...a)),
    listControlled: wrap((...a) => host.cacheListControlled(...a)),
    apply: wrap((...a) => host.apply(...a)),
    applyStatus: wrap((...a) => host.applyStatus(...a)),
    create: wrap((...a) => host.create(...a)),
    update: wrap((...a) => host.update(...a)),
    updateStatus: wrap((...a) => host.updateStatus(...a)),
    patch: wrap((...a) => host.patch(...a)),
    delete: wrap((...a) => host.delete(...a)),
    publish: wrap((...a) => host.publishEvent(...a)),
    emit: (...a) => host.log(...a),
    fleet: {
      current: () => host.currentCluster(),
      clusters: () => host.clusters(),
      get: wrap((...a) => host.fleetGet(...a)),
      listObjects: wrap((...a) => host.fleetList(...a)),
      apply: wrap((...a) => host.fleetApply(...a)),
      applyStatus: wrap((...a) => host.fleetApplyStatus(...a)),
      create: wrap((...a) => host.fleetCreate(...a)),
      update: wrap((...a) => host.fleetUpdate(...a)),
      updateStatus: wrap((...a) => host.fleetUpdateStatus(...a)),
      patch: wrap((...a) => host.fleetPatch(...a)),
      delete: wrap((...a) => host.fleetDelete(...a)),
    },
  };
}

let host;
beforeEach((t) => {
  host = new FakeHost();
  globalThis.witImports = witImports(host);
  // A trap writes the stack to stderr first (the host log, in a component).
  t.mock.method(console, 'error', () => {});
});

const site = (spec = {}) => ({ apiVersion: 'example.com/v1', kind: 'Site', metadata: { name: 'a', namespace: 'default', uid: 'u' }, spec });
const request = (parent, finalizing = false) => ({
  parent: JSON.stringify(parent),
  children: [{ resource: kinds.CONFIG_MAP, items: [] }],
  related: [],
  finalizing,
});

/** A trap: what componentize-js cannot lower as an `err`. */
const traps = (e) => e instanceof Error && e.payload?.code === 'uncaught-exception';

class Plain extends Controller {
  manifest() {
    return new Manifest('plain', '0.1.0').primary(SITE).limits({ memoryBytes: 1 << 26 });
  }

  reconcile() {
    return DONE;
  }
}

class Site extends Composite {
  manifest() {
    return new Manifest('site', '0.1.0').primary(SITE).child(kinds.CONFIG_MAP, UpdateStrategy.RECREATE).watches(kinds.SECRET);
  }

  customize() {
    return [{ resource: kinds.SECRET, names: ['s'] }];
  }

  sync(req, ctx) {
    const { mode, resyncAfter } = req.parent.spec;
    if (mode === 'not-found') throw new NotFound('no such thing');
    if (mode === 'bug') throw new TypeError('a bug');
    if (mode === 'not-an-answer') return 'done';
    if (mode === 'write') ctx.create(o.newObject(kinds.CONFIG_MAP, 'x', 'default'));
    const cached = ctx.get(kinds.SECRET, 'default', 's');
    return {
      status: { secret: cached?.data?.k ?? null },
      children: [o.newObject(kinds.CONFIG_MAP, 'a-page')],
      resyncAfter: resyncAfter === 'forever' ? Infinity : resyncAfter,
    };
  }
}

test('a plain controller answers describe-composition with none, and traps in composite', () => {
  const exports = exportsFor({ default: Plain });
  assert.equal(exports.plugin.describe('').limits.memoryBytes, 1n << 26n);
  assert.equal(exports.composite.describeComposition(), undefined);
  assert.deepEqual(exports.reconciler.reconcile({ key: { namespace: 'default', name: 'a' }, object: JSON.stringify(site()), retries: 0 }), { tag: 'done' });
  assert.deepEqual(exports.access.rules(), []);
  assert.deepEqual(exports.views.metadataOnly(), []);
  assert.deepEqual(exports.projections.fields(), [], 'nothing declared: whole objects');
  assert.deepEqual(exports.webhooks.declare(), { admission: [], conversion: [] }, 'no hooks declared');
  assert.throws(() => exports.composite.sync(request(site())), traps);
  assert.throws(() => exports.composite.finalize(request(site(), true)), traps);
  assert.throws(() => exports.composite.customize(JSON.stringify(site())), traps);
});

test('a declarative controller answers its composition, and traps in reconciler and release', () => {
  const exports = exportsFor({ default: Site });
  assert.equal(exports.composite.describeComposition(), undefined, 'none before describe');
  assert.equal(exports.plugin.describe('{}').name, 'site');
  assert.deepEqual(exports.composite.describeComposition(), { children: [{ resource: kinds.CONFIG_MAP, updateStrategy: 'recreate' }], selector: 'generated' });
  assert.deepEqual(exports.access.rules(), [], 'access and views are answered for both kinds');
  assert.deepEqual(exports.views.metadataOnly(), []);
  const req = { key: { namespace: 'default', name: 'a' }, object: JSON.stringify(site()), retries: 0 };
  assert.throws(() => exports.reconciler.reconcile(req), traps);
  assert.throws(() => exports.reconciler.finalize(req), traps);
  assert.throws(() => exports.release.released(req), traps);
  assert.throws(() => exports.reconciler.mapRelated(kinds.SECRET, '{}'), traps);
});

test('sync, finalize and customize through the glue', () => {
  host.add({ ...o.newObject(kinds.SECRET, 's', 'default'), data: { k: 'v' } });
  const exports = exportsFor({ default: Site });
  exports.plugin.describe('{}');
  assert.deepEqual(exports.composite.sync(request(site({ resyncAfter: 1500.5 }))), {
    status: '{"secret":"v"}',
    children: ['{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a-page"}}'],
    resyncAfter: 1501n,
    finalized: false,
  });
  assert.equal(exports.composite.sync(request(site())).resyncAfter, undefined);
  assert.equal(exports.composite.sync(request(site({ resyncAfter: 1e30 }))).resyncAfter, MAX_U64, 'saturating');
  assert.equal(exports.composite.sync(request(site({ resyncAfter: 'forever' }))).resyncAfter, MAX_U64);
  assert.deepEqual(exports.composite.finalize(request(site(), true)), { status: undefined, children: [], resyncAfter: undefined, finalized: true });
  assert.deepEqual(exports.composite.customize(JSON.stringify(site())), [
    { resource: kinds.SECRET, namespace: undefined, names: ['s'], labelSelector: undefined },
  ]);
});

test('an SDK error becomes the err value; anything else traps', () => {
  const exports = exportsFor({ default: Site });
  exports.plugin.describe('{}');
  let thrown;
  try {
    exports.composite.sync(request(site({ mode: 'not-found' })));
  } catch (e) {
    thrown = e;
  }
  assert.deepEqual(thrown, { code: 'not-found', message: 'no such thing' }, 'a plain object: the err value');
  assert.throws(() => exports.composite.sync(request(site({ mode: 'bug' }))), traps);
  assert.throws(() => exports.composite.sync(request(site({ mode: 'not-an-answer' }))), traps);
  assert.throws(
    () => exports.composite.sync({ ...request(site()), parent: '{' }),
    (e) => e.code === 'invalid' && !(e instanceof Error),
  );
});

test("the host's refusal of a write during sync reaches the plugin as Forbidden", () => {
  const exports = exportsFor({ default: Site });
  exports.plugin.describe('{}');
  host.cacheOnly = COMPOSING;
  let thrown;
  try {
    exports.composite.sync(request(site({ mode: 'write' })));
  } catch (e) {
    thrown = e;
  }
  assert.deepEqual(thrown, { code: 'forbidden', message: `create ConfigMap.v1 refused: ${COMPOSING}` });
  assert.deepEqual(host.writes(), []);
});

test('listControlled reaches the list-controlled import, and its error comes back as the SDK error', () => {
  const parent = site();
  host.add({
    ...o.newObject(kinds.CONFIG_MAP, 'b', 'default'),
    metadata: { name: 'b', namespace: 'default', ownerReferences: [o.controllerOwnerRef(parent)] },
  });
  host.add(o.newObject(kinds.CONFIG_MAP, 'c', 'default'));
  const ctx = new Context(wasmHost);
  assert.deepEqual(ctx.listControlled(kinds.CONFIG_MAP, 'u', 'default').map(o.name), ['b']);
  host.fail('cacheListControlled', new NotFound('gone'));
  assert.throws(() => ctx.listControlled(kinds.CONFIG_MAP, 'u'), NotFound);
});

test('the clusters export answers the scope, for both kinds', () => {
  const plain = exportsFor({ default: Plain });
  assert.deepEqual(plain.clusters.scope(), { serveLocal: true, serve: { tag: 'none' }, reach: { tag: 'none' } }, 'before describe');
  plain.plugin.describe('');
  assert.deepEqual(plain.clusters.scope(), { serveLocal: true, serve: { tag: 'none' }, reach: { tag: 'none' } }, "the host's own only");
  class Edge extends Plain {
    manifest() {
      return super.manifest().serveMembers(Members.matching('tier=edge')).reachMembers(Members.all).serveLocal(false);
    }
  }
  const edge = exportsFor({ default: Edge });
  edge.plugin.describe('');
  assert.deepEqual(edge.clusters.scope(), { serveLocal: false, serve: { tag: 'matching', val: 'tier=edge' }, reach: { tag: 'all' } });
  const site = exportsFor({ default: Site });
  site.plugin.describe('{}');
  assert.deepEqual(site.clusters.scope().serve, { tag: 'none' });
});

test('the fleet import carries the named cluster, and its errors come back as SDK errors', () => {
  const eu = host.addMember('eu', { labels: { env: 'prod' }, objects: [o.newObject(kinds.CONFIG_MAP, 'a', 'default')] });
  host.current = 'edge';
  const ctx = new Context(wasmHost);
  assert.equal(ctx.cluster(), 'edge');
  assert.deepEqual(ctx.clusters(), [{ name: 'eu', labels: { env: 'prod' } }]);
  const there = ctx.inCluster('eu');
  assert.equal(there.get(kinds.CONFIG_MAP, 'default', 'a').metadata.name, 'a');
  assert.deepEqual(there.list(kinds.CONFIG_MAP).map(o.name), ['a']);
  there.apply(o.newObject(kinds.CONFIG_MAP, 'b', 'default'), false);
  there.create(o.newObject(kinds.CONFIG_MAP, 'c', 'default'));
  there.update(there.get(kinds.CONFIG_MAP, 'default', 'c'));
  there.updateStatus(there.get(kinds.CONFIG_MAP, 'default', 'c'));
  there.applyStatus({ ...o.newObject(kinds.CONFIG_MAP, 'c', 'default'), status: { ok: true } });
  there.patch(kinds.CONFIG_MAP, 'default', 'c', { data: { x: '1' } }, 'strategic');
  there.delete(kinds.CONFIG_MAP, 'default', 'b');
  assert.deepEqual(
    eu.calls.map((c) => c.op),
    ['apply', 'create', 'update', 'updateStatus', 'applyStatus', 'patch', 'delete'],
  );
  assert.equal(eu.calls[0].force, false);
  assert.equal(eu.calls[5].patchType, 'strategic');
  assert.throws(() => ctx.inCluster('mars').get(kinds.CONFIG_MAP, 'default', 'a'), Unavailable);
  eu.fail('cacheGet', new NotFound('gone'));
  assert.throws(() => there.get(kinds.CONFIG_MAP, 'default', 'a'), NotFound);
  ctx.inCluster(undefined).create(o.newObject(kinds.CONFIG_MAP, 'd', 'default'));
  assert.ok(host.get(kinds.CONFIG_MAP, 'default', 'd'), "undefined: the host's own cluster");
});
