/**
 * Writes the demo's bundled model: the tiny Qwen3 fixture (random weights, real BPE tokenizer and
 * chat template) as one Q8_0 GGUF of about 1.4 MB, under demo/public/models/tiny-qwen3/ (git
 * ignores it), and a LoRA adapter for it (lora/all-r8-rslora.gguf: every matrix, rank 8) so the
 * page's adapter panel works offline too; and the tiny SmolVLM's HF folder (models/tiny-smolvlm/hf-F32) for
 * the image input. The generator is deterministic and reuses a current copy, so this is cheap.
 *
 * Importing this module does the work (top-level await): demo/vite.config.ts loads it through
 * Vite's module runner, which the generator's `?raw` imports need, and that runner closes as soon
 * as the import settles, so the write must finish inside the import.
 *   npx vite-node tools/bundle-demo-model.ts
 */
import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { writeChunks } from '../src/formats/node-write';
import { encodeGGUFAdapter, LORA_SPECS } from '../src/testing/fixtures/lora';
import { makeFixture } from '../src/testing/fixtures/model';
import { atomic, writeFixture } from '../src/testing/fixtures/write';

/** Where the page finds the file, relative to the demo's root. */
export const DEMO_MODEL_PATH = 'models/tiny-qwen3/gguf/model-Q8_0.gguf';

const dir = fileURLToPath(new URL('../demo/public/models/tiny-qwen3/', import.meta.url));
const paths = await writeFixture(dir, { arch: 'qwen3', preset: 'tiny', seed: 0 }, { hf: [], gguf: ['Q8_0'] });

/** The GGUF's path on disk. */
export const demoModelFile: string = paths.gguf.Q8_0!;

/**
 * The tiny SmolVLM (random weights and vision tower, SmolVLM's tokens and template) as its HF
 * folder, relative to the demo's root: load it by URL to try the image input offline
 * (e2e/demo-images.spec.ts does).
 */
export const DEMO_VISION_MODEL_PATH = 'models/tiny-smolvlm/hf-F32';
await writeFixture(fileURLToPath(new URL('../demo/public/models/tiny-smolvlm/', import.meta.url)), { arch: 'llama', preset: 'tiny', seed: 0, vision: true }, { hf: ['F32'], gguf: [] });

/** The bundled model's LoRA adapter (a llama.cpp GGUF LoRA), relative to the demo's root. */
export const DEMO_LORA_PATH = 'models/tiny-qwen3/lora/all-r8-rslora.gguf';
const spec = LORA_SPECS.find((x) => x.name === 'all-r8-rslora')!;
await mkdir(fileURLToPath(new URL('../demo/public/models/tiny-qwen3/lora/', import.meta.url)), { recursive: true });
// Rewritten each start (a few hundred kB): cheaper than tracking whether the generator changed.
await atomic(fileURLToPath(new URL(`../demo/public/${DEMO_LORA_PATH}`, import.meta.url)), (tmp) => writeChunks(tmp, encodeGGUFAdapter(makeFixture({ arch: 'qwen3', preset: 'tiny', seed: 0 }), spec)));
