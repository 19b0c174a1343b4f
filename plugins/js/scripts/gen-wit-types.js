#!/usr/bin/env node
// Generates the TypeScript declarations of the WIT world (types/wit/) from the repository's
// wit/ with jco's guest type generator: `npm run gen-types`. test/wit-types.test.js fails when
// the checked-in declarations no longer match the WIT.
//
// jco 1.35's type generator reads the WIT through a WASI filesystem shim that starts with no
// preopened directories (its CLI fails with "failed to get path metadata" / "No such file or
// directory"); preopening / on the shim instance it uses works around that.

import { existsSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const HEADER = '// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.\n';

function findModules() {
  const transpile = join(ROOT, 'node_modules/@bytecodealliance/jco-transpile');
  const shims = [
    join(transpile, 'node_modules/@bytecodealliance/preview2-shim/dist/nodejs/filesystem.js'),
    join(ROOT, 'node_modules/@bytecodealliance/preview2-shim/dist/nodejs/filesystem.js'),
  ];
  const shim = shims.find(existsSync);
  const typegen = join(transpile, 'dist/typegen.js');
  if (!shim || !existsSync(typegen)) return undefined;
  return { shim, typegen };
}

/** Generates the declarations; returns `{ relativePath: text }`. */
export async function generate(witDir = join(ROOT, 'wit')) {
  const modules = findModules();
  if (!modules) throw new Error('jco-transpile is not installed (npm install in plugins/js)');
  const { _setPreopens } = await import(pathToFileURL(modules.shim));
  const { generateGuestTypes } = await import(pathToFileURL(modules.typegen));
  _setPreopens({ '/': '/' });
  const files = await generateGuestTypes(resolve(witDir), { worldName: 'controller', outDir: '' });
  const out = {};
  for (const [name, bytes] of Object.entries(files)) out[name] = HEADER + new TextDecoder().decode(bytes);
  return out;
}

export { findModules };

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const outDir = join(ROOT, 'types/wit');
  const files = await generate();
  await rm(outDir, { recursive: true, force: true });
  for (const [name, text] of Object.entries(files)) {
    await mkdir(dirname(join(outDir, name)), { recursive: true });
    await writeFile(join(outDir, name), text);
  }
  console.log(`wrote ${Object.keys(files).length} files to ${outDir}`);
}
