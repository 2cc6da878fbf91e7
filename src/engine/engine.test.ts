/**
 * The WebGPU engine against the CPU reference forward pass, on every fixture architecture and file
 * format, through the real loader over real HTTP. Random weights make near-ties, so: logits are
 * compared teacher-forced at every step within LOGIT_TOLERANCE, and greedy tokens must be
 * identical up to the first step where the reference's top-2 margin is below that tolerance.
 */
import { relative } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { GPUContext } from '../gpu/device';
import type { Arch } from '../model/config';
import { openModel } from '../model/open';
import { greedy, logitsFor, ReferenceModel } from '../reference/forward';
import { D288_MIXES, ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { useFixtureURLs } from '../testing/fixture-server';
import { serveDirectory } from '../testing/server';
import { GpuEngine } from './engine';
import { expectModelMatchesReference, generateGreedy } from '../testing/engine-check';
import { GREEDY } from '../testing/sampling';

/** f32 path: GPU and reference read the same dequantised weights; only summation order differs. */
const LOGIT_TOLERANCE = 1e-3;
const STEPS = 32;

/**
 * Every fixture architecture × every format the generator writes, except Q4_1 and Q5_1 (whose
 * kernels differ from Q5_0's and Q4_0's only in d·q + m), Q5_K (Q4_K's kernels plus a fifth
 * bit), Q2_K, Q3_K and Q5_K_M: on one untied and one tied family each (Q2_K untied; Q3_K and
 * Q5_K_M tied).
 */
const FORMATS = ['hf-F32', 'hf-F16', 'hf-BF16', 'F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q5_0', 'Q4_K', 'Q6_K', 'Q4_K_M'];
/**
 * The IQ4 types, MXFP4 and llama-quantize's other presets: all on llama, each once on another
 * family (tied qwen3 and gemma2 put IQ4_NL's and IQ4_XS_MIX's choices in the embedding).
 */
const LAST_TYPES = ['IQ4_NL', 'IQ4_XS', 'MXFP4', 'Q4_K_S', 'Q3_K_M', 'Q2_K_MIX', 'IQ4_XS_MIX'];
const LEGACY_MIN: Partial<Record<Arch, string[]>> = {
  llama: ['Q4_1', 'Q5_K', 'Q2_K', ...LAST_TYPES],
  qwen2: ['Q5_1', 'Q3_K', 'MXFP4'],
  qwen3: ['Q5_K', 'Q5_K_M', 'IQ4_NL', 'Q3_K_M'],
  mistral: ['Q4_K_S'],
};
/** Families added on top of the four: HF folders and the GGUF types the issue names, not the whole grid. */
const NEWER = ['hf-F32', 'F16', 'Q8_0', 'Q4_K_M'];
/** Granite and Phi-3: the HF folder and the GGUF types issue #16 names for them. */
const DENSE = ['hf-F32', 'F32', 'F16', 'Q8_0', 'Q4_K', 'Q4_K_M'];
const CASES: Array<[Arch, string[]]> = [
  ...(['llama', 'qwen2', 'qwen3', 'mistral'] as Arch[]).map((a): [Arch, string[]] => [a, [...FORMATS, ...(LEGACY_MIN[a] ?? [])]]),
  ['smollm3', [...NEWER, 'Q2_K_MIX']],
  ['olmo2', [...NEWER, 'IQ4_XS']],
  ['gemma2', [...NEWER, 'IQ4_XS_MIX']],
  // Six tiny layers (one global): the HF folder and one GGUF type.
  ['gemma3', ['hf-F32', 'Q8_0']],
  // The list: the HF folder and F32, F16, Q8_0, Q4_K and the Q4_K_M mix.
  ['granite', DENSE],
  // Fused projections split at load, partial rotary and LongRoPE (the long factors: the default
  // context exceeds the fixture's original one).
  ['phi3', DENSE],
  // Mixture of experts: the HF folder (experts stacked at load) and the GGUF types the issue names
  // on qwen3moe; the other two on their HF folder and the Q4_K_M mix (all 18 family × format
  // cases passed once; the grid costs about 15 s a case on SwiftShader).
  ['qwen3moe', ['hf-F32', 'F32', 'F16', 'Q8_0', 'Q4_K', 'Q4_K_M']],
  ['qwen2moe', ['hf-F32', 'Q4_K_M']],
  ['olmoe', ['hf-F32', 'Q4_K_M']],
];

describe.each(CASES)('the GPU engine on the tiny %s fixture', (arch, variants) => {
  const urls = useFixtureURLs(arch);
  let gpu: GPUContext;
  beforeAll(async () => {
    gpu = await testGPU();
  });

  it.each(variants)('%s: greedy tokens and teacher-forced logits match the reference', async (variant) => {
    await expectModelMatchesReference(gpu, urls()[variant]!, { precision: 'f32', steps: STEPS, tolerance: LOGIT_TOLERANCE, salt: 13 * (arch.length + 1) });
  });
});

describe('the GPU engine on LongRoPE at a context within the original one', () => {
  const urls = useFixtureURLs('phi3');
  // The tiny phi3 fixture's original context is 512: a 256-token engine takes the short factors.
  it('Q8_0 with a 256-token context: greedy tokens and teacher-forced logits match the reference', async () => {
    await expectModelMatchesReference(await testGPU(), urls().Q8_0!, { precision: 'f32', steps: 16, tolerance: LOGIT_TOLERANCE, salt: 5, engine: { contextLength: 256 } });
  });
});

/**
 * llama-quantize's mixes on a hidden size that is a multiple of 32 but not of 256 (as Qwen2.5-0.5B's
 * 896): rows of 288 fall back to Q5_0 / Q5_1 / Q4_0 / IQ4_NL / Q8_0 while rows of 256 and 512
 * (attn_output, ffn_down) keep the preset's K- and IQ-quants. Q4_K_M (Q5_0 and Q8_0 rows) and
 * IQ4_XS_MIX (IQ4_NL rows) run here; Q5_K_M's Q5_1 and Q2_K's Q4_0 rows are types the grid above
 * runs already, and the written files' types are checked in write.test.ts.
 */
describe('the GPU engine on mixes whose rows are not whole 256-blocks (hidden 288)', () => {
  const mixes = ['Q4_K_M', 'IQ4_XS_MIX'] as const;
  // The fixture as every test writes it (all of D288_MIXES), so one copy serves them all.
  const urls = useFixtureURLs('llama', { options: { hiddenSize: 288 }, which: { hf: [], gguf: D288_MIXES } });
  let gpu: GPUContext;
  beforeAll(async () => {
    gpu = await testGPU();
  });

  it.each(mixes)('%s: greedy tokens and teacher-forced logits match the reference', async (variant) => {
    await expectModelMatchesReference(gpu, urls()[variant]!, { precision: 'f32', steps: STEPS, tolerance: LOGIT_TOLERANCE, salt: 288 });
  });
});

describe('the GPU engine on a multimodal Gemma 3 folder', () => {
  // config.json nests the text config, tensors sit under language_model., a vision tower and
  // projector are skipped; the text weights are the text fixture's.
  it('runs the text model as gemma3_text: engine = reference, whose logits equal the text folder’s', async () => {
    const gpu = await testGPU();
    const [mm, text] = await Promise.all([
      ensureFixture({ arch: 'gemma3', preset: 'tiny', multimodal: true }, { hf: ['F32'] }),
      ensureFixture({ arch: 'gemma3', preset: 'tiny' }),
    ]);
    const opened = await openModel(mm.hf.F32!);
    expect([...opened.tensors.keys()].some((n) => !/^(token_embd|output_norm|blk\.\d+\.)/.test(n))).toBe(false);
    const ids = Array.from({ length: 12 }, (_, i) => (i * 31 + 7) % opened.config.vocabSize);
    const [fromMM, fromText] = await Promise.all([ReferenceModel.load(opened), openModel(text.hf.F32!).then((m) => ReferenceModel.load(m))]);
    expect(logitsFor(fromMM, ids)).toEqual(logitsFor(fromText, ids));
    const server = await serveDirectory(mm.root);
    try {
      const url = `${server.url}/${relative(mm.root, mm.hf.F32!).split('\\').join('/')}`;
      await expectModelMatchesReference(gpu, url, { precision: 'f32', steps: 16, tolerance: LOGIT_TOLERANCE, salt: 3 });
    } finally {
      await server.close();
    }
  });
});

describe('the GPU engine across prefill chunks and a cached prefix', () => {
  it('gives the same tokens with 8-token prefill chunks, and when the prompt prefix is reused', async () => {
    const gpu = await testGPU();
    const paths = await ensureFixture({ arch: 'llama', preset: 'tiny' });
    const opened = await openModel(paths.gguf.Q8_0!);
    const ref = await ReferenceModel.load(opened);
    // Pages of 4 tokens: the prefix cache shares whole pages, so 28 of the 29 tokens are cached.
    const engine = await GpuEngine.load(opened, { gpu, precision: 'f32', prefillChunk: 8, pageSize: 4 });
    try {
      const prompt = Array.from({ length: 29 }, (_, i) => (i * 31 + 5) % opened.config.vocabSize);
      const want = greedy(ref, prompt, 12);
      expect(await generateGreedy(engine, prompt, 12)).toEqual(want);
      // Same prompt again: all but its last token come from the prefix cache.
      const again = engine.generate({ promptIds: prompt, maxTokens: 12, sampling: GREEDY, stopTokenIds: [], ignoreEos: true, minTokens: 0 });
      const ids: number[] = [];
      let r = await again.next();
      while (!r.done) {
        ids.push(r.value.id);
        r = await again.next();
      }
      expect(ids).toEqual(want);
      expect(r.value.cachedTokens).toBe(prompt.length - 1);
    } finally {
      await engine.dispose();
    }
  });
});

describe('the GPU engine at head dims that are not a multiple of 16', () => {
  // One KV head for every query head; head dims 24 and 40 (odd multiples of 8) once made
  // attn_prefill refuse to load.
  it.each([24, 40])('head dim %i with 1 KV head: greedy tokens and teacher-forced logits match the reference', async (headDim) => {
    const gpu = await testGPU();
    const paths = await ensureFixture({ arch: 'qwen3', preset: 'tiny', heads: { numHeads: 4, numKvHeads: 1, headDim } }, { hf: ['F32'], gguf: [] });
    const server = await serveDirectory(paths.root);
    try {
      const url = `${server.url}/${relative(paths.root, paths.hf.F32!).split('\\').join('/')}`;
      await expectModelMatchesReference(gpu, url, { precision: 'f32', steps: 16, tolerance: LOGIT_TOLERANCE, salt: headDim });
    } finally {
      await server.close();
    }
  });
});
