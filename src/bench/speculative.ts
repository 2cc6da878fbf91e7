/**
 * The bench's speculative decoding part (issue #32): one stream, greedy, decoded without
 * speculation, then with each proposer: a prediction equal to the output (a file repeated), a
 * prediction with one token in every EDIT_EVERY changed (an edited file: proposals re-align after
 * each change), and n-gram lookup. Tokens per target step is what speculation buys wherever the
 * GPU is bandwidth-bound; tok/s says whether a verify step of k + 1 rows costs what one row costs
 * (on an emulated GPU it does not: counts only there).
 */
import type { GpuEngine } from '../engine/engine';
import type { SpeculationRequest } from '../engine/proposers';
import { countedRun } from './structured';

/** The edited prediction changes one token in this many. */
const EDIT_EVERY = 16;
/** n-gram lookup's settings in the bench. */
const NGRAM = { n: 3, k: 8 };

export interface SpeculativeRun {
  tokens: number;
  steps: number;
  /** Tokens per step after the first (the prompt's): (tokens − 1) / (steps − 1). */
  tokensPerStep: number;
  msPerToken: number;
  proposed: number;
  accepted: number;
}

export interface SpeculativeBench {
  none: SpeculativeRun;
  copy: SpeculativeRun;
  edited: SpeculativeRun;
  ngram: SpeculativeRun;
  /** Every run gave the tokens decoding without speculation gave (it must). */
  identical: boolean;
}

type BenchEngine = Pick<GpuEngine, 'generate' | 'kvStats'>;

async function speculativeRun(engine: BenchEngine, promptIds: number[], maxTokens: number, speculation?: SpeculationRequest): Promise<SpeculativeRun & { ids: number[] }> {
  const { ids, tokens, steps, tokensPerStep, msPerToken, result } = await countedRun(engine, { promptIds, maxTokens, ignoreEos: true, cachePrompt: false, ...(speculation ? { speculation } : {}) });
  return { ids, tokens, steps, tokensPerStep, msPerToken, ...(result.speculation ?? { proposed: 0, accepted: 0 }) };
}

/** One token in every EDIT_EVERY of `ids` replaced by another id of the vocabulary. */
export function edited(ids: readonly number[], vocab: number): number[] {
  return ids.map((id, i) => (i % EDIT_EVERY === EDIT_EVERY / 2 ? (id + 1) % vocab : id));
}

/** Decoding without speculation (after one warm-up run with it), then with each proposer. */
export async function benchSpeculative(engine: BenchEngine, promptIds: number[], maxTokens: number, vocab: number): Promise<SpeculativeBench> {
  // Warm-up: a verify step's rows may take pipelines a one-token step does not.
  await speculativeRun(engine, promptIds, Math.min(maxTokens, 8), { ngram: NGRAM });
  const { ids: want, ...none } = await speculativeRun(engine, promptIds, maxTokens);
  const { ids: a, ...copy } = await speculativeRun(engine, promptIds, maxTokens, { prediction: want });
  const { ids: b, ...edit } = await speculativeRun(engine, promptIds, maxTokens, { prediction: edited(want, vocab) });
  const { ids: c, ...ngram } = await speculativeRun(engine, promptIds, maxTokens, { ngram: NGRAM });
  return { none, copy, edited: edit, ngram, identical: [a, b, c].every((ids) => ids.join() === want.join()) };
}
