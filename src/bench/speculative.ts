/**
 * The bench's speculative decoding part (issue #32): one stream, greedy, decoded without
 * speculation, then with each proposer: a prediction equal to the output (a file repeated), a
 * prediction with one token in every EDIT_EVERY changed (an edited file: proposals re-align after
 * each change), n-gram lookup, and a draft model (the model itself as its own draft, DRAFT_TOKENS
 * a step: every guess the model's own greedy token, so tokens per step is the mechanism's ceiling
 * and tok/s pays a full-size draft's steps; a real draft is a smaller model). Tokens per target step is what speculation buys wherever the
 * GPU is bandwidth-bound; tok/s says whether a verify step of k + 1 rows costs what one row costs
 * (on an emulated GPU it does not: counts only there).
 */
import type { GpuEngine } from '../engine/engine';
import type { Drafter, SpeculationRequest } from '../engine/proposers';
import { countedRun } from './structured';

/** The edited prediction changes one token in this many. */
const EDIT_EVERY = 16;
/** n-gram lookup's settings in the bench. */
const NGRAM = { n: 3, k: 8 };
/** Tokens the bench's draft model guesses per step. */
export const DRAFT_TOKENS = 4;

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
  /** With a draft model (DRAFT_TOKENS a step), and the draft's own steps. Absent in older reports. */
  draft?: SpeculativeRun & { draftSteps: number; draftTokens: number };
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
export async function benchSpeculative(engine: BenchEngine, promptIds: number[], maxTokens: number, vocab: number, drafter?: Drafter & { readonly steps: number }): Promise<SpeculativeBench> {
  // Warm-up: a verify step's rows may take pipelines a one-token step does not.
  await speculativeRun(engine, promptIds, Math.min(maxTokens, 8), { ngram: NGRAM });
  const { ids: want, ...none } = await speculativeRun(engine, promptIds, maxTokens);
  const { ids: a, ...copy } = await speculativeRun(engine, promptIds, maxTokens, { prediction: want });
  const { ids: b, ...edit } = await speculativeRun(engine, promptIds, maxTokens, { prediction: edited(want, vocab) });
  const { ids: c, ...ngram } = await speculativeRun(engine, promptIds, maxTokens, { ngram: NGRAM });
  let draft: SpeculativeBench['draft'];
  let d: number[] = want;
  if (drafter) {
    const before = drafter.steps;
    const { ids, ...run } = await speculativeRun(engine, promptIds, maxTokens, { draft: drafter });
    [d, draft] = [ids, { ...run, draftSteps: drafter.steps - before, draftTokens: drafter.tokens }];
  }
  return { none, copy, edited: edit, ngram, ...(draft ? { draft } : {}), identical: [a, b, c, d].every((ids) => ids.join() === want.join()) };
}
