/**
 * Writes the demo's bundled model: the tiny Qwen3 fixture (random weights, real BPE tokenizer and
 * chat template) as one Q8_0 GGUF of about 1.4 MB, under demo/public/models/tiny-qwen3/ (git
 * ignores it). The generator is deterministic and reuses a current copy, so this is cheap.
 *
 * Importing this module does the work (top-level await): demo/vite.config.ts loads it through
 * Vite's module runner, which the generator's `?raw` imports need, and that runner closes as soon
 * as the import settles, so the write must finish inside the import.
 *   npx vite-node tools/bundle-demo-model.ts
 */
import { fileURLToPath } from 'node:url';
import { writeFixture } from '../src/testing/fixtures/write';

/** Where the page finds the file, relative to the demo's root. */
export const DEMO_MODEL_PATH = 'models/tiny-qwen3/gguf/model-Q8_0.gguf';

const dir = fileURLToPath(new URL('../demo/public/models/tiny-qwen3/', import.meta.url));
const paths = await writeFixture(dir, { arch: 'qwen3', preset: 'tiny', seed: 0 }, { hf: [], gguf: ['Q8_0'] });

/** The GGUF's path on disk. */
export const demoModelFile: string = paths.gguf.Q8_0!;
