// TypeScript support: index.d.ts type-checks a TypeScript controller, and kubewasm-js bundles it.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
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
    assert.match(source, /from "kubewasm:controller\/cache@0\.1\.3"/);
    assert.match(source, /export \{[^}]*\baccess\b[^}]*\bcomposite\b[^}]*\bplugin\b[^}]*\breconciler\b[^}]*\brelease\b[^}]*\bviews\b[^}]*\}/s);
    assert.doesNotMatch(source, /interface Settings/, 'types are erased');
    assert.doesNotMatch(source, /from "@kubewasm\/sdk/, 'the SDK is bundled, not imported');
  }
});

test('a TypeScript controller type-checks against index.d.ts', { skip: existsSync(TSC) ? false : 'no tsc installed' }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kubewasm-tsc-'));
  try {
    const config = join(dir, 'tsconfig.json');
    await writeFile(
      config,
      JSON.stringify({
        compilerOptions: { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', types: [] },
        files: [FIXTURE, DECLARATIVE, join(ROOT, 'test/fixtures/harness.ts')],
      }),
    );
    const result = spawnSync(TSC, ['-p', config], { encoding: 'utf8' });
    assert.equal(result.status, 0, result.stdout + result.stderr);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('bundling reports a missing module and a bad extension', async () => {
  await assert.rejects(bundle(join(ROOT, 'test/fixtures/missing.js')), /no such file/);
  await assert.rejects(bundle(join(ROOT, 'package.json')), /expected a JavaScript or TypeScript module/);
});
