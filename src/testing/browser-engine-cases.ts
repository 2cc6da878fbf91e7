/**
 * The engine-vs-reference grid in Chromium (engine.browser.test.ts and
 * engine-families.browser.test.ts share it, each taking part, so that they run side by side): the
 * same rule as engine-check.ts's in Node, on fixtures the global setup serves.
 */
import { describe, expect, inject, it } from 'vitest';
import { expectModelMatchesReference } from './engine-check';
import { testGPU } from './gpu';

export const LOGIT_TOLERANCE = 1e-3; // f32 path, as in engine.test.ts
const STEPS = 32;

/**
 * A representative sample of Node's grid (engine-matrix.ts: every architecture × every type): the
 * first four families × every format the generator wrote before issue #15; each of #15's types and
 * mixes at least once (two mixes on hidden 288 too); every later family on at least one format.
 */
const FORMATS = ['hf-F32', 'hf-F16', 'hf-BF16', 'F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q5_0', 'Q4_K', 'Q6_K', 'Q4_K_M'];
const LEGACY_MIN: Record<string, string[]> = {
  llama: ['Q4_1', 'Q5_K', 'Q2_K', 'IQ4_NL', 'MXFP4', 'Q3_K_M'],
  qwen2: ['Q5_1', 'Q3_K', 'IQ4_XS'],
  qwen3: ['Q5_K', 'Q5_K_M', 'IQ4_XS_MIX'],
  // The two presets the others leave out, so that every type and mix of issue #15 runs in Chromium.
  mistral: ['Q4_K_S', 'Q2_K_MIX'],
};
/** Families added on top of the four: an HF folder and two GGUF types each, as a smaller grid than Node's. */
const NEWER = ['hf-F32', 'Q8_0', 'Q4_K_M'];
export const BROWSER_ENGINE_CASES: Array<[string, string]> = [
  ...['llama', 'qwen2', 'qwen3', 'mistral'].flatMap((a) => [...FORMATS, ...(LEGACY_MIN[a] ?? [])].map((f): [string, string] => [a, f])),
  ...['smollm3', 'olmo2', 'gemma2'].flatMap((a) => NEWER.map((f): [string, string] => [a, f])),
  // Six tiny layers: the HF folder and one GGUF type.
  ...['hf-F32', 'Q8_0'].map((f): [string, string] => ['gemma3', f]),
  ['granite', 'Q4_K_M'],
  ['phi3', 'Q4_K_M'],
  // Mixture of experts: routed experts in a K-quant mix (renormalised top-k), and a shared expert.
  ['qwen3moe', 'Q4_K_M'],
  ['qwen2moe', 'hf-F32'],
  // OLMoE: F16 experts (the MoE kernels' plain-float path; the two above run K-quants and F32).
  ['olmoe', 'F16'],
  // Hidden 288: rows of 288 in llama-quantize's fallbacks (Q5_0 and Q8_0; IQ4_NL).
  ['llama-d288', 'Q4_K_M'],
  ['llama-d288', 'IQ4_XS_MIX'],
  ['gemma3-mm', 'hf-F32'],
];

/** The grid's cases of `archs` (fixture keys), each a test. */
export function describeBrowserEngineCases(archs: readonly string[]): void {
  describe('the GPU engine in Chromium', () => {
    it.each(BROWSER_ENGINE_CASES.filter(([a]) => archs.includes(a)))('%s %s: greedy tokens and teacher-forced logits match the reference', async (arch, variant) => {
      const url = `${inject('fixturesURL')}/${inject('fixtures')[arch]![variant]}`;
      expect(navigator.gpu).toBeDefined();
      await expectModelMatchesReference(await testGPU(), url, { precision: 'f32', steps: STEPS, tolerance: LOGIT_TOLERANCE, salt: 29 });
    });
  });
}
