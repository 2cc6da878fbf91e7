/**
 * An embedding model on the f16 path (f16 activations; the final norm's rows read back in f32):
 * the tiny Qwen3-Embedding GGUF (Q8_0) through the engine, each input one step with its hidden
 * state read back, as /v1/embeddings runs it (src/api/embeddings.ts), against the CPU reference.
 * Runs where the device offers shader-f16 (lavapipe in `npm test`'s f16 step); skips on SwiftShader.
 */
import { describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { ReferenceModel } from '../reference/forward';
import { ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { GpuEngine } from './engine';
import { GREEDY } from './sequence';

/**
 * Cosine to the reference of an f16 embedding. f16 rounds every activation to 2⁻¹¹ relative,
 * errors that mostly cancel in a whole vector's direction: measured on lavapipe, 0.9999994 and
 * above on these three inputs; the bar leaves two orders of that (a wrong row or a missing norm
 * gives cosines far below it).
 */
const F16_COSINE = 0.9999;

const unit = (v: Float32Array) => {
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
};

describe('an embedding model on the f16 engine', () => {
  it('gives each input of a batch its last token’s normed state within cosine 0.9999 of the reference (f16)', { timeout: 300_000 }, async ({ skip }) => {
    const gpu = await testGPU();
    skip(!gpu.info.f16, 'the device has no shader-f16');
    const path = (await ensureFixture({ arch: 'qwen3', preset: 'tiny', embedding: true }, { hf: [], gguf: ['Q8_0'] })).gguf.Q8_0!;
    const opened = await openModel(path);
    const ref = await ReferenceModel.load(opened);
    const engine = await GpuEngine.load(opened, { gpu, precision: 'f16' });
    try {
      const inputs = ['The quick brown fox jumps over the lazy dog.', 'hello', 'WebGPU in the page'].map((t) => engine.tokenizer.encode(t));
      const run = async (promptIds: number[]) => {
        for await (const t of engine.generate({ promptIds, maxTokens: 1, sampling: GREEDY, stopTokenIds: [], ignoreEos: true, minTokens: 0, returnHiddenStates: true })) return t.hidden!;
        throw new Error('no token');
      };
      const got = await Promise.all(inputs.map(run));
      inputs.forEach((ids, i) => {
        ref.reset();
        ids.forEach((id, pos) => ref.forward(id, pos));
        const want = unit(ref.hidden);
        const v = unit(got[i]!);
        const cosine = v.reduce((s, x, j) => s + x * want[j]!, 0);
        expect(cosine).toBeGreaterThanOrEqual(F16_COSINE);
      });
    } finally {
      await engine.dispose();
    }
  });
});
