/**
 * The engine-vs-reference comparison itself, free of any test runner: the engine tests assert on
 * its result (engine-check.ts) and `selfcheck` reports it (src/selfcheck/), so both judge a GPU by
 * the same rule. Logits are compared teacher-forced at every step; greedy tokens must be identical up
 * to the first step where the reference's top-2 margin is below the tolerance (random weights make
 * near-ties).
 */
import type { GpuEngine } from '../engine/engine';
import { argmax, greedyWithLogits, type ReferenceModel } from '../reference/forward';
import { maxAbsDiffAll, top2Margin } from './compare';
import { GREEDY } from './sampling';

/** Greedy tokens of one request (with the loaded LoRA adapter `lora`, when given). */
export async function generateGreedy(engine: GpuEngine, promptIds: number[], maxTokens: number, lora?: string): Promise<number[]> {
  const out: number[] = [];
  for await (const t of engine.generate({ promptIds, maxTokens, sampling: GREEDY, stopTokenIds: [], ignoreEos: true, minTokens: 0, ...(lora !== undefined ? { lora } : {}) })) out.push(t.id);
  return out;
}

export interface EngineComparison {
  /** Largest |engine − reference| over every compared logit (NaN when either has a NaN). */
  maxError: number;
  /** Rows of logits the engine gave, and the reference: they must be equal. */
  logitRows: number;
  refLogitRows: number;
  /** The first step (before a near-tie) whose greedy token differs, or null. */
  greedyMismatch: { step: number; got: number; want: number } | null;
}

/**
 * Runs `prompt` then `steps` greedy tokens on the reference, and on the engine teacher-forced
 * (logits from the prompt's last position on, as serving computes them: the prompt as one prefill,
 * then one forced token per step) and, when `sampled`, as a greedy request through the GPU sampler
 * (else the greedy tokens are the argmax of the engine's teacher-forced logits).
 */
export async function compareEngineWithReference(
  engine: GpuEngine,
  ref: ReferenceModel,
  prompt: number[],
  steps: number,
  tolerance: number,
  opts: { lora?: string; sampled?: boolean } = {},
): Promise<EngineComparison> {
  // One reference run gives both the greedy tokens and the logits of every position after the prompt.
  const { tokens: want, logits: refLogits } = greedyWithLogits(ref, prompt, steps);
  const sampledIds = (opts.sampled ?? true) ? await generateGreedy(engine, prompt, steps, opts.lora) : null;
  const ids = [...prompt, ...want];
  const gpuLogits = await engine.teacherForcedLogits(ids, opts.lora, prompt.length);
  const rows = Math.min(gpuLogits.length, refLogits.length);
  const maxError = maxAbsDiffAll(gpuLogits.slice(0, rows), refLogits.slice(0, rows));
  const got = sampledIds ?? gpuLogits.slice(0, steps).map(argmax);
  let greedyMismatch: EngineComparison['greedyMismatch'] = null;
  for (let s = 0; s < steps; s++) {
    if (top2Margin(refLogits[s]!) < tolerance) break;
    if (got[s] !== want[s]) {
      greedyMismatch = { step: s, got: got[s]!, want: want[s]! };
      break;
    }
  }
  return { maxError, logitRows: gpuLogits.length, refLogitRows: refLogits.length, greedyMismatch };
}
