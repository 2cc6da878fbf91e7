/**
 * The engine-vs-reference check shared by the Node and Chromium engine tests: logits compared
 * teacher-forced at every step within `tolerance`, and greedy tokens identical up to the first step
 * where the reference's top-2 margin is below that tolerance (random weights make near-ties).
 */
import { expect } from 'vitest';
import { GpuEngine, type EngineOptions } from '../engine/engine';
import type { GPUContext } from '../gpu/device';
import type { Precision } from '../gpu/pipelines';
import { gpuBytesPerRow } from '../kernels/weights';
import { openModel } from '../model/open';
import { argmax, greedy, logitsFor, ReferenceModel } from '../reference/forward';
import { maxAbsDiffAll, top2Margin } from './compare';
import { GREEDY } from './sampling';

/** Greedy tokens of one request (with the loaded LoRA adapter `lora`, when given). */
export async function generateGreedy(engine: GpuEngine, promptIds: number[], maxTokens: number, lora?: string): Promise<number[]> {
  const out: number[] = [];
  for await (const t of engine.generate({ promptIds, maxTokens, sampling: GREEDY, stopTokenIds: [], ignoreEos: true, minTokens: 0, ...(lora !== undefined ? { lora } : {}) })) out.push(t.id);
  return out;
}

export async function expectEngineMatchesReference(
  engine: GpuEngine,
  ref: ReferenceModel,
  prompt: number[],
  steps: number,
  tolerance: number,
  /** A loaded LoRA adapter the engine runs with (`ref` then holds its merged weights). */
  lora?: string,
  /**
   * false: the greedy tokens are the argmax of the engine's teacher-forced logits instead of a
   * separate greedy run through the GPU sampler (which does not depend on the weights: the type
   * grid's short check compares what the weight type changes, at half the steps).
   */
  sampled = true,
): Promise<void> {
  const want = greedy(ref, prompt, steps);
  const sampledIds = sampled ? await generateGreedy(engine, prompt, steps, lora) : null;
  const ids = [...prompt, ...want];
  // From the prompt's last position on, as serving computes logits: the prompt is one prefill
  // (its K/V feed every later position), then one forced token per step.
  const refLogits = logitsFor(ref, ids).slice(prompt.length - 1);
  const gpuLogits = await engine.teacherForcedLogits(ids, lora, prompt.length);
  expect(gpuLogits.length).toBe(refLogits.length);
  expect(maxAbsDiffAll(gpuLogits, refLogits)).toBeLessThan(tolerance);
  const got = sampledIds ?? gpuLogits.slice(0, steps).map(argmax);
  for (let s = 0; s < steps; s++) {
    if (top2Margin(refLogits[s]!) < tolerance) break;
    expect(got[s], `step ${s}`).toBe(want[s]);
  }
}

/**
 * Loads the model at `url` on the GPU (at `precision`) and on the CPU, and checks a 20-token
 * prompt (long enough for the prefill to run the tiled matmul and prefill attention) followed by
 * `steps` greedy tokens. `salt` varies the prompt between callers; `engine` adds load options
 * (e.g. `deviceLimits` that split the weights).
 */
export async function expectModelMatchesReference(
  gpu: GPUContext,
  url: string,
  opts: { precision: Precision; steps: number; tolerance: number; salt: number; engine?: Omit<EngineOptions, 'gpu' | 'precision'>; sampled?: boolean },
): Promise<void> {
  const opened = await openModel(url);
  // Both at the same context: it picks LongRoPE's factors.
  const ref = await ReferenceModel.load(opened, { contextLength: opts.engine?.contextLength });
  const engine = await GpuEngine.load(opened, { ...opts.engine, gpu, precision: opts.precision });
  try {
    const vocab = opened.config.vocabSize;
    const prompt = Array.from({ length: 20 }, (_, i) => (i * 7919 + opts.salt) % vocab);
    await expectEngineMatchesReference(engine, ref, prompt, opts.steps, opts.tolerance, undefined, opts.sampled ?? true);
  } finally {
    await engine.dispose();
  }
}

/**
 * A `maxWeightPartBytes` that splits the model at `url`: a third of its first layer's gate matrix
 * (GPU layout), so every FFN matrix goes up in 3 or more parts, and the embedding in as many or
 * more on the tiny fixtures (460 rows of the hidden size, against the gate's 512).
 */
export async function splittingLimit(url: string): Promise<number> {
  const { tensors } = await openModel(url);
  const gate = tensors.get('blk.0.ffn_gate.weight')!.info;
  return Math.ceil((gate.shape[0]! * gpuBytesPerRow(gate.dtype, gate.shape[1]!)) / 3);
}
