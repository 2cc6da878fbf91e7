/**
 * The WebGPU engine in headless Chromium against the CPU reference (which runs in the page too),
 * on fixtures served over real HTTP: the same checks as engine.test.ts in Node.
 */
import { describe, expect, inject, it } from 'vitest';
import { openModel } from '../model/open';
import { ReferenceModel } from '../reference/forward';
import { testGPU } from '../testing/gpu';
import { expectEngineMatchesReference } from '../testing/engine-check';
import { GpuEngine } from './engine';

const LOGIT_TOLERANCE = 1e-3; // f32 path, as in engine.test.ts
const STEPS = 32;

/** Every fixture architecture × every format the generator writes. */
const FORMATS = ['hf-F32', 'hf-F16', 'hf-BF16', 'F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q4_K', 'Q6_K', 'Q4_K_M'];
const CASES: Array<[string, string]> = ['llama', 'qwen2', 'qwen3', 'mistral'].flatMap((a) => FORMATS.map((f): [string, string] => [a, f]));

describe('the GPU engine in Chromium', () => {
  it.each(CASES)('%s %s: greedy tokens and teacher-forced logits match the reference', async (arch, variant) => {
    const url = `${inject('fixturesURL')}/${inject('fixtures')[arch]![variant]}`;
    const opened = await openModel(url);
    const ref = await ReferenceModel.load(opened);
    const gpu = await testGPU();
    expect(navigator.gpu).toBeDefined();
    const engine = await GpuEngine.load(opened, { gpu, precision: 'f32' });
    try {
      const vocab = opened.config.vocabSize;
      const prompt = Array.from({ length: 20 }, (_, i) => (i * 7919 + 29) % vocab);
      await expectEngineMatchesReference(engine, ref, prompt, STEPS, LOGIT_TOLERANCE);
    } finally {
      await engine.dispose();
    }
  });
});
