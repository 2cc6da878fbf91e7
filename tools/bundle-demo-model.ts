/**
 * Writes the demo's bundled model: the tiny Qwen3 fixture (random weights, real BPE tokenizer and
 * chat template) as one Q8_0 GGUF of about 1.4 MB. The generator is deterministic and reuses a
 * current copy, so this is cheap to call on every `npm start`.
 *   npx vite-node tools/bundle-demo-model.ts [DIR]   (default demo/public/models/tiny-qwen3)
 */
import { fileURLToPath } from 'node:url';
import { writeFixture } from '../src/testing/fixtures/write';

/** Where the page finds the file, relative to the demo's root. */
export const DEMO_MODEL_PATH = 'models/tiny-qwen3/gguf/model-Q8_0.gguf';

/** Writes (or reuses) the model under `dir`; returns the GGUF's path. */
export async function bundleDemoModel(dir: string | URL): Promise<string> {
  const root = typeof dir === 'string' ? dir : fileURLToPath(dir);
  const paths = await writeFixture(root, { arch: 'qwen3', preset: 'tiny', seed: 0 }, { hf: [], gguf: ['Q8_0'] });
  return paths.gguf.Q8_0!;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const dir = process.argv[2] ?? fileURLToPath(new URL('../demo/public/models/tiny-qwen3/', import.meta.url));
  console.log(await bundleDemoModel(dir));
}
