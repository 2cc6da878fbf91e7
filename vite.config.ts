/// <reference types="vitest/config" />
import { builtinModules } from 'node:module';
import { availableParallelism } from 'node:os';
import { defineConfig, type BuildEnvironmentOptions, type Plugin } from 'vite';
import { playwright } from '@vitest/browser-playwright';
import { chromiumPath, chromiumArgs } from './scripts/chromium.mjs';

/** Imports `*.wgsl` files as strings, the same in the library build, in vitest and in vite-node. */
function wgsl(): Plugin {
  return {
    name: 'wgsl',
    transform(code, id) {
      if (!id.endsWith('.wgsl')) return null;
      // moduleType: the library build (rolldown) would otherwise parse the result as WGSL.
      return { code: `export default ${JSON.stringify(code)};`, map: null, moduleType: 'js' };
    },
  };
}

/**
 * The library build, in three parts (scripts/build.mjs runs them; `--mode` picks one):
 * - `production` (plain `vite build`): the browser entries index.js and worker.js, every
 *   dependency bundled, so that dist/ loads from any static folder (no bare imports, no import
 *   map) and every bundler can take it as it is.
 * - `service-worker`: service-worker.js alone, one file with no imports (a classic script).
 * - `node`: node.js and cli.js, with dependencies and Node's modules left to Node.
 */
const LIBRARY = {
  production: { index: 'src/index.ts', worker: 'src/worker.ts' },
  'service-worker': { 'service-worker': 'src/service-worker.ts' },
  node: { node: 'src/node.ts', cli: 'src/cli/main.ts' },
} as const;
type LibraryPart = keyof typeof LIBRARY;

/** The modules the page (the default Worker's client) and the Worker both import. */
const PAGE_AND_WORKER = /\/node_modules\/comlink\/|\/src\/transport\/(errors|wire|fetch|internals|sw-protocol)\.ts$/;

/**
 * The engine Worker is started with `new Worker(new URL('../worker.ts', import.meta.url))`, which
 * Vite's dev server and vitest bundle on the fly. In the library it must stay that pattern,
 * pointing at dist/worker.js, so that the app's bundler (Vite, webpack) bundles the worker, and a
 * page without a bundler loads dist/worker.js itself. Vite's own worker handling would instead
 * build a second copy of the engine under dist/assets/ with its own chunks.
 */
function engineWorkerURL(): Plugin {
  // As long as `"./worker.js"`, so that the source map's columns stay true.
  const marker = '__WLLM_WORK__';
  const source = "new URL('../worker.ts', import.meta.url)";
  return {
    name: 'webgpu-llm:engine-worker-url',
    apply: 'build',
    enforce: 'pre',
    transform(code, id) {
      if (!id.endsWith('/src/transport/worker-client.ts')) return null;
      if (!code.includes(source)) this.error(`worker-client.ts no longer has ${source}: update engineWorkerURL in vite.config.ts`);
      return { code: code.replace(source, `new URL(${marker}, import.meta.url)`), map: null };
    },
    renderChunk(code, chunk) {
      if (!code.includes(marker)) return null;
      if (chunk.fileName.includes('/')) this.error(`${chunk.fileName} starts the engine Worker but is not beside worker.js`);
      return { code: code.replaceAll(marker, '"./worker.js"'), map: null };
    },
  };
}

/**
 * Browser parts: Node's modules (`node:fs`, `module`, ...) and `webgpu` (Dawn) resolve to a module
 * that rejects with a clear error. They are only reached on Node branches (model paths, the Node
 * model cache, xgrammar's Node loader), which never run in a browser; left as they are, every
 * app bundler would stub them (Vite) or fail on them (webpack 5).
 */
function nodeOnlyModules(): Plugin {
  const builtins = new Set(builtinModules);
  const prefix = '\0node-only:';
  return {
    name: 'webgpu-llm:node-only-modules',
    apply: 'build',
    enforce: 'pre',
    resolveId(id) {
      if (id.startsWith('node:') || builtins.has(id) || id === 'webgpu') return { id: prefix + id, moduleSideEffects: true };
      return null;
    },
    load(id) {
      if (!id.startsWith(prefix)) return null;
      const name = id.slice(prefix.length);
      return `throw new Error(${JSON.stringify(`webgpu-llm: "${name}" exists only in Node (import from 'webgpu-llm/node' there)`)});`;
    },
  };
}

/** Browser parts: fails the build when an output file imports anything but another output file. */
function selfContained(): Plugin {
  return {
    name: 'webgpu-llm:self-contained',
    apply: 'build',
    generateBundle(_, bundle) {
      for (const chunk of Object.values(bundle)) {
        if (chunk.type !== 'chunk') continue;
        const outside = [...chunk.imports, ...chunk.dynamicImports].filter((f) => !(f in bundle));
        if (outside.length) this.error(`${chunk.fileName} imports ${outside.join(', ')}: browser files must load from a static folder`);
      }
    },
  };
}

function libraryBuild(part: LibraryPart): BuildEnvironmentOptions {
  const browser = part !== 'node';
  return {
    target: 'es2022',
    sourcemap: true,
    // The parts write into one dist/: the first empties it.
    emptyOutDir: part === 'production',
    lib: { entry: LIBRARY[part], formats: ['es'] },
    rollupOptions: {
      external: browser ? [] : [/^node:/, 'webgpu', '@huggingface/tokenizers', '@huggingface/jinja', 'comlink', '@mlc-ai/web-xgrammar'],
      output:
        part === 'service-worker'
          ? // One file: a service worker registered as a classic script cannot import.
            { codeSplitting: false }
          : // Node's chunks apart from the browser's, so that dist/*.js (but node.js, cli.js) is what browsers load.
            part === 'node'
            ? { chunkFileNames: 'node/[name]-[hash].js' }
            : // What both the page and the engine's Worker import, in a chunk of its own: the page's
              // bundle then carries the transport only, not the engine code it would share a file with.
              { codeSplitting: { groups: [{ name: 'transport', test: PAGE_AND_WORKER } ] } },
    },
  };
}

const browserInstance = {
  browser: 'chromium' as const,
};

export default defineConfig(({ command, mode }) => {
  const part: LibraryPart = mode in LIBRARY ? (mode as LibraryPart) : 'production';
  const browserPart = part !== 'node';
  return {
    // The library build: URLs relative to the module that uses them, so dist/ works wherever it is
    // served (with '/', it would only work at the site root).
    base: command === 'build' ? './' : '/',
    // npm test's two Chromium halves (scripts/test.mjs) each optimise dependencies in a folder of
    // their own: sharing one, the second's re-optimisation reloads the first's modules mid-run
    // ("Failed to fetch dynamically imported module") on a fresh clone.
    ...(process.env.WEBGPU_LLM_VITE_CACHE ? { cacheDir: process.env.WEBGPU_LLM_VITE_CACHE } : {}),
    plugins: [wgsl(), engineWorkerURL(), ...(browserPart ? [nodeOnlyModules(), selfContained()] : [])],
    // Discovered mid-run otherwise (it is imported lazily), which fails the first browser test run.
    optimizeDeps: { include: ['@mlc-ai/web-xgrammar', 'ai', '@ai-sdk/openai'] },
    // Worker bundles (new Worker(new URL(...))) are built separately and need the plugin too.
    worker: { format: 'es', plugins: () => [wgsl()] },
    build: libraryBuild(part),
    test: {
      testTimeout: 60_000,
      hookTimeout: 120_000,
      projects: [
        {
          extends: true,
          test: {
            name: 'node',
            include: ['src/**/*.test.ts', 'tools/**/*.test.ts'],
            exclude: ['src/**/*.browser.test.ts'],
            environment: 'node',
            pool: 'forks',
            // A fork runs its files one after another in one module graph: the test GPU
            // (src/testing/gpu.ts) and its pipeline cache, and the generated fixtures, carry over
            // from file to file. Every engine test file otherwise compiled every kernel again
            // (10-15 s of SwiftShader's compiler per file, minutes on lavapipe in f16): four
            // engine files took 95 s so against 156 s isolated. The tests keep no global state
            // between files (the one that swaps globalThis.fetch puts it back).
            isolate: false,
            // Vitest's default (CPUs − 1) runs the files one at a time on a 2-core machine (CI's).
            // Half of a GPU test's time is host JavaScript (reference forward pass, fixtures, the
            // engine's host side) that a second fork overlaps with SwiftShader's: four of the
            // heaviest files took 117 s side by side against 144 s one after another.
            maxWorkers: Math.max(2, availableParallelism() - 1),
            // Two forks share the cores, so a heavy engine test (30 s alone on SwiftShader: 100
            // aborted sequences, a LoRA base, a split model) can take twice that; a hang still fails.
            testTimeout: 180_000,
          },
        },
        {
          extends: true,
          test: {
            name: 'browser',
            // `*.gpu.test.ts` run in Node (Dawn) and here in Chromium; `*.browser.test.ts` only here.
            include: ['src/**/*.gpu.test.ts', 'src/**/*.browser.test.ts'],
            globalSetup: ['src/testing/browser-global-setup.ts'],
            browser: {
              enabled: true,
              headless: true,
              provider: playwright({
                launchOptions: { executablePath: chromiumPath() ?? undefined, args: chromiumArgs },
              }),
              instances: [browserInstance],
            },
          },
        },
      ],
    },
  };
});
