#!/usr/bin/env node
// `npm run build` (and `prepare`, so `npm pack` and a git install build too): the library in
// dist/ as vite.config.ts describes it (browser files, the service worker, the Node entry and the
// CLI), then the type declarations in dist/types/, one per entry of package.json's exports.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';

const root = fileURLToPath(new URL('..', import.meta.url));
process.chdir(root);

for (const mode of ['production', 'service-worker', 'node']) {
  await build({ mode, logLevel: 'warn' });
}

// Type errors are `npm run typecheck`'s to report (this also runs as `prepare`, in the middle of
// an `npm install`): the build fails only when an entry's declarations are missing.
const tsc = spawnSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
const entries = ['index', 'node', 'worker', 'service-worker'];
const missing = entries.filter((e) => !existsSync(join(root, `dist/types/${e}.d.ts`)));
if (missing.length) {
  console.error(`build: no declarations for ${missing.join(', ')} (tsc exited with ${tsc.status})`);
  process.exit(1);
}
if (tsc.status !== 0) console.warn('build: tsc reported type errors (above); the declarations were written');

// TypeScript writes relative specifiers as the sources have them (`./transport/types`). Node's
// ESM resolution, which `moduleResolution: node16/nodenext` applies to this `type: module`
// package, needs the file: `./transport/types.js` (or `.../index.js` for a folder).
const types = join(root, 'dist/types');
function* declarations(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* declarations(path);
    else if (name.endsWith('.d.ts')) yield path;
  }
}
for (const file of declarations(types)) {
  const text = readFileSync(file, 'utf8');
  const fixed = text.replace(/((?:from|import)\s*\(?\s*)(['"])(\.\.?\/[^'"]*)\2/g, (whole, lead, quote, spec) => {
    if (/\.(js|mjs|cjs|json)$/.test(spec)) return whole;
    const target = resolve(dirname(file), spec);
    const withExt = existsSync(`${target}.d.ts`) ? `${spec}.js` : existsSync(join(target, 'index.d.ts')) ? `${spec}/index.js` : null;
    if (!withExt) throw new Error(`${file}: no declaration for ${spec}`);
    return `${lead}${quote}${withExt}${quote}`;
  });
  if (fixed !== text) writeFileSync(file, fixed);
}
