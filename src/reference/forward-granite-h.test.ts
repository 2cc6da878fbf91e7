/**
 * Granite 4.0-H's two formats over the real loader: the tiny fixture's HF folder
 * (granitemoehybrid: Mamba-2 layers around a NoPE attention layer, A_log, the shared MLP) and its
 * GGUF files as llama.cpp's converter writes them (granitehybrid: ssm_a = −exp(A_log), ssm_a and
 * ssm_d [heads, 1], the norm [groups, inner / groups], q/k rows permuted, ffn_gate/up/down) give
 * the same logits, with one group of B/C and with two.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { readGGUF } from '../formats/gguf';
import { fileSource } from '../formats/source';
import { openModel } from '../model/open';
import { maxAbsDiffAll as maxAbsDiff, relativeError } from '../testing/compare';
import { ensureFixture } from '../testing/fixtures/shared';
import type { FixturePaths } from '../testing/fixtures/write';
import { logitsFor, readWeights, ReferenceModel } from './forward';

describe('Granite 4.0-H from its HF folder and from GGUF', () => {
  let one: FixturePaths;
  let two: FixturePaths;
  let ids: number[];
  let hf: ReferenceModel;
  let want: Float32Array[];
  const load = async (path: string | undefined) => ReferenceModel.load(await openModel(path!));

  beforeAll(async () => {
    [one, two] = await Promise.all([
      ensureFixture({ arch: 'granite', preset: 'tiny', hybrid: { mambaGroups: 1 } }, { hf: ['F32'], gguf: ['F32', 'F16', 'Q8_0', 'Q4_K_M'] }),
      ensureFixture({ arch: 'granite', preset: 'tiny', hybrid: { mambaGroups: 2 } }, { hf: ['F32'], gguf: ['F32'] }),
    ]);
    hf = await load(one.hf.F32);
    // 16 positions: the Mamba-2 state carried well past its 4-tap conv.
    ids = Array.from({ length: 16 }, (_, i) => (i * 7919 + 13) % hf.config.vocabSize);
    want = logitsFor(hf, ids);
  });

  it("reads both configs alike but for the stored decay; the file holds the converter's shapes and F32 vectors", async () => {
    const gguf = (await openModel(one.gguf.F16!)).config;
    const mamba2 = { layers: [0, 2], convKernel: 4, numHeads: 8, headDim: 64, stateSize: 64, numGroups: 1 };
    expect(hf.config).toMatchObject({ arch: 'granite', noRopeLayers: [0, 1, 2], embeddingScale: 12, residualScale: 0.22, logitsScaling: 8 });
    expect(hf.config.mamba2).toEqual({ ...mamba2, aStored: 'log' });
    expect(gguf).toMatchObject({ arch: 'granite', numKvHeads: 2, noRopeLayers: [0, 1, 2], embeddingScale: 12, residualScale: expect.closeTo(0.22, 6), logitsScaling: 8, vocabSize: hf.config.vocabSize });
    expect(gguf.mamba2).toEqual({ ...mamba2, aStored: 'neg' });
    const file = new Map((await readGGUF(fileSource(one.gguf.F16!))).tensors.map((t) => [t.name, t]));
    const at = (name: string) => [file.get(name)?.dtype, file.get(name)?.shape];
    expect(at('blk.0.ssm_a')).toEqual(['F32', [8, 1]]);
    expect(at('blk.0.ssm_d')).toEqual(['F32', [8, 1]]);
    expect(at('blk.2.ssm_norm.weight')).toEqual(['F32', [1, 512]]);
    expect(at('blk.0.ssm_conv1d.weight')).toEqual(['F32', [640, 4]]);
    expect(at('blk.0.ssm_in.weight')).toEqual(['F16', [512 + 640 + 8, 256]]);
    expect(at('blk.1.ffn_gate.weight')).toEqual(['F16', [512, 256]]);
    expect(file.has('blk.1.ssm_in.weight') || file.has('blk.0.attn_q.weight')).toBe(false);
    // llama-quantize's Q4_K_M: the one attn_v is the first and last of its kind (Q6_K), Mamba-2's projections the preset's Q4_K.
    const mix = new Map((await readGGUF(fileSource(one.gguf.Q4_K_M!))).tensors.map((t) => [t.name, t.dtype]));
    expect(['blk.1.attn_v.weight', 'blk.0.ssm_in.weight', 'blk.2.ssm_out.weight', 'blk.0.ssm_a'].map((n) => mix.get(n))).toEqual(['Q6_K', 'Q4_K', 'Q4_K', 'F32']);
  });

  it('gives the HF logits from the F32 GGUF within 1e-4, and not when ssm_a is read as A_log or in_proj as xBC then z', async () => {
    const opened = await openModel(one.gguf.F32!);
    expect(maxAbsDiff(logitsFor(await ReferenceModel.load(opened), ids), want)).toBeLessThan(1e-4);
    const weights = await readWeights(opened);
    const m = opened.config.mamba2!;
    const wrongDecay = await ReferenceModel.fromWeights({ ...opened.config, mamba2: { ...m, aStored: 'log' } }, weights);
    expect(maxAbsDiff(logitsFor(wrongDecay, ids), want)).toBeGreaterThan(1e-2);
    // in_proj's first 2 · inner rows swapped in halves: z read where x is and x where z is.
    const inner = m.numHeads * m.headDim;
    const cols = opened.config.hiddenSize;
    const swapped = new Map(weights);
    for (const l of m.layers) {
      const w = weights.get(`blk.${l}.ssm_in.weight`)!;
      const s = w.slice();
      s.set(w.subarray(inner * cols, 2 * inner * cols), 0);
      s.set(w.subarray(0, inner * cols), inner * cols);
      swapped.set(`blk.${l}.ssm_in.weight`, s);
    }
    expect(maxAbsDiff(logitsFor(ReferenceModel.fromWeights(opened.config, swapped), ids), want)).toBeGreaterThan(1e-2);
  });

  it('gives the HF logits from the F32 GGUF with two groups of B/C ([2, 256] norm)', async () => {
    const [h, g] = await Promise.all([load(two.hf.F32), load(two.gguf.F32)]);
    expect(g.config.mamba2).toEqual({ ...h.config.mamba2, aStored: 'neg' });
    expect(g.config.mamba2?.numGroups).toBe(2);
    expect(maxAbsDiff(logitsFor(g, ids), logitsFor(h, ids))).toBeLessThan(1e-4);
  });

  // Bounds about 1.7x the measured errors (relative to the logits' spread, as forward-qwen35.test.ts's;
  // the Mamba-2 vectors stay F32, only the matrices round).
  it.each([
    ['F16', 0.00085], // measured 0.00049
    ['Q8_0', 0.017], // measured 0.0097
    ['Q4_K_M', 0.19], // measured 0.11
  ] as const)('%s stays within %f of the F32 logits', async (variant, bound) => {
    expect(relativeError(logitsFor(await load(one.gguf[variant]), ids), want)).toBeLessThan(bound);
  });
});
