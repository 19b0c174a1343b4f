// Declarative controllers: the manifest's composition, the dispatch the component runs
// (src/runtime.js) for `composite`'s customize, sync and finalize, and the harness.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  ChildSelector,
  Composite,
  Conflict,
  Controller,
  DONE,
  Forbidden,
  Invalid,
  Manifest,
  NotFound,
  RelatedRule,
  SyncRequest,
  UpdateStrategy,
  gvk,
  kinds,
  objectKey,
  objects as o,
} from '@kubewasm/sdk';
import { COMPOSING, FakeHost, Harness } from '@kubewasm/sdk/testing';
import { controllerKind, findController, Runner } from '../src/runtime.js';

const SITE = gvk('example.com', 'v1', 'Site');

const site = (name = 'a', spec = {}, { namespace = 'default', uid = `${name}-uid`, generation = 1 } = {}) => ({
  apiVersion: 'example.com/v1',
  kind: 'Site',
  metadata: { name, namespace, uid, generation },
  spec,
});

/** One ConfigMap per Site, a status counting what it has; `spec.mode` picks a misbehaviour. */
class SiteController extends Composite {
  static settingsDefaults = { resyncMs: 30000 };

  manifest() {
    return new Manifest('site', '0.1.0')
      .primary(SITE)
      .child(kinds.CONFIG_MAP, UpdateStrategy.IN_PLACE)
      .owns(kinds.SECRET)
      .watches(kinds.SECRET)
      .finalizer('example.com/site');
  }

  customize(parent) {
    const { secret, selector } = parent.spec ?? {};
    if (parent.spec?.mode === 'customize-bug') throw new TypeError('customize bug');
    const rules = [];
    if (secret) rules.push(RelatedRule.named(kinds.SECRET, o.namespace(parent), [secret]));
    if (selector) rules.push(RelatedRule.selected(kinds.SECRET, undefined, selector));
    return rules;
  }

  sync(request, ctx) {
    const parent = request.parent;
    this.seen = request;
    switch (parent.spec?.mode) {
      case 'conflict':
        throw new Conflict('stale');
      case 'bug':
        return parent.missing.deeper;
      case 'undefined':
        return undefined;
      case 'typo':
        return { children: [], requeueAfter: 5 };
      case 'bad-status':
        return { status: 'ready' };
      case 'bad-child':
        return { children: [null] };
      case 'bad-resync':
        return { resyncAfter: -1 };
      case 'write':
        ctx.apply(o.newObject(kinds.CONFIG_MAP, 'sneaky', o.namespace(parent)));
        return {};
      case 'event':
        ctx.event(parent, 'normal', 'Synced', 'Sync');
        return {};
      default:
        break;
    }
    const cached = ctx.get(kinds.CONFIG_MAP, o.namespace(parent), `${o.name(parent)}-page`);
    ctx.info('sync', { site: o.name(parent), cached: cached !== undefined });
    const page = o.newObject(kinds.CONFIG_MAP, `${o.name(parent)}-page`, undefined, { data: { title: parent.spec?.title ?? '' } });
    return {
      status: { pages: request.childrenOf(kinds.CONFIG_MAP).length, secrets: request.relatedOf(kinds.SECRET).map(o.name) },
      children: [page],
      resyncAfter: this.settings.resyncMs,
    };
  }
}

class Plain extends Controller {
  manifest() {
    return new Manifest('plain', '0.1.0').primary(SITE).child(kinds.CONFIG_MAP, 'in-place');
  }

  reconcile() {
    return DONE;
  }
}

/** A WIT `sync-request` (objects as JSON text). */
const witRequest = (parent, children = [], related = [], finalizing = false) => ({
  parent: JSON.stringify(parent),
  children: children.map(([resource, items]) => ({ resource, items: items.map((i) => JSON.stringify(i)) })),
  related: related.map(([resource, items]) => ({ resource, items: items.map((i) => JSON.stringify(i)) })),
  finalizing,
});

const described = (cls, settings = '{}') => {
  const runner = new Runner(cls, new FakeHost());
  runner.describe(settings);
  return runner;
};

test('the builder: child kinds are owned once, a rule each, and the selector', () => {
  const m = new Manifest('x', '0')
    .primary(SITE)
    .owns(kinds.SECRET)
    .child(kinds.SECRET, UpdateStrategy.RECREATE)
    .child(kinds.CONFIG_MAP)
    .child(kinds.DEPLOYMENT, 'In-Place')
    .child(kinds.CONFIG_MAP, UpdateStrategy.IN_PLACE)
    .childSelector(ChildSelector.PARENT_SPEC_SELECTOR);
  assert.deepEqual(m.spec.owns, [kinds.SECRET, kinds.CONFIG_MAP, kinds.DEPLOYMENT]);
  assert.deepEqual(m.spec.composition, {
    children: [
      { resource: kinds.SECRET, updateStrategy: 'recreate' },
      { resource: kinds.CONFIG_MAP, updateStrategy: 'in-place' },
      { resource: kinds.DEPLOYMENT, updateStrategy: 'in-place' },
    ],
    selector: 'parent-spec-selector',
  });
  assert.deepEqual(m.forHost().composition, m.spec.composition);
  assert.deepEqual(new Manifest('x', '0').child(kinds.POD).spec.composition, {
    children: [{ resource: kinds.POD, updateStrategy: 'on-delete' }],
    selector: 'generated',
  });
  assert.throws(() => new Manifest('x', '0').child(kinds.POD, 'sometimes'), /not a UpdateStrategy/);
  assert.throws(() => new Manifest('x', '0').childSelector('mine'), /not a ChildSelector/);
  assert.deepEqual(UpdateStrategy.values, ['on-delete', 'recreate', 'in-place']);
  assert.deepEqual(ChildSelector.values, ['generated', 'parent-spec-selector']);
});

test('describe-composition: none for a plain controller, the composition for a declarative one', () => {
  assert.equal(described(Plain).describeComposition(), undefined, 'child rules of a plain controller do not go out');
  assert.equal(new Harness(Plain).composition, undefined);
  assert.deepEqual(described(SiteController).describeComposition(), {
    children: [{ resource: kinds.CONFIG_MAP, updateStrategy: 'in-place' }],
    selector: 'generated',
  });
  assert.equal(new Runner(SiteController, new FakeHost()).describeComposition(), undefined, 'none before describe');
  const h = new Harness(SiteController);
  assert.deepEqual(h.manifest.owns, [kinds.CONFIG_MAP, kinds.SECRET]);
  assert.ok(
    h.manifest.permissions.some((p) => p.resource === SITE && p.verbs.includes('patch')),
    'the finalizer patch, as for a Controller',
  );
});

test('settings and construction are those of a Controller', () => {
  assert.equal(new Harness(SiteController, { settings: { resyncMs: 5 } }).controller.settings.resyncMs, 5);
  assert.throws(() => new Harness(SiteController, { settings: { bogus: 1 } }), /settings: unknown field "bogus"/);
  class NoPrimary extends Composite {
    manifest() {
      return new Manifest('x', '0');
    }
  }
  assert.throws(() => new Harness(NoPrimary), /primary is not set/);
});

test('findController: Composite classes and the module form', () => {
  class A extends Composite {}
  class Duck {
    manifest() {}
    sync() {}
  }
  assert.equal(findController({ default: A }), A);
  assert.equal(controllerKind(A), 'composite');
  assert.equal(controllerKind(Duck), 'composite', 'a class with manifest() and sync()');
  assert.equal(controllerKind(Plain), 'controller');
  assert.equal(controllerKind(Composite), 'composite');
  assert.equal(controllerKind(class extends Controller {}), 'controller');
  assert.equal(controllerKind(class {}), undefined);
  assert.equal(findController({ Duck, helper: () => 1 }), Duck);
  assert.throws(() => findController({ A, Plain }), /found: A, Plain/);
  assert.throws(() => findController({ default: { sync() {} } }), /must be a Controller class .* or a Composite class/);

  const mod = {
    settingsDefaults: { title: 'none' },
    manifest: (settings) => new Manifest(`mod-${settings.title}`, '0').primary(SITE).child(kinds.CONFIG_MAP),
    sync: (request) => ({ status: { n: request.childrenOf(kinds.CONFIG_MAP).length } }),
  };
  const Found = findController(mod);
  assert.equal(controllerKind(Found), 'composite');
  const h = new Harness(mod, { settings: { title: 't' } });
  assert.equal(h.manifest.name, 'mod-t');
  assert.deepEqual(h.sync(site()), { status: { n: 0 }, children: [], resyncAfter: undefined, finalized: false });
  assert.deepEqual(h.finalize(site()), { status: undefined, children: [], resyncAfter: undefined, finalized: true }, "Composite's default finalize");
  assert.deepEqual(h.customize(site()), [], "Composite's default customize");
  assert.throws(() => new Harness(mod, { settings: { other: 1 } }), /unknown field "other"/);
  assert.throws(() => findController({ sync() {} }), /must export manifest\(settings\) too/);
  assert.throws(() => findController({ sync() {}, manifest: 3 }), /`manifest` export must be a function/);
  assert.equal(findController({ default: SiteController, sync() {} }), SiteController, 'the default export first');
});

test('sync through the dispatch: the request grouped by kind, the answer as the WIT has it', () => {
  const runner = described(SiteController, '{"resyncMs": 1500.2}');
  const cm = o.newObject(kinds.CONFIG_MAP, 'a-page', 'default');
  const secret = o.newObject(kinds.SECRET, 's', 'default');
  const other = o.newObject(gvk('', 'v2', 'Secret'), 't', 'default');
  const answer = runner.sync(
    'sync',
    witRequest(
      site('a', { title: 'T' }),
      [
        [kinds.CONFIG_MAP, [cm]],
        [kinds.SECRET, []],
      ],
      [
        [kinds.SECRET, [secret]],
        [gvk('', 'v2', 'Secret'), [other]],
      ],
    ),
  );
  assert.deepEqual(answer, {
    status: JSON.stringify({ pages: 1, secrets: ['s', 't'] }),
    children: [JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a-page' }, data: { title: 'T' } })],
    resyncAfter: 1501,
    finalized: false,
  });
  const request = runner.controller.seen;
  assert.ok(request instanceof SyncRequest);
  assert.equal(request.finalizing, false);
  assert.deepEqual(request.parent, site('a', { title: 'T' }));
  assert.deepEqual(request.childrenOf(kinds.CONFIG_MAP), [cm]);
  assert.deepEqual(request.childrenOf(kinds.SECRET), []);
  assert.deepEqual(request.childrenOf(kinds.POD), [], 'a kind it does not have: empty');
  assert.deepEqual(request.relatedOf(kinds.SECRET), [secret, other], 'across every rule of the kind, any version');
  assert.deepEqual(
    request.children.map((g) => g.resource),
    [kinds.CONFIG_MAP, kinds.SECRET],
  );
});

test('finalize through the dispatch: the default, and an override', () => {
  const runner = described(SiteController);
  assert.deepEqual(runner.sync('finalize', witRequest(site(), [], [], true)), { status: undefined, children: [], resyncAfter: undefined, finalized: true });
  class Lingering extends SiteController {
    finalize(request) {
      this.finalizing = request.finalizing;
      return { status: { phase: 'cleaning' }, resyncAfter: 0.2 };
    }
  }
  const lingering = described(Lingering);
  assert.deepEqual(lingering.sync('finalize', witRequest(site(), [], [], true)), {
    status: '{"phase":"cleaning"}',
    children: [],
    resyncAfter: 1,
    finalized: false,
  });
  assert.equal(lingering.controller.finalizing, true);
});

test('customize through the dispatch: the rules as the WIT has them', () => {
  const runner = described(SiteController);
  assert.deepEqual(runner.customize(JSON.stringify(site('a', { secret: 's', selector: 'team=a' }))), [
    { resource: kinds.SECRET, namespace: 'default', names: ['s'], labelSelector: undefined },
    { resource: kinds.SECRET, namespace: undefined, names: [], labelSelector: 'team=a' },
  ]);
  assert.deepEqual(runner.customize(JSON.stringify(site())), []);
  class Plainer extends SiteController {
    customize() {
      return [{ resource: kinds.NODE }, { resource: kinds.SECRET, namespace: '', labelSelector: '' }];
    }
  }
  assert.deepEqual(described(Plainer).customize(JSON.stringify(site())), [
    { resource: kinds.NODE, namespace: undefined, names: [], labelSelector: undefined },
    { resource: kinds.SECRET, namespace: undefined, names: [], labelSelector: undefined },
  ]);
  class Returns extends SiteController {
    customize(parent) {
      return parent.spec.value;
    }
  }
  const returns = described(Returns);
  assert.deepEqual(returns.customize(JSON.stringify(site('a', { value: null }))), [], 'nothing is no rules');
  for (const [value, message] of [
    [{ resource: kinds.NODE }, /not an array of RelatedRule/],
    [[3], /customize rule 0 is number 3, not a RelatedRule/],
    [[{ resource: 'Node' }], /resource must be a gvk/],
    [[{ resource: kinds.NODE, names: 'a' }], /names must be an array of strings/],
    [[{ resource: kinds.NODE, selector: 'a=b' }], /unknown field "selector"/],
    [[{ resource: kinds.NODE, namespace: 3 }], /namespace must be a string/],
  ]) {
    assert.throws(
      () => returns.customize(JSON.stringify(site('a', { value }))),
      (e) => e instanceof TypeError && message.test(e.message),
      message.source,
    );
  }
});

test('an SDK error is an answer, cut; anything else propagates, to trap', () => {
  const runner = described(SiteController);
  assert.throws(() => runner.sync('sync', witRequest(site('a', { mode: 'conflict' }))), Conflict);
  assert.throws(
    () => runner.sync('sync', witRequest(site('a', { mode: 'bug' }))),
    (e) => e instanceof TypeError && !(e instanceof Conflict),
  );
  assert.throws(() => runner.customize(JSON.stringify(site('a', { mode: 'customize-bug' }))), /customize bug/);
  class Loud extends SiteController {
    sync() {
      throw new NotFound('é'.repeat(40000));
    }
  }
  assert.throws(
    () => described(Loud).sync('sync', witRequest(site())),
    (e) => e instanceof NotFound && e.message === 'é'.repeat(32768),
  );
  assert.throws(
    () => runner.sync('sync', { ...witRequest(site()), parent: '{' }),
    (e) => e instanceof Invalid && /the parent does not parse/.test(e.message),
  );
  assert.throws(
    () => runner.sync('sync', { ...witRequest(site()), children: [{ resource: kinds.CONFIG_MAP, items: ['{'] }] }),
    (e) => e instanceof Invalid && /a child does not parse/.test(e.message),
  );
});

test('an answer that is not a SyncResponse is a bug', () => {
  const runner = described(SiteController);
  for (const [mode, error, message] of [
    ['undefined', TypeError, /sync returned undefined, not a SyncResponse/],
    ['typo', TypeError, /unknown field "requeueAfter"/],
    ['bad-status', TypeError, /status must be an object, not string "ready"/],
    ['bad-child', TypeError, /children\[0\] is null, not an object/],
    ['bad-resync', RangeError, /resyncAfter: bad delay -1/],
  ]) {
    assert.throws(
      () => runner.sync('sync', witRequest(site('a', { mode }))),
      (e) => e instanceof error && message.test(e.message),
      mode,
    );
  }
  class Cyclic extends SiteController {
    sync() {
      const child = o.newObject(kinds.CONFIG_MAP, 'c');
      child.self = child;
      return { children: [child] };
    }
  }
  assert.throws(
    () => described(Cyclic).sync('sync', witRequest(site())),
    (e) => e instanceof TypeError && /children\[0\] is not JSON/.test(e.message),
  );
});

test('resyncAfter is milliseconds, rounded up to whole ones like requeueAfter', () => {
  class Resync extends SiteController {
    sync(request) {
      return { resyncAfter: request.parent.spec.ms };
    }
  }
  const runner = described(Resync);
  const resync = (ms) => runner.sync('sync', witRequest(site('a', { ms }))).resyncAfter;
  assert.equal(resync(2500), 2500);
  assert.equal(resync(0.4), 1, 'a positive delay never becomes 0');
  assert.equal(resync(0), 0);
  assert.equal(resync(1.5), 2);
  assert.equal(resync(1000.0000000000001), 1000, 'no float noise');
  assert.equal(resync(null), undefined, 'none');
  class Forever extends SiteController {
    sync() {
      return { resyncAfter: Infinity };
    }
  }
  assert.equal(described(Forever).sync('sync', witRequest(site())).resyncAfter, Infinity, 'the glue sends the longest u64');
});

test('the other kind of export is never called: calling it is a bug', () => {
  const declarative = described(SiteController);
  for (const call of [
    () => declarative.call('reconcile', objectKey('default', 'a'), JSON.stringify(site()), 0),
    () => declarative.call('released', objectKey('default', 'a'), JSON.stringify(site()), 0),
    () => declarative.mapRelated(kinds.SECRET, '{}'),
  ]) {
    assert.throws(call, (e) => e.constructor === Error && /never called for a declarative controller/.test(e.message));
  }
  const plain = described(Plain);
  for (const call of [() => plain.sync('sync', witRequest(site())), () => plain.sync('finalize', witRequest(site())), () => plain.customize('{}')]) {
    assert.throws(call, (e) => e.constructor === Error && /never called for a plain controller/.test(e.message));
  }
  assert.throws(() => new Harness(Plain).sync(site()), /never called for a plain controller/);
  assert.throws(() => new Harness(SiteController).reconcile(site()), /never called for a declarative controller/);
  assert.throws(() => new Runner(SiteController, new FakeHost()).sync('sync', witRequest(site())), /before describe/);
});

test('the harness: children from the store, related objects from customize', () => {
  const parent = site('a', { title: 'T', secret: 's' });
  const mine = {
    ...o.newObject(kinds.CONFIG_MAP, 'a-page', 'default'),
    metadata: { name: 'a-page', namespace: 'default', ownerReferences: [o.controllerOwnerRef(parent)] },
  };
  const notMine = o.newObject(kinds.CONFIG_MAP, 'b-page', 'default');
  const elsewhere = { ...mine, metadata: { ...mine.metadata, namespace: 'other' } };
  const h = new Harness(SiteController, {
    objects: [parent, mine, notMine, elsewhere, o.newObject(kinds.SECRET, 's', 'default'), o.newObject(kinds.SECRET, 's', 'other')],
  });
  const answer = h.sync(objectKey('default', 'a'));
  assert.deepEqual(answer, {
    status: { pages: 1, secrets: ['s'] },
    children: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a-page' }, data: { title: 'T' } }],
    resyncAfter: 30000,
    finalized: false,
  });
  const seen = h.controller.seen;
  assert.deepEqual(
    seen.children.map((g) => [g.resource.kind, g.items.map(o.name)]),
    [
      ['ConfigMap', ['a-page']],
      ['Secret', []],
    ],
  );
  assert.deepEqual(
    seen.related.map((g) => [g.resource.kind, g.items.map(o.key)]),
    [['Secret', [objectKey('default', 's')]]],
  );
  assert.deepEqual(h.host.logs, [{ level: 'info', message: 'sync', fields: { site: 'a', cached: 'true' } }], 'cache reads and logs work');
  assert.deepEqual(h.host.writes(), [], 'the harness writes nothing: the host does, from the answer');

  // Given explicitly: sorted, grouped by kind; customize not asked.
  const b = o.newObject(kinds.CONFIG_MAP, 'b', 'default');
  const a = o.newObject(kinds.CONFIG_MAP, 'a', 'default');
  h.sync(parent, { children: [b, a], related: [o.newObject(kinds.NODE, 'n1')] });
  assert.deepEqual(h.controller.seen.childrenOf(kinds.CONFIG_MAP).map(o.name), ['a', 'b']);
  assert.deepEqual(h.controller.seen.relatedOf(kinds.NODE).map(o.name), ['n1']);
  assert.throws(() => h.sync(parent, { children: [o.newObject(kinds.POD, 'p', 'default')] }), /Pod.v1 p is not of a child kind/);

  assert.deepEqual(h.customize(parent), [{ resource: kinds.SECRET, namespace: 'default', names: ['s'], labelSelector: undefined }]);
  assert.deepEqual(h.finalize(parent), { status: undefined, children: [], resyncAfter: undefined, finalized: true });
});

test('the harness hands related objects of a metadata-only kind as metadata', () => {
  class Meta extends SiteController {
    manifest() {
      return super.manifest().metadataOnly(kinds.SECRET);
    }
  }
  const secret = { ...o.newObject(kinds.SECRET, 's', 'default'), data: { k: 'dg==' } };
  const h = new Harness(Meta, { objects: [secret] });
  h.sync(site('a', { secret: 's' }));
  assert.deepEqual(h.controller.seen.relatedOf(kinds.SECRET), [
    { apiVersion: 'v1', kind: 'Secret', metadata: { name: 's', namespace: 'default', uid: 'uid-1', resourceVersion: '1' } },
  ]);
});

test('the fake host refuses client and events calls during sync, as the host does', () => {
  const h = new Harness(SiteController, { objects: [site()] });
  assert.throws(
    () => h.sync(site('a', { mode: 'write' })),
    (e) => e instanceof Forbidden && e.message === `patch ConfigMap.v1 refused: ${COMPOSING}`,
  );
  assert.throws(
    () => h.sync(site('a', { mode: 'event' })),
    (e) => e instanceof Forbidden && e.message === `an Event refused: ${COMPOSING}`,
  );
  assert.deepEqual(h.host.writes(), [], 'a refused write is not recorded');
  assert.deepEqual(h.host.events, []);
  assert.equal(h.host.cacheOnly, undefined, 'writes are allowed again after the call');
  const host = new FakeHost();
  host.cacheOnly = 'rule';
  for (const [call, message] of [
    [() => host.create(JSON.stringify(o.newObject(kinds.POD, 'p', 'ns'))), 'create Pod.v1 refused: rule'],
    [() => host.update(JSON.stringify(o.newObject(kinds.POD, 'p', 'ns'))), 'update Pod.v1 refused: rule'],
    [() => host.updateStatus(JSON.stringify(o.newObject(kinds.POD, 'p', 'ns'))), 'update Pod.v1 refused: rule'],
    [() => host.applyStatus(JSON.stringify(o.newObject(kinds.DEPLOYMENT, 'p', 'ns'))), 'patch Deployment.v1.apps refused: rule'],
    [() => host.patch(kinds.POD, 'ns', 'p', 'merge', '{}'), 'patch Pod.v1 refused: rule'],
    [() => host.delete(kinds.POD, 'ns', 'p'), 'delete Pod.v1 refused: rule'],
  ]) {
    assert.throws(call, (e) => e instanceof Forbidden && e.code === 'forbidden' && e.message === message, message);
  }
  assert.deepEqual(host.cacheList(kinds.POD), [], 'cache reads are not refused');
});
