// The dispatch the component runs (src/runtime.js), against the fake host.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  Action,
  Conflict,
  Context,
  Controller,
  DONE,
  Forbidden,
  Invalid,
  Manifest,
  NotFound,
  Other,
  SettingsError,
  gvk,
  kinds,
  objectKey,
  objects as o,
} from '@kubewasm/sdk';
import { FakeHost, Harness, Refused } from '@kubewasm/sdk/testing';
import { findController, Runner } from '../src/runtime.js';

class Echo extends Controller {
  static settingsDefaults = { x: 0, fail: null, crash: false };

  constructor(settings) {
    super(settings);
    if (settings.fail !== null) throw new SettingsError(`fail: ${settings.fail}`);
    if (settings.crash) throw new TypeError('crash');
  }

  manifest() {
    return new Manifest('echo', '0.1.0').primary(kinds.CONFIG_MAP).permission(kinds.CONFIG_MAP, ['create', 'patch']);
  }

  reconcile(obj, ctx) {
    switch (o.field(obj, 'data.mode', '')) {
      case 'none':
        return undefined;
      case 'requeue':
        return Action.requeueAfter(2000);
      case 'conflict':
        throw new Conflict('stale');
      case 'bug':
        return obj.missing.deeper;
      case 'throw-string':
        throw 'just a string';
      case 'wrong-return':
        return 'done';
      case 'get-missing':
        assert.equal(ctx.get(kinds.CONFIG_MAP, 'default', 'nope'), undefined);
        return DONE;
      case 'copy': {
        const out = o.newObject(kinds.CONFIG_MAP, `${o.name(obj)}-out`, o.namespace(obj), { data: { from: o.name(obj) } });
        const stored = ctx.apply(out);
        ctx.event(obj, 'normal', 'Copied', 'Reconcile', `copied to ${o.name(stored)}`);
        ctx.info('copied', { to: o.name(stored), retries: ctx.retries });
        return DONE;
      }
      default:
        return DONE;
    }
  }

  finalize() {
    return Action.requeueAfter(1000);
  }
}

const cm = (name, mode = '', ns = 'default', labels = {}) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace: ns, labels },
  data: { mode },
});

test('describe and settings', () => {
  const h = new Harness(Echo, { settings: { x: 1 } });
  assert.equal(h.manifest.name, 'echo');
  assert.deepEqual(h.controller.settings, { x: 1, fail: null, crash: false }, 'the given keys over the defaults');
});

test('unknown settings are refused', () => {
  assert.throws(
    () => new Runner(Echo, new FakeHost()).describe('{"x": 1, "bogus": 2}'),
    (e) => e instanceof Refused && e.message === 'settings: unknown field "bogus"',
  );
  class NoSettings extends Echo {
    static settingsDefaults = {};
  }
  assert.throws(
    () => new Runner(NoSettings, new FakeHost()).describe('{"x": 1}'),
    (e) => e instanceof Refused && e.message === 'settings: unknown field "x"',
  );
  class Plain extends Controller {
    manifest() {
      return new Manifest('plain', '0').primary(kinds.CONFIG_MAP);
    }
    reconcile() {}
  }
  assert.throws(() => new Runner(Plain, new FakeHost()).describe('{"x": 1}'), /unknown field "x"/, 'a controller that declares none takes none');
});

test('settings defaults are not shared between instances', () => {
  class Mutating extends Echo {
    static settingsDefaults = { names: [] };
    constructor(settings) {
      super({ ...settings, fail: null });
      settings.names.push('one');
    }
  }
  new Harness(Mutating);
  assert.deepEqual(new Harness(Mutating).controller.settings.names, ['one']);
  assert.deepEqual(Mutating.settingsDefaults, { names: [] });
});
test('describe refuses', () => {
  for (const [settings, message] of [
    ['{"fail": 3}', /^fail: 3$/],
    ['{"crash": true}', /^TypeError: crash$/],
    ['[1]', /settings must be a table, not an array/],
    ['"x"', /settings must be a table, not string/],
    ['{', /settings are not JSON/],
  ]) {
    assert.throws(
      () => new Runner(Echo, new FakeHost()).describe(settings),
      (e) => e instanceof Refused && message.test(e.message),
      settings,
    );
  }
  for (const text of ['', '{}', 'null']) new Runner(Echo, new FakeHost()).describe(text);
});

test('describe requires a primary and a Manifest', () => {
  class NoPrimary extends Controller {
    manifest() {
      return new Manifest('x', '0');
    }
    reconcile() {}
  }
  assert.throws(() => new Runner(NoPrimary, new FakeHost()).describe('{}'), /primary is not set/);
  class NotAManifest extends Controller {
    manifest() {
      return { name: 'x' };
    }
    reconcile() {}
  }
  assert.throws(() => new Runner(NotAManifest, new FakeHost()).describe('{}'), /must return a Manifest/);
});

test('reconcile results', () => {
  const h = new Harness(Echo);
  assert.equal(h.reconcile(cm('a', 'none')), DONE);
  assert.equal(h.reconcile(cm('a', 'requeue')).requeueAfterMs, 2000);
  assert.equal(h.finalize(cm('a')).requeueAfterMs, 1000);
  assert.throws(() => h.reconcile(cm('a', 'conflict')), Conflict);
  assert.equal(h.reconcile(cm('a', 'get-missing')), DONE);
});

test('a bug is not an answer: it propagates, to trap', () => {
  const h = new Harness(Echo);
  assert.throws(
    () => h.reconcile(cm('a', 'bug')),
    (e) => e instanceof TypeError && !(e instanceof Other),
  );
  assert.throws(
    () => h.reconcile(cm('a', 'throw-string')),
    (e) => e === 'just a string',
  );
  assert.throws(
    () => h.reconcile(cm('a', 'wrong-return')),
    (e) => e instanceof TypeError && /not an Action/.test(e.message),
  );
});

test('returned error messages are cut to what the host takes', () => {
  class Loud extends Echo {
    reconcile() {
      throw new Conflict('é'.repeat(40000));
    }
  }
  assert.throws(
    () => new Harness(Loud).reconcile(cm('a')),
    (e) => e instanceof Conflict && e.message === 'é'.repeat(32768),
  );
  class LoudSettings extends Echo {
    constructor() {
      throw new SettingsError('x'.repeat(100000));
    }
  }
  assert.throws(
    () => new Runner(LoudSettings, new FakeHost()).describe('{}'),
    (e) => e instanceof Refused && e.message === 'x'.repeat(65536),
  );
});

test('reconcile with bad JSON, and before describe', () => {
  const r = new Runner(Echo, new FakeHost());
  assert.throws(() => r.call('reconcile', objectKey(undefined, 'a'), '{}', 0), /before describe/);
  r.describe('{}');
  assert.throws(
    () => r.call('reconcile', objectKey('default', 'a'), '{', 0),
    (e) => e instanceof Invalid && /does not parse/.test(e.message),
  );
});

test('reconcile by key, and what the fake host records', () => {
  const h = new Harness(Echo, { objects: [cm('src', 'copy')] });
  assert.equal(h.reconcile({ namespace: 'default', name: 'src' }, 2), DONE);
  assert.deepEqual(h.host.applied(), [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'src-out', namespace: 'default' }, data: { from: 'src' } }]);
  assert.ok(h.host.get(kinds.CONFIG_MAP, 'default', 'src-out').metadata.uid);
  assert.deepEqual(h.host.events, [
    {
      regarding: { resource: kinds.CONFIG_MAP, namespace: 'default', name: 'src' },
      eventType: 'normal',
      reason: 'Copied',
      action: 'Reconcile',
      note: 'copied to src-out',
    },
  ]);
  assert.deepEqual(h.host.logs, [{ level: 'info', message: 'copied', fields: { to: 'src-out', retries: '2' } }]);
});

test('injected failures propagate once', () => {
  const h = new Harness(Echo);
  h.host.fail('apply', new NotFound('gone'));
  assert.throws(
    () => h.reconcile(cm('src', 'copy')),
    (e) => e instanceof NotFound && e.message === 'gone',
  );
  assert.equal(h.reconcile(cm('src', 'copy')), DONE);
});

test('mapRelated failures propagate, to trap', () => {
  class Mapper extends Echo {
    mapRelated(_resource, obj, ctx) {
      if (o.name(obj) === 'bad') throw new Error('nope');
      if (o.name(obj) === 'reads') ctx.list(kinds.NODE);
      return [objectKey('default', 'x'), { namespace: 'default', name: 'y' }];
    }
  }
  const h = new Harness(Mapper);
  assert.deepEqual(h.mapRelated(kinds.SECRET, cm('ok')), [objectKey('default', 'x'), objectKey('default', 'y')]);
  assert.throws(() => h.mapRelated(kinds.SECRET, cm('bad')), /nope/);
  h.host.fail('cacheList', new Forbidden('no'));
  assert.throws(() => h.mapRelated(kinds.SECRET, cm('reads')), Forbidden);
});

const FOO = gvk('example.com', 'v1', 'Foo');

/** Owns Deployments (which it may delete) and Secrets (which it may not); binds `edit`. */
class Parent extends Controller {
  manifest() {
    return new Manifest('parent', '0.1.0')
      .finalizer('example.com/cleanup')
      .primary(FOO)
      .primarySelector('managed=true')
      .owns(kinds.DEPLOYMENT)
      .owns(kinds.SECRET)
      .permission(kinds.DEPLOYMENT, ['create', 'patch', 'delete'])
      .bindClusterRole('edit');
  }

  reconcile() {
    return DONE;
  }
}

const foo = (name = 'a', uid = 'foo-uid') => ({ apiVersion: 'example.com/v1', kind: 'Foo', metadata: { name, namespace: 'default', uid } });

const child = (resource, name, owner, { namespace = 'default', controller = true } = {}) =>
  o.newObject(resource, name, namespace, { metadata: { name, namespace, ownerReferences: [o.ownerRef(owner, { controller })] } });

test('describe gives the host the finalizer patch and the rules', () => {
  const h = new Harness(Parent);
  assert.ok(h.manifest.permissions.some((p) => p.resource === FOO && p.subresource === undefined && p.verbs.includes('patch')));
  assert.deepEqual(h.runner.rules(), [{ resource: kinds.CLUSTER_ROLE, subresource: undefined, verbs: ['bind'], namespaces: [], resourceNames: ['edit'] }]);
  assert.deepEqual(new Runner(Parent, new FakeHost()).rules(), [], 'no rules before describe');
});

/** Counts its Foo's Pods and maps Secrets to Foos, reading both metadata-only. */
class Counter extends Controller {
  manifest() {
    return new Manifest('counter', '0.1.0')
      .primary(FOO)
      .owns(kinds.POD)
      .watches(kinds.SECRET)
      .watches(kinds.CONFIG_MAP)
      .metadataOnly(kinds.POD)
      .metadataOnly(kinds.SECRET);
  }

  reconcile(_obj, ctx) {
    this.seen = { get: ctx.get(kinds.POD, 'default', 'p'), list: ctx.list(kinds.POD, 'default'), whole: ctx.get(kinds.CONFIG_MAP, 'default', 'c') };
    return DONE;
  }

  mapRelated(_resource, obj) {
    this.mapped = obj;
    return [objectKey('default', 'a')];
  }
}

const POD_METADATA = { name: 'p', namespace: 'default', uid: 'pod-uid', resourceVersion: '7', labels: { app: 'web' } };
const POD = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { ...POD_METADATA, managedFields: [{ manager: 'kubelet', operation: 'Update' }] },
  spec: { containers: [] },
  status: { phase: 'Running' },
};

test('describe gives the views export the metadata-only kinds', () => {
  assert.deepEqual(new Harness(Counter).runner.metadataOnly(), [kinds.POD, kinds.SECRET]);
  assert.deepEqual(new Harness(Parent).runner.metadataOnly(), [], 'none declared: every kind handed whole');
  assert.deepEqual(new Runner(Counter, new FakeHost()).metadataOnly(), [], 'none before describe');
});

test('the fake host hands metadata-only kinds as the host does', () => {
  const whole = cm('c');
  const h = new Harness(Counter, { objects: [foo(), POD, whole] });
  assert.equal(h.reconcile(objectKey('default', 'a')), DONE);
  const handed = { apiVersion: 'v1', kind: 'Pod', metadata: POD_METADATA };
  assert.deepEqual(h.controller.seen.get, handed);
  assert.deepEqual(h.controller.seen.list, [handed]);
  assert.deepEqual(h.controller.seen.whole.data, whole.data, 'a kind not declared is handed whole');
  assert.deepEqual(h.host.get(kinds.POD, 'default', 'p'), POD, 'the store keeps the whole object');
  const secret = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 's', namespace: 'default', managedFields: [] }, data: { k: 'dg==' } };
  assert.deepEqual(h.mapRelated(kinds.SECRET, secret), [objectKey('default', 'a')]);
  assert.deepEqual(h.controller.mapped, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 's', namespace: 'default' } });
  h.mapRelated(kinds.CONFIG_MAP, whole);
  assert.deepEqual(h.controller.mapped, whole);
});

test('released deletes only controlled children of deletable owned kinds', () => {
  const owner = foo();
  const h = new Harness(Parent, {
    objects: [
      owner,
      child(kinds.DEPLOYMENT, 'mine', owner),
      child(kinds.DEPLOYMENT, 'not-controller', owner, { controller: false }),
      child(kinds.DEPLOYMENT, 'other-owner', foo('b', 'other-uid')),
      child(kinds.DEPLOYMENT, 'elsewhere', owner, { namespace: 'other' }),
      child(kinds.SECRET, 'mine-too', owner),
    ],
  });
  assert.equal(h.released({ namespace: 'default', name: 'a' }), DONE);
  assert.deepEqual(
    h.host.writes('delete').map((c) => [c.resource, c.namespace, c.name]),
    [[kinds.DEPLOYMENT, 'default', 'mine']],
  );
  assert.ok(h.host.get(kinds.SECRET, 'default', 'mine-too'));
  assert.deepEqual(h.host.logs, [{ level: 'warn', message: 'leaving the Secret objects of a in place: the manifest grants no delete on them', fields: {} }]);
});

test('released tolerates a child already gone and fails on other errors', () => {
  const owner = foo();
  const h = new Harness(Parent, { objects: [owner, child(kinds.DEPLOYMENT, 'mine', owner)] });
  h.host.fail('delete', new NotFound('gone meanwhile'));
  assert.equal(h.released(owner), DONE);
  h.host.fail('delete', new Conflict('try again'));
  assert.throws(() => h.released(owner), Conflict);
});

test('released can be overridden', () => {
  class Keeper extends Parent {
    released(obj) {
      if (o.name(obj) === 'bug') throw new Error('nope');
      return Action.requeueAfter(5000);
    }
  }
  const h = new Harness(Keeper);
  assert.equal(h.released(foo()).requeueAfterMs, 5000);
  assert.deepEqual(h.host.writes(), []);
  assert.throws(
    () => h.released(foo('bug')),
    (e) => e instanceof Error && e.message === 'nope',
  );
});

test('findController', () => {
  class A extends Controller {}
  class B extends Controller {}
  assert.equal(findController({ default: A }), A);
  assert.equal(findController({ controller: B, default: A }), B);
  assert.equal(findController({ A, helper: () => 1 }), A);
  assert.throws(() => findController({ A, B }), /found: A, B/);
  assert.throws(() => findController({}), /found: none/);
  assert.throws(() => findController({ default: 3 }), /must be a Controller class/);
});

describe('Context against the fake host', () => {
  const make = (...objects) => {
    const host = new FakeHost(objects);
    return [host, new Context(host, objectKey('default', 'x'), 1)];
  };

  test('get and list', () => {
    const [, ctx] = make(cm('b', '', 'default', { app: 'web' }), cm('a', '', 'default', { app: 'db' }), cm('c', '', 'other', { app: 'web' }));
    assert.equal(o.name(ctx.get(kinds.CONFIG_MAP, 'default', 'a')), 'a');
    assert.equal(ctx.get(kinds.CONFIG_MAP, 'default', 'zzz'), undefined);
    assert.deepEqual(ctx.list(kinds.CONFIG_MAP).map(o.key), [objectKey('default', 'a'), objectKey('default', 'b'), objectKey('other', 'c')]);
    assert.deepEqual(ctx.list(kinds.CONFIG_MAP, 'default').map(o.name), ['a', 'b']);
    assert.deepEqual(ctx.list(kinds.CONFIG_MAP, undefined, 'app=web').map(o.name), ['b', 'c']);
    assert.deepEqual(ctx.list(kinds.SECRET), []);
    assert.equal(ctx.key.name, 'x');
    assert.equal(ctx.retries, 1);
  });

  test('listControlled', () => {
    const parent = { apiVersion: 'example.com/v1', kind: 'Parent', metadata: { name: 'p', namespace: 'default', uid: 'uid-p' } };
    const other = { apiVersion: 'example.com/v1', kind: 'Parent', metadata: { name: 'q', namespace: 'default', uid: 'uid-q' } };
    const child = (name, { ns = 'default', owner = parent, controller = true } = {}) => {
      const c = cm(name, '', ns);
      c.metadata.ownerReferences = [o.ownerRef(owner, { controller })];
      c.metadata.managedFields = [{ manager: 'm' }];
      return c;
    };
    const [host, ctx] = make(child('b'), child('a'), child('c', { ns: 'other' }), child('d', { owner: other }), child('e', { controller: false }), cm('f'), {
      ...child('g'),
      kind: 'Secret',
    });
    assert.deepEqual(ctx.listControlled(kinds.CONFIG_MAP, 'uid-p').map(o.key), [objectKey('default', 'a'), objectKey('default', 'b'), objectKey('other', 'c')]);
    assert.deepEqual(ctx.listControlled(kinds.CONFIG_MAP, 'uid-p', 'default').map(o.name), ['a', 'b']);
    assert.deepEqual(ctx.listControlled(kinds.CONFIG_MAP, 'uid-q').map(o.name), ['d']);
    assert.deepEqual(ctx.listControlled(kinds.CONFIG_MAP, 'uid-none'), []);
    assert.deepEqual(ctx.listControlled(kinds.CONFIG_MAP, 'uid-p')[0].data, { mode: '' }, 'a whole object');
    host.metadataOnly = [kinds.CONFIG_MAP];
    const handed = ctx.listControlled(kinds.CONFIG_MAP, 'uid-p', 'default')[0];
    assert.deepEqual(Object.keys(handed).sort(), ['apiVersion', 'kind', 'metadata'], 'a metadata-only kind: only the metadata');
    assert.equal(handed.metadata.managedFields, undefined);
    assert.deepEqual(host.get(kinds.CONFIG_MAP, 'default', 'a').metadata.managedFields, [{ manager: 'm' }], 'the store keeps them');
    host.fail('cacheListControlled', new Forbidden('no'));
    assert.throws(() => ctx.listControlled(kinds.CONFIG_MAP, 'uid-p'), Forbidden);
  });

  test('get returns a copy', () => {
    const [host, ctx] = make(cm('a'));
    ctx.get(kinds.CONFIG_MAP, 'default', 'a').data.mode = 'changed';
    assert.equal(host.get(kinds.CONFIG_MAP, 'default', 'a').data.mode, '');
  });

  test('create, update, conflicts', () => {
    const [host, ctx] = make();
    const created = ctx.create(cm('a'));
    assert.throws(
      () => ctx.create(cm('a')),
      (e) => e.code === 'already-exists',
    );
    created.data.mode = 'x';
    const updated = ctx.update(created);
    assert.notEqual(updated.metadata.resourceVersion, created.metadata.resourceVersion);
    assert.throws(() => ctx.update(created), Conflict);
    updated.status = { phase: 'ok' };
    ctx.updateStatus(updated);
    assert.deepEqual(host.get(kinds.CONFIG_MAP, 'default', 'a').status, { phase: 'ok' });
    assert.throws(() => ctx.update({ ...cm('missing'), metadata: { name: 'missing', namespace: 'default', resourceVersion: '1' } }), NotFound);
  });

  test('apply merges; applyStatus', () => {
    const [host, ctx] = make();
    const first = ctx.apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a', namespace: 'default' }, data: { x: '1' } });
    assert.equal(first.metadata.generation, 1);
    ctx.apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a', namespace: 'default' }, data: { y: '2' } });
    assert.deepEqual(host.get(kinds.CONFIG_MAP, 'default', 'a').data, { x: '1', y: '2' });
    ctx.applyStatus(o.statusObject(first, { ready: true }));
    assert.deepEqual(host.get(kinds.CONFIG_MAP, 'default', 'a').status, { ready: true });
    assert.throws(() => ctx.applyStatus(o.statusObject(cm('nope'), {})), NotFound);
    assert.deepEqual(
      host.calls.map((c) => c.op),
      ['apply', 'apply', 'applyStatus', 'applyStatus'],
    );
    assert.ok(host.calls.every((c) => c.force === true));
  });

  test('patch kinds', () => {
    const [host, ctx] = make(cm('a', 'm'));
    ctx.patch(kinds.CONFIG_MAP, 'default', 'a', { metadata: { annotations: { k: 'v' } }, data: { mode: null } });
    const stored = host.get(kinds.CONFIG_MAP, 'default', 'a');
    assert.deepEqual(stored.metadata.annotations, { k: 'v' });
    assert.ok(!('mode' in stored.data));
    ctx.patch(kinds.CONFIG_MAP, 'default', 'a', [{ op: 'add', path: '/data/z', value: '1' }], 'json');
    assert.deepEqual(host.get(kinds.CONFIG_MAP, 'default', 'a').data, { z: '1' });
    assert.throws(() => ctx.patch(kinds.CONFIG_MAP, 'default', 'a', [{ op: 'test', path: '/data/z', value: '2' }], 'json'), /test failed/);
    assert.throws(() => ctx.patch(kinds.CONFIG_MAP, 'default', 'a', { metadata: { resourceVersion: '0' } }), Conflict);
    assert.throws(() => ctx.patch(kinds.CONFIG_MAP, 'default', 'nope', {}), NotFound);
    assert.throws(() => ctx.patch(kinds.CONFIG_MAP, 'default', 'a', {}, 'bogus'), /not a PatchType/);
    const [first] = host.writes('patch');
    assert.equal(first.patchType, 'merge');
    assert.equal(first.name, 'a');
  });

  test('delete', () => {
    const [host, ctx] = make(cm('a'));
    ctx.delete(kinds.CONFIG_MAP, 'default', 'a');
    assert.equal(host.get(kinds.CONFIG_MAP, 'default', 'a'), undefined);
    assert.throws(() => ctx.delete(kinds.CONFIG_MAP, 'default', 'a'), NotFound);
  });

  test('objects that are not JSON', () => {
    const [, ctx] = make();
    const cyclic = cm('a');
    cyclic.self = cyclic;
    assert.throws(
      () => ctx.apply(cyclic),
      (e) => e instanceof Invalid && /not JSON/.test(e.message),
    );
    assert.throws(() => ctx.apply(undefined), Invalid);
  });
});

/** Reads only `data.keep` of its ConfigMaps and says what it was handed of each. */
class Narrow extends Controller {
  manifest() {
    return new Manifest('narrow', '0.1.0')
      .primary(kinds.CONFIG_MAP)
      .permission(kinds.CONFIG_MAP, ['create', 'patch', 'update'])
      .readsFields(kinds.CONFIG_MAP, 'data.keep', 'data.keep.deeper');
  }

  reconcile(obj, ctx) {
    const read = ctx.get(kinds.CONFIG_MAP, obj.metadata.namespace, obj.metadata.name);
    const out = o.newObject(kinds.CONFIG_MAP, `${obj.metadata.name}-out`, obj.metadata.namespace);
    out.data = {
      handed: Object.keys(obj.data ?? {})
        .sort()
        .join(','),
      read: Object.keys(read.data ?? {})
        .sort()
        .join(','),
      keep: 'x',
      other: 'y',
    };
    const answer = ctx.apply(out);
    if (Object.keys(answer.data).join(',') !== 'keep') throw new Invalid(`the answer carried ${Object.keys(answer.data)}`);
    ctx.update(obj);
    return DONE;
  }
}

test('the fake host hands a projected kind as the host does', () => {
  const cm = o.newObject(kinds.CONFIG_MAP, 'p', 'default');
  cm.data = { keep: 'k', drop: 'd' };
  const h = new Harness(Narrow, { objects: [cm] });
  assert.deepEqual(h.runner.projections(), [
    {
      resource: kinds.CONFIG_MAP,
      fields: [
        ['data', 'keep'],
        ['data', 'keep', 'deeper'],
      ],
    },
  ]);
  assert.throws(() => h.reconcile(cm), /update replaces the whole ConfigMap/);
  const out = h.host.writes('apply')[0].object;
  assert.deepEqual([out.data.handed, out.data.read], ['keep', 'keep'], 'the request and the cache read are projected');
  const stored = h.host.get(kinds.CONFIG_MAP, 'default', 'p-out');
  assert.deepEqual(Object.keys(stored.data).sort(), ['handed', 'keep', 'other', 'read'], 'the store keeps whole objects');
});
