/**
 * The WebGPU engine against the CPU reference forward pass, on every fixture architecture and file
 * format, through the real loader over real HTTP. Random weights make near-ties, so: logits are
 * compared teacher-forced at every step within LOGIT_TOLERANCE, and greedy tokens must be
 * identical up to the first step where the reference's top-2 margin is below that tolerance.
 * The four first families here; the later ones in engine-families.test.ts (the two files run side
 * by side). The grid's formats are MAIN_GRID's (engine-matrix.ts); the rest of every architecture ×
 * weight type runs in the short engine-types*.test.ts.
 */
import { INTEGER_DOT_LOGIT_TOLERANCE } from '../testing/tolerances';
import { relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { greedy, ReferenceModel } from '../reference/forward';
import { ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { serveDirectory } from '../testing/server';
import { GpuEngine } from './engine';
import { expectModelMatchesReference, generateGreedy } from '../testing/engine-check';
import { describeEngineGrid, FIRST_FAMILIES, LOGIT_TOLERANCE, MAIN_GRID, SHORT_STEPS } from '../testing/engine-matrix';
import { GREEDY } from '../testing/sampling';
import { useFixtureURLs } from '../testing/fixture-server';
import { pipelineCache, type PipelineCache } from '../gpu/pipelines';


describeEngineGrid(MAIN_GRID.filter(([a]) => FIRST_FAMILIES.includes(a)));

describe('the GPU engine on YaRN (qwen3: factor 4 over an original context of 512)', () => {
  const urls = useFixtureURLs('qwen3', { options: { yarn: true }, which: { hf: ['F32'], gguf: ['Q8_0'] } });

  it('reads the HF folder and the GGUF the converter makes of it as the same YaRN', async () => {
    const [hf, gguf] = await Promise.all([openModel(urls()['hf-F32']!), openModel(urls().Q8_0!)]);
    expect(hf.config.ropeScaling).toMatchObject({ type: 'yarn', factor: 4, originalMaxPositionEmbeddings: 512, betaFast: 32, betaSlow: 1 });
    expect(gguf.config.ropeScaling).toEqual(hf.config.ropeScaling);
  });

  // The short check (the type grid's): YaRN changes the frequencies and the cos/sin factor, which
  // the prefill and every decode step use on every layer.
  it.each(['hf-F32', 'Q8_0'])('%s: teacher-forced logits and greedy tokens match the reference', async (variant) => {
    await expectModelMatchesReference(await testGPU(), urls()[variant]!, { precision: 'f32', steps: SHORT_STEPS, tolerance: LOGIT_TOLERANCE, salt: 7, sampled: false });
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

describe('the GPU engine with integer dot products (integerDot)', () => {
  // One-token steps (every teacher-forced step and every greedy decode step here) take
  // matvec_dot where the device reports packed_4x8_integer_dot_product: each such matvec's input
  // is rounded to int8 per block of 32 (the kernel itself is held to its quantised reference in
  // src/kernels/matvec-dot.gpu.test.ts), so the logits are the float reference's within that
  // rounding, not within the float path's 1e-3. INTEGER_DOT_LOGIT_TOLERANCE: a rounded value is off by up to
  // d / 2 (d = max|x| / 127 of its block), an RMS error of d / √12, about 0.4% of the RMS of
  // uniform-like activations; the tiny llama's 2 layers quantise 4 matvec inputs each, plus the
  // head's, each adding such an error of its output, so the logits (RMS ≈ 5, max ≈ 19 here) move by
  // about 1% of their RMS, ≈ 0.05 RMS and ≈ 0.25 at most over the ~20 steps × vocab compared
  // (measured on SwiftShader: 0.22 Q8_0, 0.19 Q4_K_M). 0.5 is twice that, 10% of the logits' RMS: a
  // wrong weight type, scale or offset moves them by their whole size. Greedy tokens must then match
  // up to the first step whose reference top-2 margin is below it.
  const urls = useFixtureURLs('llama');
  // Q4_K_M: two types (Q4_K and Q6_K rows) in one case; every type is in the kernel tests.
  it.each(['Q4_K_M'])('%s: greedy tokens and teacher-forced logits match the reference, decode matvecs by dot4I8Packed', async (variant) => {
    const gpu = await testGPU();
    if (!gpu.info.integerDot) return; // nothing to compare against the float path's test
    // The kernels the engine asks the device's pipeline cache for (whether compiled now or before).
    const cache = pipelineCache(gpu.device);
    const names: string[] = [];
    const get = cache.get;
    cache.get = function (this: PipelineCache, kernel, spec) {
      names.push(kernel.name);
      return get.call(this, kernel, spec);
    };
    try {
      await expectModelMatchesReference(gpu, urls()[variant]!, { precision: 'f32', steps: 4, tolerance: INTEGER_DOT_LOGIT_TOLERANCE, salt: 13, engine: { integerDot: true } });
    } finally {
      cache.get = get;
    }
    expect(names.filter((n) => n.startsWith('matvec_dot')).length).toBeGreaterThan(0);
  });
});
