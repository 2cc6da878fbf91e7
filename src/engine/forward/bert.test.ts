/**
 * The BERT encoder on the GPU (Dawn, f32) against the CPU reference on the same file's weights:
 * the tiny fixture (src/testing/fixtures/bert.ts) from its GGUFs (F32, F16, Q8_0) and its HF
 * folder, three inputs of different lengths in one step (each its own sequence for the attention
 * and the mean), then a step of one: each vector within cosine 0.999 of the reference's, and an
 * input's vector the same alone as in a batch; [CLS] pooling on the folder's weights; one f16 sample;
 * the `dense` variant's folder (2_Dense with a bias and Tanh, 3_Dense Identity) against the
 * reference's pooled mean through src/reference/dense.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { engineOpContext } from '../../kernels/op';
import { openEncoder, type OpenedEncoder } from '../../model/encoder-open';
import { bertForward, loadBertWeights, meanPoolNormalized } from '../../reference/bert';
import { denseNormalized, loadDenseWeights } from '../../reference/dense';
import { ensureBertFixture, type BertFixturePaths } from '../../testing/fixtures/bert-write';
import { testGPU } from '../../testing/gpu';
import { tokenizerOf } from '../../text/from-model';
import { GpuBertEncoder } from './bert';

const TEXTS = ['The lighthouse keeper wrote in her logbook every evening at seven.', 'hello', 'Café-style zebras, 中!'];
let paths: BertFixturePaths;
beforeAll(async () => {
  paths = await ensureBertFixture();
});

/**
 * f16 rounds q/k/v, the attention output and the FFN rows to 2^-11 relative; the stream, norms and
 * pooling stay f32, so a whole vector's direction moves far less (the Qwen3-Embedding f16 sample's
 * bar, src/engine/embedding.f16.test.ts). Measured on lavapipe: 1 - 3.3e-8 at worst on these inputs.
 */
const F16_COSINE = 0.9999;

const cosine = (a: Float32Array, b: Float32Array) => a.reduce((s, v, i) => s + v * b[i]!, 0);

async function reference(model: OpenedEncoder, ids: number[][]): Promise<Float32Array[]> {
  const w = await loadBertWeights(model.config, model.readTensorF32);
  return ids.map((x) => meanPoolNormalized(bertForward(model.config, w, x), x.length, model.config.hiddenSize));
}

describe('the BERT encoder on the GPU (tiny fixture, f32)', () => {
  const encoders: GpuBertEncoder[] = [];
  afterAll(() => encoders.forEach((e) => e.destroy()));

  for (const form of ['gguf F32', 'gguf F16', 'gguf Q8_0', 'hf F32'] as const) {
    it(`${form}: a batch of three and one alone, each within cosine 0.999 of the reference`, async () => {
      const [kind, type] = form.split(' ') as ['gguf' | 'hf', 'F32' | 'F16' | 'Q8_0'];
      const model = await openEncoder(kind === 'gguf' ? paths.gguf[type]! : paths.hf[type as 'F32']!);
      const gpu = await testGPU();
      const enc = await GpuBertEncoder.create(engineOpContext(gpu, 'f32'), model, 64, 4);
      encoders.push(enc);
      const ids = TEXTS.map((t) => tokenizerOf(model.tokenizer).encode(t));
      const want = await reference(model, ids);
      const got = await enc.embed(ids);
      got.forEach((v, i) => expect(cosine(v, want[i]!), `input ${i}`).toBeGreaterThan(0.999));
      const alone = (await enc.embed([ids[1]!]))[0]!;
      expect(cosine(alone, got[1]!)).toBeGreaterThan(0.99999);
    });
  }

  // f16 activations (the stream stays f32): runs where the device has shader-f16 (lavapipe in npm test's f16 step).
  it('f16: gguf Q8_0, a batch of three within cosine 0.9999 of the reference', { timeout: 300_000 }, async ({ skip }) => {
    const gpu = await testGPU();
    if (!gpu.info.f16) skip();
    const model = await openEncoder(paths.gguf.Q8_0!);
    const enc = await GpuBertEncoder.create(engineOpContext(gpu, 'f16'), model, 64, 4);
    encoders.push(enc);
    const ids = TEXTS.map((t) => tokenizerOf(model.tokenizer).encode(t));
    const want = await reference(model, ids);
    (await enc.embed(ids)).forEach((v, i) => expect(cosine(v, want[i]!), `input ${i}`).toBeGreaterThan(F16_COSINE));
  });

  it('the Dense modules after the mean (Tanh with a bias, then Identity), before L2: within cosine 0.999 of the reference', async () => {
    const model = await openEncoder((await ensureBertFixture({ hf: ['F32'], gguf: [], dense: true })).hf.F32!);
    const modules = model.embedding.dense!;
    expect(modules.map((m) => [m.name, m.activation, m.bias])).toEqual([['dense_2', 'tanh', true], ['dense_3', 'identity', false]]);
    const enc = await GpuBertEncoder.create(engineOpContext(await testGPU(), 'f32'), model, 64, 4);
    encoders.push(enc);
    const ids = TEXTS.map((t) => tokenizerOf(model.tokenizer).encode(t));
    const w = await loadBertWeights(model.config, model.readTensorF32);
    const dw = await loadDenseWeights(modules, model.readTensorF32);
    const H = model.config.hiddenSize;
    const got = await enc.embed(ids);
    ids.forEach((x, i) => {
      // The un-normalised mean: Tanh sees its scale, not only its direction.
      const rows = bertForward(model.config, w, x);
      const pooled = new Float32Array(H);
      for (let t = 0; t < x.length; t++) for (let j = 0; j < H; j++) pooled[j]! += rows[t * H + j]! / x.length;
      const want = denseNormalized(pooled, modules, dw);
      expect(got[i]!.length).toBe(64);
      expect(cosine(got[i]!, want), `input ${i}`).toBeGreaterThan(0.999);
    });
  });

  it('pools by [CLS] where the model says so (bge): each input\'s first row, L2-normalised', async () => {
    const opened = await openEncoder(paths.hf.F32!);
    const model: OpenedEncoder = { ...opened, embedding: { pooling: 'cls', maxSeqLength: null } };
    const enc = await GpuBertEncoder.create(engineOpContext(await testGPU(), 'f32'), model, 64, 4);
    encoders.push(enc);
    const ids = TEXTS.map((t) => tokenizerOf(model.tokenizer).encode(t));
    const w = await loadBertWeights(model.config, model.readTensorF32);
    const H = model.config.hiddenSize;
    const got = await enc.embed(ids);
    ids.forEach((x, i) => {
      const rows = bertForward(model.config, w, x);
      expect(cosine(got[i]!, meanPoolNormalized(rows.subarray(0, H), 1, H)), `input ${i}`).toBeGreaterThan(0.999);
      // Not the mean: the two poolings differ on these inputs.
      expect(cosine(got[i]!, meanPoolNormalized(rows, x.length, H))).toBeLessThan(0.99);
    });
  });
});
