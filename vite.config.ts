/// <reference types="vitest/config" />
import { defineConfig, type Plugin } from 'vite';
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

const browserInstance = {
  browser: 'chromium' as const,
};

export default defineConfig(({ command }) => ({
  // The library build: the Worker's URL relative to the module that starts it, so dist/ works
  // wherever it is served (with '/', it would only work at the site root).
  base: command === 'build' ? './' : '/',
  plugins: [wgsl()],
  // Discovered mid-run otherwise (it is imported lazily), which fails the first browser test run.
  optimizeDeps: { include: ['@mlc-ai/web-xgrammar'] },
  // Worker bundles (new Worker(new URL(...))) are built separately and need the plugin too.
  worker: { format: 'es', plugins: () => [wgsl()] },
  build: {
    target: 'es2022',
    sourcemap: true,
    lib: {
      entry: {
        index: 'src/index.ts',
        node: 'src/node.ts',
        worker: 'src/worker.ts',
        'service-worker': 'src/service-worker.ts',
        cli: 'src/cli/main.ts',
      },
      formats: ['es'],
    },
    rollupOptions: {
      external: [/^node:/, 'webgpu', '@huggingface/tokenizers', '@huggingface/jinja', 'comlink', '@mlc-ai/web-xgrammar'],
    },
  },
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
}));
