/**
 * EmbeddingGemma's encoder on the GPU (Dawn, f32) against the CPU reference
 * (src/reference/bidirectional.ts) on the tiny fixture (window 4: half-window 2 on the local
 * layers), from its HF folder and its F32 GGUF (the Q8_0 GGUF: src/transport/serve-embedding-gemma.test.ts): two inputs longer than the window in one
 * step (each its own sequence for the attention and the mean) within cosine 0.999, and an input's
 * vector the same alone as in the batch; one f16 sample (lavapipe).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { engineOpContext } from '../../kernels/op';
import { openModel } from '../../model/open';
import { loadBidirectionalEmbedder } from '../../reference/bidirectional';
import { ensureFixture } from '../../testing/fixtures/shared';
import { testGPU } from '../../testing/gpu';
import { tokenizerOf } from '../../text/from-model';
import { GpuGemmaEncoder } from './gemma-encoder';

const paths = await ensureFixture({ arch: 'gemma3', preset: 'tiny', embedding: true }, { hf: ['F32'], gguf: ['F32'] });
const TEXTS = ['the quick brown fox jumps over the lazy dog', 'a lighthouse keeper wrote every evening'];
/**
 * f16 rounds the projections' and FFN's activations to 2^-11 relative; the stream, norms, pooling
 * and Dense stay f32 (BERT's f16 bar, bert.test.ts). Measured on lavapipe: 1 - 5.6e-8 at worst on these inputs.
 */
const F16_COSINE = 0.9999;
const cosine = (a: Float32Array, b: Float32Array) => a.reduce((s, v, i) => s + v * b[i]!, 0) / Math.hypot(...a) / Math.hypot(...b);

describe('the EmbeddingGemma encoder on the GPU (tiny fixture, f32)', () => {
  const encoders: GpuGemmaEncoder[] = [];
  afterAll(() => encoders.forEach((e) => e.destroy()));

  for (const form of ['hf F32', 'gguf F32'] as const) {
    it(`${form}: a batch of two within cosine 0.999 of the reference, one alone as in the batch`, async () => {
      const kind = form.split(' ')[0] as 'gguf' | 'hf';
      const model = await openModel(kind === 'gguf' ? paths.gguf.F32! : paths.hf.F32!);
      const enc = await GpuGemmaEncoder.create(engineOpContext(await testGPU(), 'f32'), model, 64, 4);
      encoders.push(enc);
      const ids = TEXTS.map((t) => tokenizerOf(model.tokenizer).encode(t));
      expect(Math.min(...ids.map((x) => x.length))).toBeGreaterThan(4);
      const ref = await loadBidirectionalEmbedder(model);
      const got = await enc.embed(ids);
      got.forEach((v, i) => expect(cosine(v, ref(ids[i]!)), `input ${i}`).toBeGreaterThan(0.999));
      expect(cosine((await enc.embed([ids[1]!]))[0]!, got[1]!)).toBeGreaterThan(0.99999);
    });
  }

  // f16 activations: runs where the device has shader-f16 (lavapipe in npm test's f16 step).
  it('f16: gguf F32, a batch of two within cosine 0.9999 of the reference', { timeout: 300_000 }, async ({ skip }) => {
    const gpu = await testGPU();
    if (!gpu.info.f16) skip();
    const model = await openModel(paths.gguf.F32!);
    const enc = await GpuGemmaEncoder.create(engineOpContext(gpu, 'f16'), model, 64, 4);
    encoders.push(enc);
    const ids = TEXTS.map((t) => tokenizerOf(model.tokenizer).encode(t));
    const ref = await loadBidirectionalEmbedder(model);
    const got = await enc.embed(ids);
    got.forEach((v, i) => expect(cosine(v, ref(ids[i]!)), `input ${i}`).toBeGreaterThan(F16_COSINE));
  });
});
