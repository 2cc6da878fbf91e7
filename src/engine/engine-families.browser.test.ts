/**
 * The WebGPU engine in headless Chromium against the CPU reference: the grid's cases beyond
 * engine.browser.test.ts's first families (split so that the two files run side by side); and
 * Qwen3.5's MTP head as a proposer in the browser.
 */
import { describe, expect, inject, it } from 'vitest';
import { GpuEngine } from './engine';
import { openModel } from '../model/open';
import { BROWSER_ENGINE_CASES, describeBrowserEngineCases } from '../testing/browser-engine-cases';
import { testGPU } from '../testing/gpu';
import { drainGeneration, greedyRequest } from '../testing/sampling';

const FIRST = ['llama', 'qwen2'];
describeBrowserEngineCases([...new Set(BROWSER_ENGINE_CASES.map(([a]) => a))].filter((a) => !FIRST.includes(a)));

describe("Qwen3.5's MTP head in Chromium", () => {
  // After the grid's qwen35 Q8_0 case on the same device: the trunk's pipelines are compiled.
  it('Q8_0: greedy output with speculative {type: "mtp"} is the output without, its guesses counted', async () => {
    const opened = await openModel(`${inject('fixturesURL')}/${inject('fixtures')['qwen35-mtp']!.Q8_0}`);
    // maxBatch 2: a guess's verify row is a sampling row, at most maxBatch a step (an engine of 1 verifies none).
    const engine = await GpuEngine.load(opened, { gpu: await testGPU(), precision: 'f32', contextLength: 64, pageSize: 4, prefillChunk: 16, maxBatch: 2, mtp: true });
    try {
      const p = Array.from({ length: 9 }, (_, i) => (i * 31 + 5) % opened.config.vocabSize);
      const plain = await drainGeneration(engine.generate(greedyRequest(p, 6)));
      const spec = await drainGeneration(engine.generate(greedyRequest(p, 6, {}, { speculation: { mtp: { k: 1 } } })));
      expect(spec.ids).toEqual(plain.ids);
      // A guess a step from the second step on (the random head's are almost never taken).
      const { proposed, accepted } = spec.result.speculation!;
      expect(proposed + accepted).toBeGreaterThanOrEqual(4);
    } finally {
      await engine.dispose();
    }
  });
});
