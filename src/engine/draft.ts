/**
 * The draft model of speculative decoding (EngineOptions.draft, `serve --draft-model`): a smaller
 * model of the same vocabulary that guesses the target's next tokens greedily, verified by the
 * target's steps (./proposers.ts `DraftProposer`).
 *
 * It is a GPU engine of its own on the target's device: its own KV pages and prefix cache, its
 * own step loop. Each guess is one greedy request to it for the sequence's tokens so far: its
 * prefix cache holds the pages of the tokens it saw before (keyed by their ids), so a guess
 * computes only the tokens after the last cached full page, then one step per guessed token.
 * A rejected guess leaves its tokens' pages under their own ids, never matched by a sequence that
 * went another way: that is its rollback. Its steps are counted apart from the target's
 * (EngineStats.draftSteps).
 */
import type { TextTokenizer } from '../text/tokenizer';
import { ModelError } from '../model/errors';
import type { Drafter } from './proposers';
import { GREEDY } from './sequence';
import type { GenerateRequest, GeneratedToken, GenerationResult } from './types';

/** What the draft model runs on: a backend that generates (the GPU engine), its steps counted. */
export interface DraftBackend {
  readonly tokenizer: TextTokenizer;
  readonly contextLength: number;
  generate(request: GenerateRequest): AsyncGenerator<GeneratedToken, GenerationResult, void>;
  readonly kvStats: { steps: number };
  dispose(): Promise<void>;
}

/** Tokens a draft guesses per step by default (EngineOptions.draft.tokens). */
export const DEFAULT_DRAFT_TOKENS = 8;

/** EngineOptions.draft.tokens, checked (before anything loads): a positive integer, default DEFAULT_DRAFT_TOKENS. */
export function draftTokens(tokens: number | undefined): number {
  if (tokens === undefined) return DEFAULT_DRAFT_TOKENS;
  if (!(Number.isInteger(tokens) && tokens >= 1)) throw new RangeError(`draft tokens must be a positive integer, got ${tokens}`);
  return tokens;
}

/**
 * Refuses a draft whose vocabulary is not the target's: its guesses are token ids, which must mean
 * the same text to both (llama.cpp's server checks the same). Every token string must match.
 */
export function checkDraftVocab(target: Pick<TextTokenizer, 'vocab'>, draft: Pick<TextTokenizer, 'vocab'>): void {
  const a = target.vocab;
  const b = draft.vocab;
  if (a.length !== b.length)
    throw new ModelError('invalid_field', `the draft model's vocabulary has ${b.length} tokens, the model's ${a.length}: a draft model must share the model's tokenizer`, 'draft');
  const at = a.findIndex((t, i) => t !== b[i]);
  if (at >= 0)
    throw new ModelError('invalid_field', `the draft model's token ${at} is ${JSON.stringify(b[at])}, the model's ${JSON.stringify(a[at])}: a draft model must share the model's tokenizer`, 'draft');
}

export class DraftModel implements Drafter {
  constructor(
    private readonly backend: DraftBackend,
    readonly tokens: number,
  ) {}

  /** The draft engine's steps since load. */
  get steps(): number {
    return this.backend.kvStats.steps;
  }

  /** Its greedy continuation; a guess only, so whatever goes wrong (a full context, a failure) is no guess. */
  async draft(ids: readonly number[], count: number): Promise<number[]> {
    const n = Math.min(count, this.backend.contextLength - ids.length);
    if (n <= 0) return [];
    const out: number[] = [];
    try {
      const request: GenerateRequest = { promptIds: [...ids], maxTokens: n, sampling: GREEDY, stopTokenIds: [], ignoreEos: true, minTokens: 0 };
      for await (const t of this.backend.generate(request)) out.push(t.id);
    } catch {
      return [];
    }
    return out;
  }

  dispose(): Promise<void> {
    return this.backend.dispose();
  }
}
