/**
 * The WebGPU engine in headless Chromium against the CPU reference (which runs in the page too),
 * on fixtures served over real HTTP: the same checks as engine.test.ts in Node.
 */
import { describe, expect, inject, it } from 'vitest';
import { testGPU } from '../testing/gpu';
import { expectModelMatchesReference, splittingLimit } from '../testing/engine-check';

const LOGIT_TOLERANCE = 1e-3; // f32 path, as in engine.test.ts
const STEPS = 32;

/**
 * Every fixture architecture × every format the generator writes; Q4_1, Q5_1, Q5_K, Q3_K, Q2_K,
 * the IQ4 types, MXFP4 and the other mixes on some, as in Node (two mixes on hidden 288 too).
 */
const FORMATS = ['hf-F32', 'hf-F16', 'hf-BF16', 'F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q5_0', 'Q4_K', 'Q6_K', 'Q4_K_M'];
const LEGACY_MIN: Record<string, string[]> = {
  llama: ['Q4_1', 'Q5_K', 'Q2_K', 'IQ4_NL', 'MXFP4', 'Q3_K_M'],
  qwen2: ['Q5_1', 'Q3_K', 'IQ4_XS'],
  qwen3: ['Q5_K', 'Q5_K_M', 'IQ4_XS_MIX'],
};
/** Families added on top of the four: an HF folder and two GGUF types each, as a smaller grid than Node's. */
const NEWER = ['hf-F32', 'Q8_0', 'Q4_K_M'];
const CASES: Array<[string, string]> = [
  ...['llama', 'qwen2', 'qwen3', 'mistral'].flatMap((a) => [...FORMATS, ...(LEGACY_MIN[a] ?? [])].map((f): [string, string] => [a, f])),
  ...['smollm3', 'olmo2', 'gemma2'].flatMap((a) => NEWER.map((f): [string, string] => [a, f])),
  // Six tiny layers: the HF folder and one GGUF type.
  ...['hf-F32', 'Q8_0'].map((f): [string, string] => ['gemma3', f]),
  ['granite', 'Q4_K_M'],
  ['phi3', 'Q4_K_M'],
  // Mixture of experts: routed experts in a K-quant mix (renormalised top-k), and a shared expert.
  ['qwen3moe', 'Q4_K_M'],
  ['qwen2moe', 'hf-F32'],
  // Hidden 288: rows of 288 in llama-quantize's fallbacks (Q5_0 and Q8_0; IQ4_NL).
  ['llama-d288', 'Q4_K_M'],
  ['llama-d288', 'IQ4_XS_MIX'],
  ['gemma3-mm', 'hf-F32'],
];

describe('the GPU engine in Chromium', () => {
  it.each(CASES)('%s %s: greedy tokens and teacher-forced logits match the reference', async (arch, variant) => {
    const url = `${inject('fixturesURL')}/${inject('fixtures')[arch]![variant]}`;
    expect(navigator.gpu).toBeDefined();
    await expectModelMatchesReference(await testGPU(), url, { precision: 'f32', steps: STEPS, tolerance: LOGIT_TOLERANCE, salt: 29 });
  });
});

describe('the GPU engine in Chromium with weights split by rows', () => {
  // As src/engine/split.test.ts in Node: the embedding (the head too: tied), the FFN and attention
  // matrices in 2 to 5 parts each, and Q4_K_M's mix of Q6_K and Q4_K rows.
  it('qwen3 Q4_K_M: greedy tokens and teacher-forced logits match the reference', async () => {
    const url = `${inject('fixturesURL')}/${inject('fixtures').qwen3!.Q4_K_M}`;
    const engine = { maxWeightPartBytes: await splittingLimit(url) };
    await expectModelMatchesReference(await testGPU(), url, { precision: 'f32', steps: 8, tolerance: LOGIT_TOLERANCE, salt: 31, engine });
  });
});
