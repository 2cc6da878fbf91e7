/**
 * The WebGPU engine against the CPU reference forward pass, on every fixture architecture and file
 * format, through the real loader over real HTTP. Random weights make near-ties, so: logits are
 * compared teacher-forced at every step within LOGIT_TOLERANCE, and greedy tokens must be
 * identical up to the first step where the reference's top-2 margin is below that tolerance.
 * The four first families here; the later ones in engine-families.test.ts (the two files run side
 * by side). The grid's formats are MAIN_GRID's (engine-matrix.ts); the rest of every architecture ×
 * weight type runs in the short engine-types*.test.ts.
 */
import { relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { greedy, ReferenceModel } from '../reference/forward';
import { ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { serveDirectory } from '../testing/server';
import { GpuEngine } from './engine';
import { expectModelMatchesReference, generateGreedy } from '../testing/engine-check';
import { describeEngineGrid, FIRST_FAMILIES, LOGIT_TOLERANCE, MAIN_GRID } from '../testing/engine-matrix';
import { GREEDY } from '../testing/sampling';


describeEngineGrid(MAIN_GRID.filter(([a]) => FIRST_FAMILIES.includes(a)));

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
