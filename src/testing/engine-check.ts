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
import { ReferenceModel } from '../reference/forward';
import { compareEngineWithReference } from './engine-compare';

export { generateGreedy } from './engine-compare';

/**
 * The main grid's greedy run after the 20-token prompt: 16 decode steps reach position 35, so decode
 * writes K/V across the boundary of the default 16-token pages (at 32) as well as the prompt's.
 * Contexts this short take one attention split (decodeSplits: one per 64 keys); several splits and
 * their combine are the attention kernel tests' and batch.test.ts's. (32 steps until the type grid
 * made CI's Node step too long; a shorter run checks a prefix of the same tokens and logits.)
 */
export const STEPS = 16;
/**
 * The type grid's short check (engine-types*.test.ts, and Chromium's sample): the 20-token prompt's prefill (tiled
 * matmul) and 4 teacher-forced decode steps (matvec), their logits against the reference's and
 * their argmax against its greedy tokens (no second run through the GPU sampler).
 * Enough for a weight type: it only changes how the linear ops, the MoE experts and the embedding
 * dequantise, and the prefill and every decode step run all of them on every layer; the long
 * runs (KV pages, many steps) stay in the main grid, on every architecture.
 */
export const SHORT_STEPS = 4;

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
  const r = await compareEngineWithReference(engine, ref, prompt, steps, tolerance, { lora, sampled });
  expect(r.logitRows).toBe(r.refLogitRows);
  expect(r.maxError).toBeLessThan(tolerance);
  if (r.greedyMismatch) expect(r.greedyMismatch.got, `step ${r.greedyMismatch.step}`).toBe(r.greedyMismatch.want);
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
