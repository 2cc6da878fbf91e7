/**
 * Qwen3.5's two formats over the real loader: the tiny fixture's HF folder (value heads grouped by
 * key head, A_log, norms stored as w of 1 + w) and its GGUF files as llama.cpp's converter writes
 * them (value heads tiled, ssm_a = −exp(A_log), norms w + 1 but the DeltaNet's output norm, the
 * pre-FFN norm as attn_post_norm) give the same logits; so does the Qwen3_5ForConditionalGeneration
 * folder (the text model under model.language_model., a vision tower and an MTP head skipped).
 */
import { relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { maxAbsDiffAll as maxAbsDiff, relativeError } from '../testing/compare';
import { ensureFixture } from '../testing/fixtures/shared';
import { serveDirectory, type StaticServer } from '../testing/server';
import { logitsFor, ReferenceModel } from './forward';

describe('Qwen3.5 from its HF folder and from GGUF', () => {
  let servers: StaticServer[] = [];
  let urls: Record<'hf' | 'mm' | 'F32' | 'F16' | 'Q8_0', string>;
  let ids: number[];
  let hf: ReferenceModel;
  let want: Float32Array[];
  const load = async (url: string) => ReferenceModel.load(await openModel(url));

  beforeAll(async () => {
    const text = await ensureFixture({ arch: 'qwen35', preset: 'tiny' }, { hf: ['F32'], gguf: ['F32', 'F16', 'Q8_0'] });
    const mm = await ensureFixture({ arch: 'qwen35', preset: 'tiny', multimodal: true }, { hf: ['F32'], gguf: [] });
    servers = [await serveDirectory(text.root), await serveDirectory(mm.root)];
    const at = (i: number, root: string, p: string | undefined) => `${servers[i]!.url}/${relative(root, p!).split('\\').join('/')}`;
    urls = { hf: at(0, text.root, text.hf.F32), mm: at(1, mm.root, mm.hf.F32), F32: at(0, text.root, text.gguf.F32), F16: at(0, text.root, text.gguf.F16), Q8_0: at(0, text.root, text.gguf.Q8_0) };
    hf = await load(urls.hf);
    // 20 positions: the DeltaNet state carried well past its 4-tap conv.
    ids = Array.from({ length: 20 }, (_, i) => (i * 7919 + 13) % hf.config.vocabSize);
    want = logitsFor(hf, ids);
  });

  afterAll(() => servers.forEach((s) => s.close()));

  it('reads both configs alike but for the value-head order and the stored decay', async () => {
    const gguf = (await openModel(urls.F32)).config;
    expect(hf.config).toMatchObject({ arch: 'qwen35', attnOutputGate: true, rotaryDim: 16, normWeightOffset: 1 });
    expect(hf.config.deltaNet).toEqual({ layers: [0, 2], convKernel: 4, numKHeads: 2, numVHeads: 4, headKDim: 64, headVDim: 64, vHeadOrder: 'grouped', aStored: 'log' });
    expect(gguf).toMatchObject({ arch: 'qwen35', attnOutputGate: true, rotaryDim: 16, normWeightOffset: 0 });
    expect(gguf.deltaNet).toEqual({ ...hf.config.deltaNet, vHeadOrder: 'tiled', aStored: 'neg' });
  });

  it('gives the HF logits from the F32 GGUF within 1e-4, and not when its value heads are read in HF order', async () => {
    const opened = await openModel(urls.F32);
    const gguf = await ReferenceModel.load(opened);
    expect(maxAbsDiff(logitsFor(gguf, ids), want)).toBeLessThan(1e-4);
    // The converter's reorder and ssm_a are what the config's flags undo: read either the HF way, the logits move.
    for (const wrong of [{ vHeadOrder: 'grouped' }, { aStored: 'log' }] as const) {
      const c = { ...opened.config, deltaNet: { ...opened.config.deltaNet!, ...wrong } };
      const moved = await ReferenceModel.load({ ...opened, config: c });
      expect(maxAbsDiff(logitsFor(moved, ids), want), JSON.stringify(wrong)).toBeGreaterThan(1e-2);
    }
  });

  it('gives the HF logits from the Qwen3_5ForConditionalGeneration folder', async () => {
    const mm = await load(urls.mm);
    expect(mm.config.deltaNet).toEqual(hf.config.deltaNet);
    expect(maxAbsDiff(logitsFor(mm, ids), want)).toBe(0);
  });

  // Bounds about 1.7x the measured errors (relative to the logits' spread, as forward.test.ts's;
  // above the dense families': 20 steps of the recurrence); a broken codec gives about 1.4.
  it.each([
    ['F16', 0.0045], // measured 0.0027
    ['Q8_0', 0.12], // measured 0.071
  ] as const)('%s stays within %f of the F32 logits', async (variant, bound) => {
    expect(relativeError(logitsFor(await load(urls[variant]), ids), want)).toBeLessThan(bound);
  });
});
