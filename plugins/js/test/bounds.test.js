// The sizes the host takes, refused by the SDK before the call with the host's own message.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Context, Invalid, gvk, kinds, objects as o } from '@kubewasm/sdk';
import { FakeHost } from '@kubewasm/sdk/testing';
import { cut, utf8Length } from '../src/bounds.js';

const HOST_CALLS = [
  'cacheGet',
  'cacheList',
  'cacheListControlled',
  'apply',
  'applyStatus',
  'create',
  'update',
  'updateStatus',
  'patch',
  'delete',
  'publishEvent',
];

/** A host that fails the test when it is reached: every refusal here comes first. */
const noCalls = Object.fromEntries(HOST_CALLS.map((name) => [name, () => assert.fail(`the host was called (${name})`)]));

const ctx = new Context(noCalls);

function refused(call) {
  let message;
  assert.throws(call, (e) => {
    message = e.message;
    return e instanceof Invalid;
  });
  return message;
}

test('names, namespaces and kinds', () => {
  assert.equal(
    refused(() => ctx.get(kinds.CONFIG_MAP, 'ns', 'a'.repeat(254))),
    'name is 254 bytes; at most 253',
  );
  assert.equal(
    refused(() => ctx.get(kinds.CONFIG_MAP, 'n'.repeat(64), 'a')),
    'namespace is 64 bytes; at most 63',
  );
  assert.equal(
    refused(() => ctx.get(kinds.CONFIG_MAP, 'ns', 'é'.repeat(127))),
    'name is 254 bytes; at most 253',
    'bytes, not characters',
  );
  assert.equal(
    refused(() => ctx.delete(kinds.CONFIG_MAP, 'ns', 'a'.repeat(254))),
    'name is 254 bytes; at most 253',
  );
  assert.equal(
    refused(() => ctx.list(gvk('g'.repeat(254), 'v1', 'K'))),
    'group is 254 bytes; at most 253',
  );
  assert.equal(
    refused(() => ctx.list(gvk('', 'v'.repeat(64), 'K'))),
    'version is 64 bytes; at most 63',
  );
  assert.equal(
    refused(() => ctx.list(gvk('', 'v1', 'K'.repeat(64)))),
    'kind is 64 bytes; at most 63',
  );
  assert.equal(
    refused(() => ctx.list(kinds.CONFIG_MAP, 'n'.repeat(64))),
    'namespace is 64 bytes; at most 63',
  );
  assert.equal(
    refused(() => ctx.list(kinds.CONFIG_MAP, undefined, 'a'.repeat(4097))),
    'label selector is 4097 bytes; at most 4096',
  );
  assert.equal(
    refused(() => ctx.listControlled(kinds.CONFIG_MAP, 'u'.repeat(254))),
    'owner is 254 bytes; at most 253',
  );
  assert.equal(
    refused(() => ctx.listControlled(kinds.CONFIG_MAP, 'u', 'n'.repeat(64))),
    'namespace is 64 bytes; at most 63',
    'the namespace first, as the host checks',
  );
  assert.equal(
    refused(() => ctx.listControlled(gvk('', 'v1', 'K'.repeat(64)), 'u')),
    'kind is 64 bytes; at most 63',
  );
});

test('values at the bound reach the host', () => {
  const host = new FakeHost();
  const ok = new Context(host);
  assert.equal(ok.get(gvk('g'.repeat(253), 'v'.repeat(63), 'K'.repeat(63)), 'n'.repeat(63), 'a'.repeat(253)), undefined);
  assert.deepEqual(ok.list(kinds.CONFIG_MAP, undefined, 'a'.repeat(63)), []);
  assert.deepEqual(ok.listControlled(kinds.CONFIG_MAP, 'u'.repeat(253), 'n'.repeat(63)), []);
  ok.event(o.newObject(kinds.CONFIG_MAP, 'a'.repeat(253), 'ns'), 'normal', 'R'.repeat(128), 'A'.repeat(128), 'n'.repeat(1024));
  assert.equal(host.events.length, 1);
});

test('objects and patch bodies', () => {
  const big = o.newObject(kinds.CONFIG_MAP, 'a', 'ns', { data: { k: 'x'.repeat(3 << 20) } });
  const size = JSON.stringify(big).length;
  for (const call of ['apply', 'applyStatus', 'create', 'update', 'updateStatus']) {
    assert.equal(
      refused(() => ctx[call](big)),
      `object is ${size} bytes; at most 3145728`,
      call,
    );
  }
  const body = { data: { k: 'x'.repeat(3 << 20) } };
  assert.equal(
    refused(() => ctx.patch(kinds.CONFIG_MAP, 'ns', 'a', body)),
    `patch body is ${JSON.stringify(body).length} bytes; at most 3145728`,
  );
  assert.equal(
    refused(() => ctx.patch(kinds.CONFIG_MAP, 'ns', 'a', `${'x'.repeat(3 << 20)}é`)),
    'patch body is 3145730 bytes; at most 3145728',
  );
  assert.equal(
    refused(() => ctx.patch(kinds.CONFIG_MAP, 'ns', 'a'.repeat(254), {})),
    'name is 254 bytes; at most 253',
  );
});

test('event texts', () => {
  const cm = o.newObject(kinds.CONFIG_MAP, 'a', 'ns');
  assert.equal(
    refused(() => ctx.event(cm, 'normal', '', 'Reconcile')),
    'event reason must not be empty',
  );
  assert.equal(
    refused(() => ctx.event(cm, 'normal', 'Made', '')),
    'event action must not be empty',
  );
  assert.equal(
    refused(() => ctx.event(cm, 'normal', 'R'.repeat(129), 'A')),
    'event reason is 129 bytes; at most 128',
  );
  assert.equal(
    refused(() => ctx.event(cm, 'normal', 'R', 'A'.repeat(129))),
    'event action is 129 bytes; at most 128',
  );
  assert.equal(
    refused(() => ctx.event(cm, 'normal', 'R', 'A', 'n'.repeat(1025))),
    'event note is 1025 bytes; at most 1024',
  );
  assert.equal(
    refused(() => ctx.event(o.newObject(kinds.CONFIG_MAP, 'a'.repeat(254), 'ns'), 'normal', 'R', 'A')),
    'name is 254 bytes; at most 253',
  );
});

test('UTF-8 lengths and the cut keep whole characters', () => {
  assert.equal(utf8Length('aé€😀'), 1 + 2 + 3 + 4);
  assert.equal(utf8Length('\ud800'), 3, 'a lone surrogate is sent as U+FFFD');
  assert.equal(cut('short'), 'short');
  assert.equal(cut('x'.repeat(70000)), 'x'.repeat(65536));
  assert.equal(cut('€'.repeat(30000)), '€'.repeat(21845), '65 535 bytes: the 3-byte character at 65 536 is dropped whole');
  assert.equal(cut('😀'.repeat(20000)), '😀'.repeat(16384), 'surrogate pairs stay whole');
});
