// The checked-in TypeScript declarations of the WIT (types/wit/) match the WIT: regenerate them
// with `npm run gen-types` when this fails.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { findModules, generate } from '../scripts/gen-wit-types.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

test('types/wit matches the WIT', { skip: findModules() ? false : 'jco-transpile is not installed' }, async () => {
  const files = await generate();
  assert.ok(Object.keys(files).length >= 8);
  for (const [name, text] of Object.entries(files)) {
    const checkedIn = await readFile(join(ROOT, 'types/wit', name), 'utf8').catch(() => '<missing>');
    assert.equal(checkedIn, text, `types/wit/${name} is stale: run npm run gen-types`);
  }
});
