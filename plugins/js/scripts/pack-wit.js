#!/usr/bin/env node
// npm pack leaves out the `wit` link to the repository's wit/: `prepack` copies the WIT files
// into packaged-wit/ for the tarball, `postpack` removes them. build.js reads wit/ when it
// exists (a checkout) and packaged-wit/ otherwise (an installed tarball).

import { cp, rm } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const target = join(ROOT, 'packaged-wit');

if (process.argv[2] === 'clean') {
  await rm(target, { recursive: true, force: true });
} else {
  await rm(target, { recursive: true, force: true });
  await cp(join(ROOT, 'wit'), target, { recursive: true, dereference: true, filter: (src) => !src.endsWith('~') });
  console.log(`copied the WIT to ${target}`);
}
