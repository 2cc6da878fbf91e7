/**
 * The f16 path with a residual stream past f16's range. Real models carry activations above
 * 65504 in a few channels of the stream (Gemma, Qwen outliers); random fixtures do not, so these
 * are drawn with their stream ×1e5 (FixtureOptions.streamScale: the embeddings, the o/down
 * outputs and the post-norms' weights, while every normed input stays as usual). The stream
 * (`x`, and `last`) and every branch output before it joins the stream are f32 in the f16 path,
 * so the engine still equals the reference; with an f16 stream the embedding alone overflows to
 * infinity, with an f16 branch Gemma's o/down outputs (before their post-norms, xb2) and the
 * experts' weighted sum do.
 */
import { relative } from 'node:path';
import { describe, it } from 'vitest';
import type { Arch } from '../model/arch';
import { expectModelMatchesReference } from '../testing/engine-check';
import { F16_LOGIT_TOLERANCE } from '../testing/engine-matrix';
import { ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { serveDirectory } from '../testing/server';

// A pre-norm block (llama), sandwich norms (gemma2: the post-norm adds its f32 branch into the
// stream), a mixture of experts (qwen3moe: the experts' sum added into the stream by the combine).
// gemma2 and qwen3moe in Q8_0, the format engine-families.f16.test.ts runs them in: a fork that
// runs both files compiles their f16 pipelines (seconds each on lavapipe) once.
const CASES: Array<[Arch, 'F32' | 'Q8_0', number]> = [
  ['llama', 'F32', 5],
  ['gemma2', 'Q8_0', 6],
  ['qwen3moe', 'Q8_0', 7],
];

describe('the f16 engine with a residual stream beyond f16 range', () => {
  for (const [arch, format, salt] of CASES) {
    it(`keeps the stream and the branches f32 and matches the reference on ${arch} ${format} (f16)`, { timeout: 300_000 }, async (ctx) => {
      const gpu = await testGPU();
      if (!gpu.info.f16) ctx.skip(); // SwiftShader: no shader-f16 (CI runs this on lavapipe)
      const hf = format === 'F32';
      const paths = await ensureFixture({ arch, preset: 'tiny', tied: false, streamScale: 1e5 }, hf ? { hf: ['F32'], gguf: [] } : { hf: [], gguf: [format] });
      const server = await serveDirectory(paths.root);
      try {
        const file = hf ? paths.hf.F32! : paths.gguf[format]!;
        const url = `${server.url}/${relative(paths.root, file).split('\\').join('/')}`;
        await expectModelMatchesReference(gpu, url, { precision: 'f16', steps: 12, tolerance: F16_LOGIT_TOLERANCE, salt });
      } finally {
        await server.close();
      }
    });
  }
});
