/**
 * The f16 path with a residual stream past f16's range. Real models carry activations above
 * 65504 in a few channels of the stream (Gemma, Qwen outliers); random fixtures do not, so this
 * one is drawn with its stream ×1e5 (FixtureOptions.streamScale: the embeddings and o/down
 * outputs, while every normed input stays as usual). The stream (`x`, and `last`) is f32 in the
 * f16 path, so the engine still equals the reference; with an f16 stream the embedding alone
 * overflows to infinity.
 */
import { relative } from 'node:path';
import { describe, it } from 'vitest';
import { expectModelMatchesReference } from '../testing/engine-check';
import { F16_LOGIT_TOLERANCE } from '../testing/engine-matrix';
import { ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { serveDirectory } from '../testing/server';

describe('the f16 engine with a residual stream beyond f16 range', () => {
  it('keeps the stream f32 and matches the reference (f16)', { timeout: 300_000 }, async (ctx) => {
    const gpu = await testGPU();
    if (!gpu.info.f16) ctx.skip(); // SwiftShader: no shader-f16 (CI runs this on lavapipe)
    const paths = await ensureFixture({ arch: 'llama', preset: 'tiny', tied: false, streamScale: 1e5 }, { hf: ['F32'], gguf: [] });
    const server = await serveDirectory(paths.root);
    try {
      const url = `${server.url}/${relative(paths.root, paths.hf.F32!).split('\\').join('/')}`;
      await expectModelMatchesReference(gpu, url, { precision: 'f16', steps: 12, tolerance: F16_LOGIT_TOLERANCE, salt: 5 });
    } finally {
      await server.close();
    }
  });
});
