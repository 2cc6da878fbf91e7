/**
 * The demo's Vite config (`vite demo` reads it because `demo/` is the root). It imports the
 * library from `../src`, so it needs the same `*.wgsl`-as-string transform as the root config,
 * and it writes the bundled tiny model into `public/models/` before the server starts, so
 * `npm start` works offline right after `npm install` with no binary in git.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig, runnerImport, type Plugin } from 'vite';

/** Imports `*.wgsl` files as strings, as the root vite.config.ts does for the library. */
function wgsl(): Plugin {
  return {
    name: 'wgsl',
    transform(code, id) {
      if (!id.endsWith('.wgsl')) return null;
      return { code: `export default ${JSON.stringify(code)};`, map: null };
    },
  };
}

/**
 * Generates the tiny random-weight model (deterministic, ~1 s, reused when current). The fixture
 * generator imports its corpus and templates with `?raw`, which only Vite's module runner
 * understands, so the tool (which writes on import) is loaded through `runnerImport`.
 */
function demoModel(): Plugin {
  const tool = fileURLToPath(new URL('../tools/bundle-demo-model.ts', import.meta.url));
  return {
    name: 'webgpu-llm-demo-model',
    async buildStart() {
      await runnerImport(tool, { configFile: false, logLevel: 'silent' });
    },
  };
}

export default defineConfig({
  plugins: [wgsl(), demoModel()],
  build: { target: 'es2022' },
  worker: { format: 'es', plugins: () => [wgsl()] },
  // Pre-bundled at start-up: a dependency first met inside the engine's Worker would otherwise
  // make Vite re-optimise and reload the page in the middle of a load.
  optimizeDeps: { include: ['openai', 'comlink', '@huggingface/tokenizers', '@huggingface/jinja'] },
  server: { fs: { allow: ['..'] } },
  // One page and no client-side routes: a missing file is a 404, not index.html with a 200, so a
  // model folder served from public/ (the tiny SmolVLM) reads its optional files as absent.
  appType: 'mpa',
});
