/**
 * The WebGPU engine in headless Chromium against the CPU reference (which runs in the page too),
 * on fixtures served over real HTTP: the same checks as engine.test.ts in Node.
 */
import { describe, inject, it } from 'vitest';
import { testGPU } from '../testing/gpu';
import { expectModelMatchesReference, splittingLimit } from '../testing/engine-check';
import { describeBrowserEngineCases, LOGIT_TOLERANCE } from '../testing/browser-engine-cases';

/** The first families' cases; the rest in engine-families.browser.test.ts. */
const FIRST = ['llama', 'qwen2'];
describeBrowserEngineCases(FIRST);

describe('the GPU engine in Chromium with weights split by rows', () => {
  // As src/engine/split.test.ts in Node: the embedding (the head too: tied), the FFN and attention
  // matrices in 2 to 5 parts each, and Q4_K_M's mix of Q6_K and Q4_K rows.
  it('qwen3 Q4_K_M: greedy tokens and teacher-forced logits match the reference', async () => {
    const url = `${inject('fixturesURL')}/${inject('fixtures').qwen3!.Q4_K_M}`;
    const engine = { maxWeightPartBytes: await splittingLimit(url) };
    await expectModelMatchesReference(await testGPU(), url, { precision: 'f32', steps: 8, tolerance: LOGIT_TOLERANCE, salt: 31, engine });
  });
});
