// TypeScript support: index.d.ts type-checks a TypeScript controller, and kubewasm-js bundles it.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { bundle } from '../src/build.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const FIXTURE = join(ROOT, 'test/fixtures/echo.ts');
const DECLARATIVE = join(ROOT, 'test/fixtures/site.ts');
const TSC = join(ROOT, 'node_modules/.bin/tsc');

test('a TypeScript controller bundles with the SDK and leaves the WIT imports', async () => {
  for (const fixture of [FIXTURE, DECLARATIVE]) {
    const source = await bundle(fixture);
    assert.match(source, /from "kubewasm:controller\/cache@0\.1\.6"/);
    assert.match(source, /from "kubewasm:controller\/fleet@0\.1\.6"/);
    assert.match(source, /export \{[^}]*\baccess\b[^}]*\bclusters\b[^}]*\bcomposite\b[^}]*\bplugin\b[^}]*\breconciler\b[^}]*\brelease\b[^}]*\bviews\b[^}]*\}/s);
    assert.doesNotMatch(source, /interface Settings/, 'types are erased');
    assert.doesNotMatch(source, /from "@kubewasm\/sdk/, 'the SDK is bundled, not imported');
  }
});

// tsc over `files` with the SDK's compiler options: its exit status and output.
async function typeCheck(files) {
  const dir = await mkdtemp(join(tmpdir(), 'kubewasm-tsc-'));
  try {
    const config = join(dir, 'tsconfig.json');
    await writeFile(
      config,
      JSON.stringify({
        compilerOptions: { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', types: [] },
        files,
      }),
    );
    const result = spawnSync(TSC, ['-p', config], { encoding: 'utf8' });
    return { status: result.status, output: result.stdout + result.stderr };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

test('a TypeScript controller type-checks against index.d.ts and the Kubernetes types', async () => {
  const { status, output } = await typeCheck([
    FIXTURE,
    DECLARATIVE,
    join(ROOT, 'test/fixtures/harness.ts'),
    join(ROOT, 'test/fixtures/typed.ts'),
    join(ROOT, 'test/fixtures/fleet.ts'),
  ]);
  assert.equal(status, 0, output);
});

test('the Kubernetes types refuse a misspelled field, a wrong type, a wrong kind and a missing required field', async () => {
  const { status, output } = await typeCheck([join(ROOT, 'test/fixtures/typed-wrong.ts')]);
  assert.equal(status, 2, output);
  for (const expected of [
    /typed-wrong\.ts\(5,.*'datta' does not exist in type 'ConfigMap'/,
    /typed-wrong\.ts\(6,.*Type 'number' is not assignable to type 'string'/,
    /typed-wrong\.ts\(7,.*Type '"Secret"' is not assignable to type '"ConfigMap"'/,
    /typed-wrong\.ts\(8,.*Property 'name' is missing/,
    /typed-wrong\.ts\(10,.*Type 'number \| undefined' is not assignable to type 'string \| undefined'/,
  ]) {
    assert.match(output, expected);
  }
});

test('bundling reports a missing module and a bad extension', async () => {
  await assert.rejects(bundle(join(ROOT, 'test/fixtures/missing.js')), /no such file/);
  await assert.rejects(bundle(join(ROOT, 'package.json')), /expected a JavaScript or TypeScript module/);
});
