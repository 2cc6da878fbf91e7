/**
 * The library as users get it: `npm pack` (which runs the build), the tarball installed into a
 * scratch folder, then
 * - a TypeScript project that imports every entry, under `bundler` and `nodenext` resolution;
 * - Node without the optional `webgpu` peer: the entry and the CLI say what to install;
 * - the same small app (app/main.js) built by Vite (build and dev server), webpack 5 and esbuild,
 *   and served with no bundler at all (an import map naming dist/), each running the default
 *   createEngine, the service worker, `worker: false` and the custom-worker recipe with one chat
 *   in Chromium.
 * Production builds are measured: the page's own JavaScript (what it loads before any engine)
 * stays under MAIN_THREAD_LIMIT, and no output imports a Node module.
 */
import { expect, test, type Browser } from '@playwright/test';
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build as esbuild } from 'esbuild';
import { build as viteBuild, createLogger, createServer as viteServer } from 'vite';
import webpack from 'webpack';
import { serveDirectory, type StaticServer } from '../../src/testing/server';

/** The page's JavaScript with the default Worker: the transport only (comlink client, fetch shim). */
const MAIN_THREAD_LIMIT = 60_000;

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const APP = fileURLToPath(new URL('./app', import.meta.url));

let scratch: string;
let models: StaticServer;
let modelURL: string;
const servers: Array<{ close(): Promise<void> }> = [];

test.beforeAll(async () => {
  test.setTimeout(300_000);
  scratch = mkdtempSync(join(tmpdir(), 'webgpu-llm-apps-'));
  // `npm pack` runs `prepare`: the tarball holds a fresh build.
  const packed = join(scratch, 'packed');
  mkdirSync(packed);
  run('npm', ['pack', '--pack-destination', packed], ROOT);
  const tarball = join(packed, readdirSync(packed).find((f) => f.endsWith('.tgz'))!);
  writeFileSync(join(scratch, 'package.json'), JSON.stringify({ name: 'scratch-apps', private: true, type: 'module' }));
  // The registry only for what the local cache lacks.
  run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', tarball], scratch);

  // The demo's bundled model: the tiny Qwen3 fixture as one Q8_0 GGUF (a no-op when current).
  run('npx', ['vite-node', 'tools/bundle-demo-model.ts'], ROOT);
  models = await serveDirectory(join(ROOT, 'demo/public/models'));
  modelURL = `${models.url}/tiny-qwen3/gguf/model-Q8_0.gguf`;
});

test.afterAll(async () => {
  for (const s of servers) await s.close();
  await models?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

test('the packed declarations typecheck an import of every entry, under bundler and nodenext resolution', () => {
  const dir = join(scratch, 'types');
  mkdirSync(dir);
  writeFileSync(
    join(dir, 'check.ts'),
    `import { createEngine, registerServiceWorker, installFetchShim, EngineError, type CreateEngineOptions, type EngineHandle } from 'webgpu-llm';
import * as node from 'webgpu-llm/node';
import 'webgpu-llm/worker';
import 'webgpu-llm/service-worker';
const options: CreateEngineOptions = { model: 'x', worker: true };
const inPage: Promise<EngineHandle> = createEngine(options);
const inNode: Promise<EngineHandle> = node.createEngine({ model: 'x' });
const device: Promise<GPUDevice> = inPage.then((e) => { throw new EngineError({ name: 'E', code: 'c', message: e.info.model }); });
void [inNode, device, registerServiceWorker, installFetchShim, node.serve];
`,
  );
  const tsc = join(ROOT, 'node_modules/.bin/tsc');
  for (const [module, resolution] of [
    ['ESNext', 'Bundler'],
    ['NodeNext', 'NodeNext'],
  ]) {
    const options = { strict: true, noEmit: true, target: 'ES2022', module, moduleResolution: resolution, lib: ['ES2023', 'DOM'], types: [], skipLibCheck: false };
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: options, files: ['check.ts'] }));
    const r = spawnSync(tsc, ['-p', dir], { encoding: 'utf8' });
    expect(r.stdout + r.stderr, `tsc with moduleResolution ${resolution}`).toBe('');
    expect(r.status).toBe(0);
  }
});

test('a web app installs no Dawn; Node without it is told to `npm install webgpu`', () => {
  expect(existsSync(join(scratch, 'node_modules/webgpu')), 'the optional peer `webgpu` was installed').toBe(false);

  const inNode = spawnSync(
    process.execPath,
    ['--input-type=module', '-e', `import('webgpu-llm/node').then((m) => m.createEngine({ model: ${JSON.stringify(modelURL)} })).catch((e) => { console.error(e.message); process.exit(3); });`],
    { cwd: scratch, encoding: 'utf8' },
  );
  expect(inNode.status).toBe(3);
  expect(inNode.stderr).toContain('npm install webgpu');

  const cli = spawnSync(join(scratch, 'node_modules/.bin/webgpu-llm'), ['generate', '--model', modelURL, '--prompt', 'hi'], { cwd: scratch, encoding: 'utf8' });
  expect(cli.status).not.toBe(0);
  expect(cli.stderr).toContain('npm install webgpu');
});

/** One scratch app: app/main.js, the bundler's custom-worker recipe, the page and the service worker. */
function makeApp(name: string, recipe: string, html: string, publicDir: string): string {
  const dir = join(scratch, name);
  mkdirSync(join(dir, publicDir), { recursive: true });
  cpSync(join(APP, 'main.js'), join(dir, 'main.js'));
  cpSync(join(APP, 'custom-worker', `${recipe}.js`), join(dir, 'custom-worker.js'));
  writeFileSync(join(dir, 'index.html'), html);
  // The README's step: serve the library's service worker from the site's root.
  cpSync(join(scratch, 'node_modules/webgpu-llm/dist/service-worker.js'), join(dir, publicDir, 'webgpu-llm-sw.js'));
  return dir;
}

const html = (scripts: string) =>
  `<!doctype html><html><head><meta charset="utf-8"><title>scratch app</title></head><body><p id="status" data-state="loading">loading</p>${scripts}</body></html>`;
const moduleScript = (src: string) => `<script type="module" src="${src}"></script>`;

/** Opens the app in a fresh context and runs each scenario of app/main.js: all answer the same chat. */
async function runScenarios(browser: Browser, url: string) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const log: string[] = [];
  page.on('console', (m) => log.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => log.push(`pageerror: ${e.message}`));
  try {
    await page.goto(`${url}?model=${encodeURIComponent(modelURL)}`);
    await expect(page.locator('#status')).toHaveAttribute('data-state', 'ready', { timeout: 60_000 });
    const answers: Record<string, unknown> = {};
    for (const scenario of ['defaultWorker', 'structured', 'serviceWorker', 'inPage', 'customWorker']) {
      const answer = await page
        .evaluate((s) => (window as unknown as { scenarios: Record<string, () => Promise<unknown>> }).scenarios[s]!(), scenario)
        .catch((e: Error) => ({ failed: e.message, log: log.slice(-10) }));
      expect(answer, scenario).toMatchObject({ status: 200, object: 'chat.completion', error: null });
      if (scenario !== 'structured') answers[scenario] = answer;
    }
    // Greedy decoding of one model: every transport gives the same text.
    const texts = new Set(Object.values(answers).map((a) => (a as { content: string }).content));
    expect(texts.size, JSON.stringify(answers)).toBe(1);
    expect([...texts][0]).toEqual(expect.any(String));
  } finally {
    await context.close();
  }
}

/** Static `import`/`export ... from` specifiers of a module, minified or not (not `import()`). */
function staticImports(code: string): string[] {
  const re = /(?:^|[;}\s])(?:import|export)\s*(?:[\w$*{}\s,]*?\s*from\s*)?["']([^"']+)["']/g;
  return [...code.matchAll(re)].map((m) => m[1]!);
}

/** Bytes of the given scripts and every module they import statically: what the page loads up front. */
function mainThreadBytes(outDir: string, entries: string[]): { bytes: number; files: string[] } {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const spec of staticImports(readFileSync(file, 'utf8'))) {
      if (!spec.startsWith('.') && !spec.startsWith('/')) throw new Error(`${relative(outDir, file)} imports the bare specifier ${spec}`);
      visit(spec.startsWith('/') ? join(outDir, spec) : join(dirname(file), spec));
    }
  };
  entries.forEach((e) => visit(join(outDir, e)));
  const files = [...seen];
  return { bytes: files.reduce((n, f) => n + readFileSync(f).length, 0), files: files.map((f) => relative(outDir, f)) };
}

/** Every .js file under `dir`. */
function scripts(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.js'))
    .map((f) => join(dir, f));
}

/** Fails when a script imports or requires a Node module (`node:x` or a Vite browser-external stub). */
function expectNoNodeModules(files: string[]) {
  for (const file of files) {
    const code = readFileSync(file, 'utf8');
    expect(code, file).not.toMatch(/(?:from|import|require)\s*\(?\s*["']node:/);
    expect(code, file).not.toContain('__vite-browser-external');
  }
}

function expectLightPage(label: string, outDir: string, entries: string[]) {
  const { bytes, files } = mainThreadBytes(outDir, entries);
  test.info().annotations.push({ type: 'main thread', description: `${label}: ${bytes} bytes (${files.join(', ')})` });
  console.log(`[apps] ${label}: the page's JavaScript is ${bytes} bytes: ${files.join(', ')}`);
  expect(bytes, `${label}: ${files.join(', ')}`).toBeLessThanOrEqual(MAIN_THREAD_LIMIT);
  expectNoNodeModules(scripts(outDir));
}

test('the packed browser files import no Node module and no bare specifier', () => {
  const dist = join(scratch, 'node_modules/webgpu-llm/dist');
  const browserFiles = readdirSync(dist)
    .filter((f) => f.endsWith('.js') && f !== 'node.js' && f !== 'cli.js')
    .map((f) => join(dist, f));
  expectNoNodeModules(browserFiles);
  for (const file of browserFiles) for (const spec of staticImports(readFileSync(file, 'utf8'))) expect(spec, file).toMatch(/^\.\//);
});

test('Vite build', async ({ browser }) => {
  const dir = makeApp('vite', 'vite', html(moduleScript('./main.js')), 'public');
  const warnings: string[] = [];
  const logger = createLogger('warn');
  logger.warn = (msg) => void warnings.push(msg);
  await viteBuild({ root: dir, configFile: false, logLevel: 'warn', customLogger: logger, build: { outDir: 'dist' } });
  expect(warnings.filter((w) => w.includes('externalized for browser compatibility'))).toEqual([]);

  const out = join(dir, 'dist');
  const page = readFileSync(join(out, 'index.html'), 'utf8');
  const entries = [...page.matchAll(/<(?:script[^>]*src|link[^>]*rel="modulepreload"[^>]*href)="\.?\/?([^"]+)"/g)].map((m) => m[1]!);
  expectLightPage('Vite build', out, entries);
  const server = await serveDirectory(out);
  servers.push(server);
  await runScenarios(browser, `${server.url}/index.html`);
});

test('Vite dev server', async ({ browser }) => {
  const dir = makeApp('vite-dev', 'vite', html(moduleScript('./main.js')), 'public');
  const server = await viteServer({ root: dir, configFile: false, logLevel: 'warn', server: { host: '127.0.0.1', port: 5191, strictPort: false } });
  await server.listen();
  servers.push(server);
  await runScenarios(browser, `${server.resolvedUrls!.local[0]!.replace(/\/$/, '')}/index.html`);
});

test('webpack 5', async ({ browser }) => {
  const dir = makeApp('webpack', 'webpack', html('<script src="./main.js"></script>'), 'dist');
  const out = join(dir, 'dist');
  await new Promise<void>((ok, fail) =>
    webpack({ mode: 'production', context: dir, entry: './main.js', output: { path: out, filename: 'main.js' }, devtool: false, performance: { hints: false } }, (err, stats) =>
      err ? fail(err) : stats?.hasErrors() ? fail(new Error(stats.toString('errors-only'))) : ok(),
    ),
  );
  cpSync(join(dir, 'index.html'), join(out, 'index.html'));
  expectLightPage('webpack', out, ['main.js']);
  const server = await serveDirectory(out);
  servers.push(server);
  await runScenarios(browser, `${server.url}/index.html`);
});

test('esbuild', async ({ browser }) => {
  const dir = makeApp('esbuild', 'esbuild', html(moduleScript('./app.js')), 'dist');
  const out = join(dir, 'dist');
  // esbuild does not bundle workers: the library's worker is a second entry, written beside the
  // app as worker.js, where the default createEngine (new URL('./worker.js', import.meta.url)) finds it.
  await esbuild({
    absWorkingDir: dir,
    entryPoints: { app: './main.js', worker: 'webgpu-llm/worker' },
    bundle: true,
    splitting: true,
    format: 'esm',
    minify: true,
    outdir: out,
    logLevel: 'warning',
  });
  cpSync(join(dir, 'index.html'), join(out, 'index.html'));
  expectLightPage('esbuild', out, ['app.js']);
  const server = await serveDirectory(out);
  servers.push(server);
  await runScenarios(browser, `${server.url}/index.html`);
});

test('no bundler: dist/ from a static folder', async ({ browser }) => {
  // Only the app's own bare imports need the import map; the library's files import each other by path.
  const importMap = { imports: { 'webgpu-llm': '/node_modules/webgpu-llm/dist/index.js', 'webgpu-llm/worker': '/node_modules/webgpu-llm/dist/worker.js' } };
  makeApp('static', 'static', html(`<script type="importmap">${JSON.stringify(importMap)}</script>${moduleScript('./main.js')}`), '.');
  // The service worker's scope is the folder it is served from: the site's root here.
  cpSync(join(scratch, 'node_modules/webgpu-llm/dist/service-worker.js'), join(scratch, 'webgpu-llm-sw.js'));
  const server = await serveDirectory(scratch);
  servers.push(server);
  await runScenarios(browser, `${server.url}/static/index.html`);
});

function run(cmd: string, args: string[], cwd: string) {
  try {
    execFileSync(cmd, args, { cwd, stdio: 'pipe', encoding: 'utf8' });
  } catch (e) {
    const { stdout, stderr } = e as { stdout?: string; stderr?: string };
    throw new Error(`${cmd} ${args.join(' ')} failed:\n${stdout ?? ''}\n${stderr ?? ''}`);
  }
}
