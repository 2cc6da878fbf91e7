/**
 * The WebGPU engine against the CPU reference forward pass, on every fixture architecture and file
 * format, through the real loader over real HTTP. Random weights make near-ties, so: logits are
 * compared teacher-forced at every step within LOGIT_TOLERANCE, and greedy tokens must be
 * identical up to the first step where the reference's top-2 margin is below that tolerance.
 */
import { relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GPUContext } from '../gpu/device';
import type { Arch } from '../model/config';
import { openModel } from '../model/open';
import { greedy, ReferenceModel } from '../reference/forward';
import { ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { serveDirectory } from '../testing/server';
import { GpuEngine } from './engine';
import { expectEngineMatchesReference, generateGreedy } from '../testing/engine-check';
import { GREEDY } from '../testing/sampling';

/** f32 path: GPU and reference read the same dequantised weights; only summation order differs. */
const LOGIT_TOLERANCE = 1e-3;
const STEPS = 32;

/** Every fixture architecture × every format the generator writes. */
const FORMATS = ['hf-F32', 'hf-F16', 'hf-BF16', 'F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q4_K', 'Q6_K', 'Q4_K_M'];
const CASES: Array<[Arch, string[]]> = (['llama', 'qwen2', 'qwen3', 'mistral'] as Arch[]).map((a) => [a, FORMATS]);

describe.each(CASES)('the GPU engine on the tiny %s fixture', (arch, variants) => {
  let server: Awaited<ReturnType<typeof serveDirectory>>;
  let urls: Record<string, string>;
  let gpu: GPUContext;

  beforeAll(async () => {
    gpu = await testGPU();
    const paths = await ensureFixture({ arch, preset: 'tiny' });
    server = await serveDirectory(paths.root);
    const at = (p: string) => `${server.url}/${relative(paths.root, p).split('\\').join('/')}`;
    urls = {};
    for (const [k, p] of Object.entries(paths.hf)) urls[`hf-${k}`] = at(p as string);
    for (const [k, p] of Object.entries(paths.gguf)) urls[k] = at(p as string);
  });
  afterAll(() => server?.close());

  it.each(variants)('%s: greedy tokens and teacher-forced logits match the reference', async (variant) => {
    const opened = await openModel(urls[variant]!);
    const ref = await ReferenceModel.load(opened);
    const engine = await GpuEngine.load(opened, { gpu, precision: 'f32' });
    try {
      // A 20-token prompt: the prefill runs the tiled matmul and prefill attention (T > 8).
      const vocab = opened.config.vocabSize;
      const prompt = Array.from({ length: 20 }, (_, i) => (i * 7919 + 13 * (arch.length + 1)) % vocab);
      await expectEngineMatchesReference(engine, ref, prompt, STEPS, LOGIT_TOLERANCE);
    } finally {
      await engine.dispose();
    }
  });
});

describe('the GPU engine across prefill chunks and a cached prefix', () => {
  it('gives the same tokens with 8-token prefill chunks, and when the prompt prefix is reused', async () => {
    const gpu = await testGPU();
    const paths = await ensureFixture({ arch: 'llama', preset: 'tiny' });
    const opened = await openModel(paths.gguf.Q8_0!);
    const ref = await ReferenceModel.load(opened);
    const engine = await GpuEngine.load(opened, { gpu, precision: 'f32', prefillChunk: 8 });
    try {
      const prompt = Array.from({ length: 29 }, (_, i) => (i * 31 + 5) % opened.config.vocabSize);
      const want = greedy(ref, prompt, 12);
      expect(await generateGreedy(engine, prompt, 12)).toEqual(want);
      // Same prompt again: all but its last token come from the KV cache.
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
