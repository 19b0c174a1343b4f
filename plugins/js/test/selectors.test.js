// The fake host's label selectors against the table the host's parser is held to.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { Invalid, kinds } from '@kubewasm/sdk';
import { FakeHost, matchLabels, parseSelector } from '@kubewasm/sdk/testing';

// JSON written as YAML: drop the comment lines, then JSON.parse reads it.
const text = readFileSync(new URL('../../../tests/cases/selectors.yaml', import.meta.url), 'utf8');
const cases = JSON.parse(
  text
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('#'))
    .join('\n'),
);

test('the table is there', () => {
  assert.ok(cases.length > 30, `${cases.length} cases`);
});

for (const c of cases) {
  test(`selects what the host selects: ${JSON.stringify(c.selector)}`, () => {
    if (c.invalid) {
      assert.throws(
        () => parseSelector(c.selector),
        (e) => e instanceof Invalid && /label selector/.test(e.message),
      );
      return;
    }
    for (const labels of c.match ?? []) assert.ok(matchLabels(labels, c.selector), JSON.stringify(labels));
    for (const labels of c.miss ?? []) assert.ok(!matchLabels(labels, c.selector), JSON.stringify(labels));
  });
}

test('list uses it', () => {
  const host = new FakeHost(['a', 'b'].map((n) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: n, namespace: 'ns', labels: { app: n } } })));
  assert.deepEqual(
    host.cacheList(kinds.CONFIG_MAP, undefined, 'app in (b)').map((t) => JSON.parse(t).metadata.name),
    ['b'],
  );
  assert.throws(() => host.cacheList(kinds.CONFIG_MAP, undefined, 'app in b'), Invalid);
});
