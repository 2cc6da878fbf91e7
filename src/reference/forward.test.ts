/**
 * The reference forward pass over the real loader and real HTTP, for every fixture format:
 * the F32 GGUF (q/k rows permuted, interleaved RoPE, Llama 3 scaling as rope_freqs) must give
 * the HF F32 folder's logits (unpermuted rows, neox RoPE, scaling from config.json), and every
 * lower-precision file must stay within its stated tolerance of them.
 */
import { relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARCH, type Arch } from '../model/arch';
import { attentionScale } from '../model/config';
import { openModel } from '../model/open';
import { relativeError } from '../testing/compare';
import { ensureFixture } from '../testing/fixtures/shared';
import { serveDirectory, type StaticServer } from '../testing/server';
import { greedy, logitsFor, ReferenceModel } from './forward';

const STEPS = 16;

/**
 * Largest |logit - F32 logit| over the whole vocabulary and 16 teacher-forced steps, relative to
 * the std of the F32 logits at that step (fixture logits have std ≈ 5). Measured on the tiny
 * fixtures (seed 0) of all four architectures, range in the comment; bounds about 2x the worst.
 * Broken dequantisation or a wrong layout gives errors of several std, far above every bound.
 */
// rms logit error / logit std, worst step; bounds ~1.5x the worst measured over the four archs
// (tied qwen fixtures carry a larger residual stream and so roughly twice the quantisation error).
const TOLERANCE = {
  'hf-F16': 0.0025, // measured 0.0007 .. 0.0017
  'hf-BF16': 0.02, // measured 0.0051 .. 0.0132
  F16: 0.0025, // measured 0.0005 .. 0.0011
  BF16: 0.015, // measured 0.0041 .. 0.0094
  Q8_0: 0.045, // measured 0.014 .. 0.030
  Q6_K: 0.16, // measured 0.049 .. 0.103
  Q4_K_M: 0.6, // measured 0.17 .. 0.40
  Q5_K_M: 0.38, // measured 0.042 .. 0.25 (with smollm3 and gemma2)
  Q4_K: 0.6, // measured 0.19 .. 0.40
  Q5_K: 0.42, // measured 0.093 .. 0.28 (with smollm3)
  // Not Q3_K and Q2_K: a tiny random model written all in 3 or 2 bits drifts as far as a broken
  // file would (measured 0.26 .. 0.93 and 0.56 .. 1.48), so no bound here could tell them apart.
  // Their codecs are fixed by hand-built blocks (quants.test.ts), the GPU by the engine tests.
  Q4_0: 0.8, // measured 0.19 .. 0.53
  Q4_1: 0.75, // measured 0.20 .. 0.49 (with smollm3)
  Q5_0: 0.45, // measured 0.10 .. 0.31 (with smollm3)
  Q5_1: 0.42, // measured 0.088 .. 0.28 (with smollm3)
  IQ4_NL: 0.8, // measured 0.11 .. 0.53 (all ten families)
  IQ4_XS: 0.8, // measured 0.11 .. 0.53
  MXFP4: 1.0, // measured 0.17 .. 0.68
  Q4_K_S: 0.67, // measured 0.067 .. 0.45
  Q3_K_M: 0.97, // measured 0.09 .. 0.65
  IQ4_XS_MIX: 0.63, // measured 0.058 .. 0.42
  // Not the Q2_K preset (Q2_K_MIX): like pure Q2_K it drifts as far as a broken file would
  // (measured 0.23 .. 1.15).
} as const;
type Variant = keyof typeof TOLERANCE;

function maxAbsDiff(got: Float32Array[], want: Float32Array[]): number {
  let worst = 0;
  want.forEach((w, t) => w.forEach((v, i) => (worst = Math.max(worst, Math.abs(got[t][i] - v)))));
  return worst;
}

const ARCHES: Arch[] = ['llama', 'qwen2', 'qwen3', 'mistral', 'smollm3', 'olmo2', 'gemma2', 'gemma3', 'granite', 'phi3', 'qwen2moe', 'qwen3moe', 'olmoe'];

describe.each(ARCHES)('reference forward on the tiny %s fixture', (arch) => {
  let server: StaticServer;
  let urls: Record<'hf-F32' | 'F32' | Variant, string>;
  let ids: number[];
  let hfF32: ReferenceModel;
  let ggufF32: ReferenceModel;
  let want: Float32Array[]; // HF F32 logits, STEPS x vocab

  const load = async (url: string) => ReferenceModel.load(await openModel(url));

  beforeAll(async () => {
    const paths = await ensureFixture({ arch, preset: 'tiny' });
    server = await serveDirectory(paths.root);
    const at = (p: string | undefined) => `${server.url}/${relative(paths.root, p!).split('\\').join('/')}`;
    urls = {
      'hf-F32': at(paths.hf.F32),
      'hf-F16': at(paths.hf.F16),
      'hf-BF16': at(paths.hf.BF16),
      F32: at(paths.gguf.F32),
      F16: at(paths.gguf.F16),
      BF16: at(paths.gguf.BF16),
      Q8_0: at(paths.gguf.Q8_0),
      Q4_0: at(paths.gguf.Q4_0),
      Q4_1: at(paths.gguf.Q4_1),
      Q5_0: at(paths.gguf.Q5_0),
      Q5_1: at(paths.gguf.Q5_1),
      Q4_K: at(paths.gguf.Q4_K),
      Q5_K: at(paths.gguf.Q5_K),
      Q6_K: at(paths.gguf.Q6_K),
      Q4_K_M: at(paths.gguf.Q4_K_M),
      Q5_K_M: at(paths.gguf.Q5_K_M),
      IQ4_NL: at(paths.gguf.IQ4_NL),
      IQ4_XS: at(paths.gguf.IQ4_XS),
      MXFP4: at(paths.gguf.MXFP4),
      Q4_K_S: at(paths.gguf.Q4_K_S),
      Q3_K_M: at(paths.gguf.Q3_K_M),
      IQ4_XS_MIX: at(paths.gguf.IQ4_XS_MIX),
    };
    hfF32 = await load(urls['hf-F32']);
    // A fixed pseudo-random sequence over the whole vocabulary.
    const vocab = hfF32.config.vocabSize;
    ids = Array.from({ length: STEPS }, (_, i) => (i * 7919 + 13) % vocab);
    want = logitsFor(hfF32, ids);
    ggufF32 = await load(urls.F32);
  });

  afterAll(() => server?.close());

  it('gives the HF F32 logits from the F32 GGUF within 1e-4 at every teacher-forced step', () => {
    expect(hfF32.config.ropeStyle).toBe('neox');
    expect(ggufF32.config.ropeStyle).toBe(ARCH[arch].ggufRopeStyle);
    // Both files name the same NoPE layers (config.json's list, llama.cpp's fixed step).
    expect(ggufF32.config.noRopeLayers).toEqual(hfF32.config.noRopeLayers);
    // The same windows, caps and scales; HF Gemma norms add their 1, GGUF ones hold it already
    // (the logits agreeing pins that neither file's norms are shifted twice or never).
    // Granite's multipliers; Phi-3's rotary width and LongRoPE (GGUF: factors from tensors, the
    // rest from metadata).
    for (const key of ['slidingWindow', 'ropeLocalTheta', 'embeddingScale', 'ffnActivation', 'attnLogitSoftcap', 'finalLogitSoftcap', 'normPlacement', 'residualScale', 'logitsScaling', 'rotaryDim'] as const) {
      const [g, h] = [ggufF32.config[key], hfF32.config[key]];
      // GGUF stores scales as f32
      if (typeof h === 'number' && typeof g === 'number') expect(g, key).toBeCloseTo(h, 6);
      else expect(g, key).toEqual(h);
    }
    // The scale in effect: Gemma's query_pre_attn_scalar is stated by config.json and implied by
    // the head size in GGUF (null there: 1/sqrt(headDim)); Granite's is stated by both.
    expect(attentionScale(ggufF32.config), 'attentionScale').toBeCloseTo(attentionScale(hfF32.config), 6);
    const [gs, hs] = [ggufF32.config.ropeScaling, hfF32.config.ropeScaling];
    if (hs?.type === 'longrope' && gs?.type === 'longrope') {
      // f32 tensors against config.json's doubles
      expect(gs.longFactor).toEqual(hs.longFactor.map(Math.fround));
      expect(gs.shortFactor).toEqual(hs.shortFactor.map(Math.fround));
      expect(gs.attentionFactor).toBeCloseTo(hs.attentionFactor, 6);
      expect(gs.originalMaxPositionEmbeddings).toBe(hs.originalMaxPositionEmbeddings);
    } else if (hs?.type === 'llama3') {
      // llama.cpp writes Llama 3's scaling as the rope_freqs tensor (ropeFreqFactors), not as
      // metadata: the logits below agreeing pins that the factors came through.
      expect(gs).toBeNull();
    } else expect(gs).toEqual(hs);
    expect(hfF32.config.normWeightOffset).toBe(ARCH[arch].normOnePlus ? 1 : 0);
    expect(ggufF32.config.normWeightOffset).toBe(0);
    expect(maxAbsDiff(logitsFor(ggufF32, ids), want)).toBeLessThan(1e-4);
  });

  it('generates the same 16 greedy tokens from the HF F32 folder and the F32 GGUF', () => {
    const prompt = ids.slice(0, 4);
    const fromHF = greedy(hfF32, prompt, STEPS);
    expect(greedy(ggufF32, prompt, STEPS)).toEqual(fromHF);
  });

  // MoE families: a quantised file can flip a near-tied top-k choice, a discrete jump the bounds
  // above (fit to dense models) do not allow for (qwen3moe's Q6_K: 0.47); their float and Q8_0
  // files only. The GPU tests hold every quantised MoE file to the reference on the same file.
  const moeVariants: Variant[] = ['hf-F16', 'hf-BF16', 'F16', 'BF16', 'Q8_0'];
  // Every type on llama; a float, a block and a K-quant mix on the other dense families: a type's
  // codec does not depend on the family (the bounds were measured on all of them, see TOLERANCE),
  // and the engine grid holds every family's every type to the reference on the same file.
  const sampleVariants: Variant[] = ['hf-F16', 'F16', 'Q8_0', 'Q4_K_M'];
  const variants = ARCH[arch].moe ? moeVariants : arch === 'llama' ? (Object.keys(TOLERANCE) as Variant[]) : sampleVariants;
  it.each(variants)('keeps %s logits within its tolerance of F32', async (variant) => {
    const err = relativeError(logitsFor(await load(urls[variant]), ids), want);
    expect(err).toBeLessThan(TOLERANCE[variant]);
    // and it is a different file: some quantisation error is there
    expect(err).toBeGreaterThan(0);
  });
});
