// Member clusters (contract 0.1.4): the manifest's cluster scope (the `clusters` export), the
// context's `cluster`, `clusters` and `inCluster` (the `fleet` import), and the fake host's members.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  Composite,
  Context,
  Controller,
  DONE,
  EventType,
  Forbidden,
  Invalid,
  Manifest,
  Members,
  NotFound,
  Unavailable,
  gvk,
  kinds,
  objectKey,
  objects as o,
} from '@kubewasm/sdk';
import { FakeHost, Harness, Refused } from '@kubewasm/sdk/testing';
import { Runner } from '../src/runtime.js';

const FOO = gvk('example.com', 'v1', 'Foo');
const NONE = { tag: 'none' };

const cm = (name, data = {}, namespace = 'default') => o.newObject(kinds.CONFIG_MAP, name, namespace, { data });

// --- the manifest ---

test('members and the default scope', () => {
  assert.deepEqual(Members.none, { tag: 'none' });
  assert.deepEqual(Members.all, { tag: 'all' });
  assert.deepEqual(Members.matching('env=prod'), { tag: 'matching', val: 'env=prod' });
  assert.throws(() => Members.matching(['env=prod']), /a member selector is a label selector string, not an array/);
  assert.deepEqual(new Manifest('x', '0').primary(FOO).spec.scope, { serveLocal: true, serve: NONE, reach: NONE }, "the host's own cluster only");
});

test('the builder sets the scope in any order', () => {
  const m = new Manifest('x', '0').serveMembers(Members.matching('env=prod')).serveLocal(false).primary(FOO).reachMembers(Members.all);
  assert.deepEqual(m.forHost().scope, { serveLocal: false, serve: { tag: 'matching', val: 'env=prod' }, reach: { tag: 'all' } });
  assert.throws(() => new Manifest('x', '0').reachMembers('all'), /expected Members.none, Members.all or Members.matching\(selector\), not string/);
  assert.throws(() => new Manifest('x', '0').serveMembers({ tag: 'matching' }), TypeError);
  const a = new Manifest('a', '0').serveMembers(Members.all);
  assert.deepEqual(new Manifest('b', '0').spec.scope.serve, NONE, 'manifests do not share a scope');
  assert.deepEqual(a.spec.scope.serve, { tag: 'all' });
});

/** Copies its primary ConfigMap into the member clusters it reaches (`data.mode` picks other uses of a named cluster). */
class Hub extends Controller {
  static settingsDefaults = { serve: null, reach: 'env=prod' };

  manifest() {
    const m = new Manifest('hub', '0.1.0').primary(kinds.CONFIG_MAP).reachMembers(Members.matching(this.settings.reach));
    if (this.settings.serve !== null) m.serveMembers(Members.matching(this.settings.serve));
    return m;
  }

  reconcile(obj, ctx) {
    const mode = obj.data?.mode ?? 'copy';
    if (mode === 'copy') {
      for (const member of ctx.clusters()) ctx.inCluster(member.name).apply(cm(o.name(obj), { copied: 'yes' }, o.namespace(obj)));
      ctx.event(
        obj,
        EventType.NORMAL,
        'Copied',
        'Reconcile',
        ctx
          .clusters()
          .map((c) => c.name)
          .join(','),
      );
    } else if (mode.startsWith('to:')) {
      ctx.inCluster(mode.slice(3) || undefined).apply(cm(`${o.name(obj)}-copy`, {}, o.namespace(obj)));
    } else if (mode === 'where') {
      ctx.apply(cm('here', { cluster: String(ctx.cluster()), inside: String(ctx.inCluster('eu').cluster()) }, o.namespace(obj)));
    } else if (mode === 'hub') {
      ctx.inCluster(undefined).apply(cm(`from-${ctx.cluster()}`, {}, o.namespace(obj)));
    }
    return DONE;
  }
}

const source = (name = 'config', mode = 'copy') => cm(name, { mode });

// --- the runner and the fake host ---

test('the scope is what the clusters export answers', () => {
  const h = new Harness(Hub, { settings: { serve: 'tier=edge' } });
  assert.deepEqual(h.runner.scope(), { serveLocal: true, serve: { tag: 'matching', val: 'tier=edge' }, reach: { tag: 'matching', val: 'env=prod' } });
  assert.deepEqual(h.host.scope, h.runner.scope(), 'the fake host reaches members by it');
  assert.deepEqual(new Runner(Hub, new FakeHost()).scope(), { serveLocal: true, serve: NONE, reach: NONE }, 'before describe');
});

test('writes land in the members the plugin reaches', () => {
  const h = new Harness(Hub, { objects: [source()] });
  const eu = h.host.addMember('eu', { labels: { region: 'eu', env: 'prod' } });
  const us = h.host.addMember('us', { labels: { env: 'prod' } });
  const dev = h.host.addMember('dev', { labels: { env: 'dev' } });
  assert.equal(h.reconcile(source()), DONE);
  assert.deepEqual(h.host.clusters(), [
    {
      name: 'eu',
      labels: [
        ['env', 'prod'],
        ['region', 'eu'],
      ],
    },
    { name: 'us', labels: [['env', 'prod']] },
  ]);
  for (const member of [eu, us]) {
    assert.deepEqual(member.get(kinds.CONFIG_MAP, 'default', 'config').data, { copied: 'yes' });
    assert.deepEqual(
      member.calls.map((c) => c.op),
      ['apply'],
    );
  }
  assert.deepEqual(dev.calls, []);
  assert.deepEqual(h.host.writes(), [], 'nothing in the hub');
  assert.deepEqual(
    h.host.events.map((e) => e.note),
    ['eu,us'],
    'Events stay with the call',
  );
});

test('an unknown member is unavailable, one out of reach forbidden', () => {
  const h = new Harness(Hub);
  h.host.addMember('dev', { labels: { env: 'dev' } });
  assert.throws(
    () => h.reconcile(source('config', 'to:mars')),
    (e) => e instanceof Unavailable && e.message === 'cluster "mars" is not engaged by this host now',
  );
  assert.throws(
    () => h.reconcile(source('config', 'to:dev')),
    (e) => e instanceof Forbidden && e.message === 'cluster "dev" is not within the plugin\'s clusters (its `clusters` scope)',
  );
  h.host.addMember('eu', { labels: { env: 'prod' } });
  h.reconcile(source('config', 'to:eu'));
  h.host.removeMember('eu');
  assert.throws(() => h.reconcile(source('config', 'to:eu')), Unavailable);
});

test("undefined names the host's own cluster", () => {
  const h = new Harness(Hub);
  h.reconcile(source('config', 'to:'));
  assert.ok(h.host.get(kinds.CONFIG_MAP, 'default', 'config-copy'));
});

test("a member's failure is its own", () => {
  const h = new Harness(Hub);
  const eu = h.host.addMember('eu', { labels: { env: 'prod' } });
  const us = h.host.addMember('us', { labels: { env: 'prod' } });
  eu.fail('apply', new Unavailable('the API server of eu does not answer'));
  assert.throws(() => h.reconcile(source()), /does not answer/);
  assert.deepEqual(us.calls, [], 'the copy into eu came first and failed the call');
  h.reconcile(source());
  assert.ok(eu.get(kinds.CONFIG_MAP, 'default', 'config') && us.get(kinds.CONFIG_MAP, 'default', 'config'));
});

test('every read and write goes to the named cluster', () => {
  const host = new FakeHost([cm('a', { x: 'hub' })]);
  const eu = host.addMember('eu', { objects: [cm('a', { x: 'eu' }), cm('b', { x: 'eu' })] });
  const ctx = new Context(host, objectKey('default', 'a'));
  const there = ctx.inCluster('eu');
  assert.deepEqual(ctx.get(kinds.CONFIG_MAP, 'default', 'a').data, { x: 'hub' });
  assert.deepEqual(there.get(kinds.CONFIG_MAP, 'default', 'a').data, { x: 'eu' });
  assert.deepEqual(there.list(kinds.CONFIG_MAP, 'default').map(o.name), ['a', 'b']);
  assert.equal(there.create(cm('c')).metadata.name, 'c');
  const stored = there.get(kinds.CONFIG_MAP, 'default', 'c');
  there.update({ ...stored, data: { y: '1' } });
  there.updateStatus({ ...there.get(kinds.CONFIG_MAP, 'default', 'c'), status: { ok: true } });
  there.applyStatus({ ...cm('c'), status: { more: 1 } });
  there.patch(kinds.CONFIG_MAP, 'default', 'c', { data: { z: '2' } });
  there.patch(kinds.CONFIG_MAP, 'default', 'c', [{ op: 'add', path: '/data/w', value: '3' }], 'json');
  assert.deepEqual(eu.get(kinds.CONFIG_MAP, 'default', 'c').data, { y: '1', z: '2', w: '3' });
  assert.deepEqual(eu.get(kinds.CONFIG_MAP, 'default', 'c').status, { ok: true, more: 1 });
  there.delete(kinds.CONFIG_MAP, 'default', 'c');
  assert.throws(() => there.delete(kinds.CONFIG_MAP, 'default', 'c'), NotFound);
  assert.deepEqual(
    eu.calls.map((c) => c.op),
    ['create', 'update', 'updateStatus', 'applyStatus', 'patch', 'patch', 'delete', 'delete'],
  );
  assert.deepEqual(host.calls, [], 'nothing written in the hub');
  assert.deepEqual(ctx.inCluster('eu').inCluster(undefined).get(kinds.CONFIG_MAP, 'default', 'a').data, { x: 'hub' });
  assert.deepEqual(ctx.inCluster(null).get(kinds.CONFIG_MAP, 'default', 'a').data, { x: 'hub' }, "null: the host's own too");
  assert.deepEqual(ctx.clusters(), [{ name: 'eu', labels: {} }], 'a FakeHost without a scope reaches every member');
  there.event(cm('a'), 'normal', 'Seen', 'Reconcile');
  there.info('logged');
  assert.equal(host.events.length, 1, 'Events stay with the call');
  assert.deepEqual(eu.events, []);
  assert.equal(host.logs[0].message, 'logged');
});

test('listControlled and long cluster names are refused in a named cluster', () => {
  const host = new FakeHost();
  host.addMember('eu');
  const ctx = new Context(host);
  assert.throws(
    () => ctx.inCluster('eu').listControlled(kinds.CONFIG_MAP, 'uid-1', 'default'),
    (e) => e instanceof Invalid && e.message === "listControlled reads the call's own cluster only: list by label in another",
  );
  assert.throws(() => ctx.inCluster(undefined).deleteControlled({ ...cm('p'), metadata: { name: 'p', uid: 'u' } }, [[kinds.CONFIG_MAP, true]]), Invalid);
  assert.throws(
    () => ctx.inCluster('é'.repeat(127)),
    (e) => e instanceof Invalid && e.message === 'cluster is 254 bytes; at most 253',
  );
  assert.ok(ctx.inCluster('c'.repeat(253)));
  assert.throws(() => ctx.inCluster(7), /a cluster is named by a string/);
});

// --- a plugin that serves members ---

test('a call in a served member acts there', () => {
  const h = new Harness(Hub, { settings: { serve: 'tier=edge' } });
  const edge = h.host.addMember('edge-1', { labels: { tier: 'edge' }, objects: [source('there', 'where')] });
  h.host.addMember('eu', { labels: { env: 'prod' } });
  assert.equal(h.reconcile(objectKey('default', 'there'), { cluster: 'edge-1' }), DONE);
  assert.deepEqual(edge.get(kinds.CONFIG_MAP, 'default', 'here').data, { cluster: 'edge-1', inside: 'edge-1' }, "ctx.cluster() is the call's");
  assert.equal(h.host.current, undefined);
  assert.equal(h.runner.host, h.host, 'restored after the call');
  h.reconcile(source('config', 'where'));
  assert.deepEqual(h.host.get(kinds.CONFIG_MAP, 'default', 'here').data, { cluster: 'undefined', inside: 'undefined' });
  h.reconcile(source('config', 'hub'), { cluster: 'edge-1' });
  assert.ok(h.host.get(kinds.CONFIG_MAP, 'default', 'from-edge-1'), "inCluster(undefined): the host's own");
  h.reconcile(source('config', 'to:edge-1'), { cluster: 'edge-1', retries: 2 });
  assert.ok(edge.get(kinds.CONFIG_MAP, 'default', 'config-copy'), "naming the call's own cluster");
});

test('the harness calls only clusters the plugin serves', () => {
  const h = new Harness(Hub);
  h.host.addMember('eu', { labels: { env: 'prod' } });
  assert.throws(() => h.reconcile(source(), { cluster: 'eu' }), /does not serve member cluster "eu"/);
  assert.throws(() => h.finalize(source(), { cluster: 'mars' }), /no member cluster "mars"/);

  class MembersOnly extends Hub {
    manifest() {
      return super.manifest().serveMembers(Members.all).serveLocal(false);
    }
  }
  const m = new Harness(MembersOnly);
  m.host.addMember('eu');
  assert.throws(() => m.reconcile(source()), /does not serve the host's own cluster/);
  assert.equal(m.released(source(), { cluster: 'eu' }), DONE);
});

/** A declarative controller reading a member through the fleet, and trying to write there. */
class Mirror extends Composite {
  manifest() {
    return new Manifest('mirror', '0.1.0').primary(FOO).child(kinds.CONFIG_MAP).reachMembers(Members.all).metadataOnly(kinds.SECRET);
  }

  sync(request, ctx) {
    const remote = ctx.inCluster('eu');
    if (request.parent.spec?.write) remote.create(cm('x'));
    const secret = remote.get(kinds.SECRET, 'default', 's');
    return { status: { secretData: secret?.data ?? null } };
  }
}

test('a declarative controller reads members and writes nowhere', () => {
  const h = new Harness(Mirror);
  const eu = h.host.addMember('eu', { objects: [{ ...o.newObject(kinds.SECRET, 's', 'default'), data: { k: 'dg==' } }] });
  const parent = o.newObject(FOO, 'p', 'default');
  assert.deepEqual(h.sync(parent).status, { secretData: null }, 'a metadata-only kind is handed as metadata in a member too');
  assert.throws(
    () => h.sync({ ...parent, spec: { write: true } }),
    (e) => e instanceof Forbidden && e.message.startsWith('create ConfigMap.v1 refused'),
  );
  assert.deepEqual(eu.calls, []);
});

test('a member selector that does not parse refuses the plugin', () => {
  assert.throws(
    () => new Harness(Hub, { settings: { serve: 'env in (' } }),
    (e) => e instanceof Refused && e.message === 'manifest field `clusters.serve`: label selector "env in (": unbalanced \'(\'',
  );
});
