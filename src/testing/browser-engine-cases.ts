/**
 * The engine-vs-reference grid in Chromium (engine.browser.test.ts and
 * engine-families.browser.test.ts share it, each taking part, so that they run side by side): the
 * same rule as engine-check.ts's in Node, on fixtures the global setup serves.
 */
import { describe, expect, inject, it } from 'vitest';
import { expectModelMatchesReference, SHORT_STEPS, STEPS } from './engine-check';
import { testGPU } from './gpu';

export const LOGIT_TOLERANCE = 1e-3; // f32 path, as in engine.test.ts
/**
 * The long run (Node's main grid's STEPS: 16 greedy steps through the GPU sampler, past the
 * default 16-token KV page boundary) on these cases; every other case takes Node's short check
 * (engine-matrix.ts SHORT_STEPS: the prefill and 4 teacher-forced decode steps), which runs every
 * kernel a format or a family loads at a fifth of the cost. What the long run adds (KV pages,
 * the sampler) does not depend on the format or the family, and Node runs it on every family.
 */
const LONG_CASES = new Set(['llama hf-F32', 'qwen3moe Q4_K_M', 'lfm2 Q8_0']);

/**
 * A sample of Node's grid (engine-matrix.ts: every architecture × every type), as the browser's
 * WebGPU is the same Dawn and Tint that Node's tests run: every architecture once, and every file
 * format's loader (HF folders in F32, F16 and BF16; GGUF's float types F32, F16 and BF16; the
 * quantized mixes, tied embeddings in one), spread over the first four families. The weight types'
 * kernels run in Chromium in the kernel tests (testing/gpu.ts KERNEL_TYPES: one type of each
 * decode path; MXFP4's here); a quantized type in the engine adds nothing the browser could break
 * that those miss, and each cost 3-6 s of the Chromium step (16 dropped: 70 s).
 * engine-matrix.test.ts holds the "at least once".
 */
export const BROWSER_ENGINE_CASES: Array<[string, string]> = [
  ...['hf-F32', 'F16', 'Q4_K_M', 'MXFP4'].map((f): [string, string] => ['llama', f]),
  ...['hf-F16', 'BF16'].map((f): [string, string] => ['qwen2', f]),
  // Tied embeddings: the head reads the embedding's type.
  ...['hf-BF16', 'F32', 'IQ4_XS_MIX'].map((f): [string, string] => ['qwen3', f]),
  ['mistral', 'Q2_K_MIX'],
  ['smollm3', 'Q8_0'],
  ['olmo2', 'hf-F32'],
  ['gemma2', 'Q4_K_M'],
  // Six tiny layers: the HF folder.
  ['gemma3', 'hf-F32'],
  ['granite', 'Q4_K_M'],
  ['phi3', 'Q4_K_M'],
  // Mixture of experts: routed experts in a K-quant mix (renormalised top-k), and a shared expert.
  ['qwen3moe', 'Q4_K_M'],
  ['qwen2moe', 'hf-F32'],
  // OLMoE: F16 experts (the MoE kernels' plain-float path; the two above run K-quants and F32).
  ['olmoe', 'F16'],
  // Gated short convolutions (LFM2) beside attention.
  ['lfm2', 'Q8_0'],
  // Gated DeltaNet and gated attention (Qwen3.5).
  ['qwen35', 'Q8_0'],
  // Mamba-2 (Granite 4.0-H): the biased conv, the scan and the grouped norm.
  ['granite-h', 'Q8_0'],
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
      const long = LONG_CASES.has(`${arch} ${variant}`);
      await expectModelMatchesReference(await testGPU(), url, { precision: 'f32', steps: long ? STEPS : SHORT_STEPS, sampled: long, tolerance: LOGIT_TOLERANCE, salt: 29 });
    });
  });
}
