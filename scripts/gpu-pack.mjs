#!/usr/bin/env node
// `npm run gpu-pack -- DIR`: a self-contained folder (≤ 48 MiB) that runs `selfcheck` and the bench
// on a bare linux-x64 GPU host with a driver but no Node, no npm and no network:
//   DIR/node.xz       this machine's Node binary (linux-x64), xz-compressed
//   DIR/tree.tar.xz   the self-check CLI and the bench bundled into single files by esbuild (no
//                     node_modules, no vite at run time), beside src/ (the fixture writer hashes its
//                     sources to know a current fixture) and the two packages they load from disk:
//                     Dawn's linux-x64 binary (`webgpu`) and xgrammar (the bench's grammar-mask timing)
//   DIR/lib/          Debian's Vulkan loader (lib/vulkan) and GL dispatch libraries (lib/glvnd, which NVIDIA's
//                     Vulkan driver loads), each group used only where the host has none
//   DIR/run.sh        `run.sh selfcheck [ARGS]`, `run.sh bench [ARGS]`, `run.sh fixtures [ARGS]` (scripts/gpu-pack/run.sh)
// The pack is built from this checkout's sources and node_modules (after `npm install`).
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const LIMIT = 48 * 2 ** 20;

const raw = {
  name: 'raw',
  setup(b) {
    b.onResolve({ filter: /\?raw$/ }, (a) => ({ path: resolve(a.resolveDir, a.path.replace(/\?raw$/, '')), namespace: 'raw' }));
    b.onLoad({ filter: /.*/, namespace: 'raw' }, (a) => ({ contents: readFileSync(a.path, 'utf8'), loader: 'text' }));
  },
};

/** Bundles one entry into a single ESM file; Dawn stays a package on disk (a native addon), the rest is inlined. */
async function bundle(entry, outfile) {
  await build({
    stdin: { contents: entry, resolveDir: ROOT, sourcefile: 'pack-entry.ts', loader: 'ts' },
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    outfile,
    loader: { '.wgsl': 'text', '.jinja': 'text', '.txt': 'text' },
    plugins: [raw],
    // webgpu: the native addon; xgrammar: read from disk by path (src/structured/xgrammar.ts); the rest
    // are dev tools the bench's Chromium target imports on demand (not in a pack: --target node only).
    external: ['webgpu', '@mlc-ai/web-xgrammar', 'playwright', 'playwright-core', 'vite', 'vitest', 'lightningcss'],
    banner: { js: "import { createRequire as __packRequire } from 'node:module'; const require = __packRequire(import.meta.url);" },
    // package.json's sideEffects lists the library's entry files; the bench's module runs itself on import.
    ignoreAnnotations: true,
    logLevel: 'warning',
  });
}

/**
 * Libraries a bare host may lack, by group, copied from this machine's Debian packages: the Vulkan
 * loader (libvulkan1), and the GL vendor-neutral dispatch (libglvnd0, libglx0, libegl1, libopengl0,
 * libgl1, libgles2), which NVIDIA's Vulkan driver (libGLX_nvidia.so.0) loads: without it the loader
 * finds the ICD but "could not get vkCreateInstance" (seen on a GPU container with the driver mounted).
 */
const HOST_LIBS = {
  vulkan: ['libvulkan.so.1'],
  glvnd: ['libGLdispatch.so.0', 'libGLX.so.0', 'libEGL.so.1', 'libOpenGL.so.0', 'libGL.so.1', 'libGLESv2.so.2'],
};

function systemLibrary(name) {
  const line = execFileSync('ldconfig', ['-p'], { encoding: 'utf8' }).split('\n').find((l) => l.trim().startsWith(`${name} `) && l.includes('x86-64'));
  return line ? realpathSync(line.split('=>')[1].trim()) : null;
}

export async function gpuPack(dir) {
  if (process.platform !== 'linux' || process.arch !== 'x64') throw new Error(`gpu-pack builds a linux-x64 pack: run it on linux-x64 (this is ${process.platform}-${process.arch})`);
  const out = resolve(dir);
  rmSync(out, { recursive: true, force: true });
  const tree = join(out, 'tree');
  // The bundles sit where the fixture writer's sources are (src/testing/fixtures/): it hashes the
  // files around its own module to stamp the fixtures it writes, and puts them in tree/.fixtures.
  const here = join(tree, 'src/testing/fixtures');
  mkdirSync(here, { recursive: true });
  cpSync(join(ROOT, 'src'), join(tree, 'src'), { recursive: true, filter: (p) => !p.endsWith('.test.ts') });
  const run = (call) => `${call}.then((code) => { if (code !== null) process.stdout.write('', () => process.exit(code)); }, (e) => { console.error(e); process.exit(1); });`;
  await bundle(`import { main } from './src/cli/main';\n${run('main(process.argv.slice(2))')}`, join(here, 'cli.mjs'));
  await bundle(`import './src/bench/main';`, join(here, 'bench.mjs'));
  for (const [pkg, files] of [['webgpu', ['package.json', 'index.js', 'dist/linux-x64/dawn.node']], ['@mlc-ai/web-xgrammar', null]]) {
    const from = join(ROOT, 'node_modules', pkg);
    const to = join(tree, 'node_modules', pkg);
    if (files === null) cpSync(from, to, { recursive: true });
    else for (const f of files) mkdirSync(dirname(join(to, f)), { recursive: true }), copyFileSync(join(from, f), join(to, f));
  }
  execFileSync('tar', ['-C', out, '-cJf', join(out, 'tree.tar.xz'), 'tree'], { env: { ...process.env, XZ_OPT: '-1 -T0' } });
  rmSync(tree, { recursive: true });
  writeFileSync(join(out, 'node.xz'), execFileSync('xz', ['-1', '-T0', '-c', process.execPath], { maxBuffer: 2 ** 30 }));
  for (const [group, names] of Object.entries(HOST_LIBS)) {
    mkdirSync(join(out, 'lib', group), { recursive: true });
    for (const name of names) {
      const path = systemLibrary(name);
      if (path) copyFileSync(path, join(out, 'lib', group, name));
      else console.warn(`[gpu-pack] no ${name} here (Debian: apt-get install libvulkan1 libglvnd0 libglx0 libegl1 libopengl0 libgl1 libgles2): the host must have it`);
    }
  }
  copyFileSync(join(ROOT, 'scripts/gpu-pack/run.sh'), join(out, 'run.sh'));
  chmodSync(join(out, 'run.sh'), 0o755);
  const files = ['node.xz', 'tree.tar.xz', 'run.sh', ...Object.entries(HOST_LIBS).flatMap(([g, names]) => names.map((n) => `lib/${g}/${n}`))];
  const size = files.filter((f) => existsSync(join(out, f))).reduce((n, f) => n + statSync(join(out, f)).size, 0);
  if (size > LIMIT) throw new Error(`the pack is ${(size / 2 ** 20).toFixed(1)} MiB, over its ${LIMIT / 2 ** 20} MiB limit`);
  return { dir: out, bytes: size };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const dir = process.argv.slice(2).find((a) => a !== '--');
  if (!dir) {
    console.error('usage: npm run gpu-pack -- DIR');
    process.exit(2);
  }
  const { bytes } = await gpuPack(dir);
  console.log(`[gpu-pack] ${dir}: ${(bytes / 2 ** 20).toFixed(1)} MiB. On the GPU host: ${join(dir, 'run.sh')} selfcheck, then ${join(dir, 'run.sh')} bench`);
}
