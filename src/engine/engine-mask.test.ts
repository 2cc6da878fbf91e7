/**
 * How a grammar's mask meets the GPU step: the forward pass is submitted before the mask is asked
 * for (so the CPU computes it while the GPU runs), the mask written then is the one the sampler
 * sees, and a step without a grammar stays one command buffer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import type { Constraint } from '../structured/grammar';
import { maskWords } from '../kernels/mask-ref';
import { ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { GREEDY } from '../testing/sampling';
import { GpuEngine } from './engine';
import type { GenerateRequest, SamplingParams } from './types';

let engine: GpuEngine;
let submits = 0;
let restore: () => void = () => {};

beforeAll(async () => {
  const gpu = await testGPU();
  const paths = await ensureFixture({ arch: 'llama', preset: 'tiny' });
  engine = await GpuEngine.load(await openModel(paths.gguf.F32!), { gpu, precision: 'f32', contextLength: 64 });
  const queue = gpu.device.queue;
  const submit = queue.submit.bind(queue);
  queue.submit = (buffers: Iterable<GPUCommandBuffer>) => {
    submits++;
    submit(buffers);
  };
  restore = () => {
    queue.submit = submit;
  };
});
afterAll(async () => {
  restore();
  await engine?.dispose();
});

/** Allows exactly one token per step, a different one each step; records the submits seen when asked. */
function oneTokenPerStep(vocab: number): Constraint & { expected: number[]; submitsAtMask: number[] } {
  const expected: number[] = [];
  const submitsAtMask: number[] = [];
  return {
    words: maskWords(vocab),
    expected,
    submitsAtMask,
    async mask(out) {
      submitsAtMask.push(submits);
      const id = (expected.length * 37 + 5) % vocab;
      expected.push(id);
      out.fill(0);
      out[id >>> 5] = 1 << (id & 31);
    },
    accept: (id) => id === expected.at(-1),
    isTerminated: () => false,
    dispose() {},
  };
}

function request(sampling: SamplingParams, maxTokens: number, constraint?: Constraint): GenerateRequest {
  return { promptIds: [3, 1, 4, 1, 5], maxTokens, sampling, stopTokenIds: [], ignoreEos: true, minTokens: 0, cachePrompt: false, constraint };
}

async function ids(req: GenerateRequest): Promise<number[]> {
  const out: number[] = [];
  for await (const t of engine.generate(req)) out.push(t.id);
  return out;
}

describe('the grammar mask in the GPU step', () => {
  it('submits the forward pass before asking for the mask, and samples under the mask written after it', async () => {
    const c = oneTokenPerStep(engine.config.vocabSize);
    const before = submits;
    const got = await ids(request(GREEDY, 6, c));
    expect(got).toEqual(c.expected);
    // Step k asks for its mask after k two-buffer steps and its own forward submit.
    expect(c.submitsAtMask.map((n) => n - before)).toEqual([1, 3, 5, 7, 9, 11]);
    expect(submits - before).toBe(12);
  });

  it('masks the read-back logits on the CPU sampling path (DRY) the same way', async () => {
    const c = oneTokenPerStep(engine.config.vocabSize);
    const dry = { ...GREEDY, dry: { ...GREEDY.dry, multiplier: 0.8 } };
    const cpuBefore = engine.cpuSampledSteps;
    expect(await ids(request(dry, 4, c))).toEqual(c.expected);
    expect(engine.cpuSampledSteps - cpuBefore).toBe(4);
  });

  it('keeps an unconstrained step to one command buffer', async () => {
    const before = submits;
    expect(await ids(request(GREEDY, 5))).toHaveLength(5);
    expect(submits - before).toBe(5);
  });
});
