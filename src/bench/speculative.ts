/**
 * The bench's speculative decoding part (issue #32): one stream, greedy, decoded without
 * speculation, then with each proposer: a prediction equal to the output (a file repeated), a
 * prediction with one token in every EDIT_EVERY changed (an edited file: proposals re-align after
 * each change), n-gram lookup, and a draft model (the model itself as its own draft, DRAFT_TOKENS
 * a step: every guess the model's own greedy token, so tokens per step is the mechanism's ceiling
 * and tok/s pays a full-size draft's steps; a real draft is a smaller model), and on a model with
 * an MTP head (Qwen3.5: the fixture written with its head) the head's own guesses, with what the
 * head costs per guess. Tokens per target step is what speculation buys wherever the
 * GPU is bandwidth-bound; tok/s says whether a verify step of k + 1 rows costs what one row costs
 * (on an emulated GPU it does not: counts only there).
 */
import type { GpuEngine } from '../engine/engine';
import { MTP_DEFAULT_GUESSES, type MtpDrafter } from '../engine/mtp-proposer';
import type { Drafter, SpeculationRequest } from '../engine/proposers';
import { countedRun } from './structured';

/** The edited prediction changes one token in this many. */
const EDIT_EVERY = 16;
/** n-gram lookup's settings in the bench. */
const NGRAM = { n: 3, k: 8 };
/** Tokens the bench's draft model guesses per step. */
export const DRAFT_TOKENS = 4;
/** Tokens the MTP head guesses per step by default (speculative {type: "mtp", k}): the engine's default. */
export const MTP_TOKENS = MTP_DEFAULT_GUESSES;
/** Head runs timed for its cost per guess. */
const MTP_TIMED_RUNS = 8;

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
  /** With the model's MTP head, on a model that ships one. Absent in older reports and on models without a head. */
  mtp?: MtpSpeculativeRun;
  /** Every run gave the tokens decoding without speculation gave (it must). */
  identical: boolean;
}

/**
 * Decoding with the model's MTP head (speculative {type: "mtp", k}), and the head's cost per guess.
 * A fixture's head has random weights, so it guesses almost nothing right, as an untrained head
 * would: there the run measures the head's overhead; acceptance needs a real checkpoint.
 */
export interface MtpSpeculativeRun extends SpeculativeRun {
  k: number;
  /** Wall ms of one head run (one row fed, k chained guesses, their ids read back): what a step whose guesses were rejected pays before it. */
  headMsPerStep: number;
  /** Weight bytes one guess reads: the head's own (its layer, fc, norms), the trunk's LM head, an embedding row. */
  headBytesPerGuess: number;
}

/** `--hybrid`'s MTP case (./hybrid.ts): one stream without speculation and with the head. */
export interface MtpBench {
  none: SpeculativeRun;
  mtp: MtpSpeculativeRun;
  /** The head's run gave the tokens decoding without speculation gave (it must). */
  identical: boolean;
}

type BenchEngine = Pick<GpuEngine, 'generate' | 'kvStats' | 'config' | 'mtpHead'>;

async function speculativeRun(engine: BenchEngine, promptIds: number[], maxTokens: number, speculation?: SpeculationRequest): Promise<SpeculativeRun & { ids: number[] }> {
  const { ids, tokens, steps, tokensPerStep, msPerToken, result } = await countedRun(engine, { promptIds, maxTokens, ignoreEos: true, cachePrompt: false, ...(speculation ? { speculation } : {}) });
  return { ids, tokens, steps, tokensPerStep, msPerToken, ...(result.speculation ?? { proposed: 0, accepted: 0 }) };
}

/** One token in every EDIT_EVERY of `ids` replaced by another id of the vocabulary. */
export function edited(ids: readonly number[], vocab: number): number[] {
  return ids.map((id, i) => (i % EDIT_EVERY === EDIT_EVERY / 2 ? (id + 1) % vocab : id));
}

/** The head's wall ms per run of one row and `k` guesses, on a slot of its own (the engine idle: no sequence feeds it meanwhile). */
async function timeMtpHead(drafter: MtpDrafter, hiddenSize: number, vocab: number, k: number): Promise<number> {
  const slot = drafter.acquire();
  if (slot < 0) return NaN;
  try {
    const hidden = Float32Array.from({ length: hiddenSize }, (_, i) => Math.sin(i));
    // Warm-up: the head's one-row pipelines may compile on first use.
    await drafter.head.run(slot, hidden, [0], k);
    const t0 = performance.now();
    for (let i = 1; i <= MTP_TIMED_RUNS; i++) await drafter.head.run(slot, hidden, [(i * 7919) % vocab], k);
    return (performance.now() - t0) / MTP_TIMED_RUNS;
  } finally {
    drafter.release(slot);
  }
}

/** Decoding with the engine's MTP head, `k` guesses a step, and the head's cost per guess; undefined when the engine has no head loaded. */
export async function mtpRun(engine: BenchEngine, promptIds: number[], maxTokens: number, k = MTP_TOKENS): Promise<(MtpSpeculativeRun & { ids: number[] }) | undefined> {
  const hook = engine.mtpHead;
  if (!hook) return undefined;
  const run = await speculativeRun(engine, promptIds, maxTokens, { mtp: { k } });
  const headMsPerStep = await timeMtpHead(hook.drafter, engine.config.hiddenSize, engine.config.vocabSize, k);
  return { ...run, k, headMsPerStep, headBytesPerGuess: hook.bytesPerGuess };
}

/** Decoding without speculation, then with the MTP head (`npm run bench -- --hybrid`'s MTP case): undefined without a head. */
export async function benchMtp(engine: BenchEngine, promptIds: number[], maxTokens: number, k = MTP_TOKENS): Promise<MtpBench | undefined> {
  if (!engine.mtpHead) return undefined;
  // Warm-up: a verify step's rows and the head's pipelines (SwiftShader compiles on first use).
  await speculativeRun(engine, promptIds, Math.min(maxTokens, 4), { mtp: { k } });
  const { ids: want, ...none } = await speculativeRun(engine, promptIds, maxTokens);
  const { ids, ...mtp } = (await mtpRun(engine, promptIds, maxTokens, k))!;
  return { none, mtp, identical: ids.join() === want.join() };
}

/** Decoding without speculation (after one warm-up run with it), then with each proposer (the MTP head where the engine loaded one). */
export async function benchSpeculative(engine: BenchEngine, promptIds: number[], maxTokens: number, vocab: number, drafter?: Drafter & { readonly steps: number }, mtpTokens = MTP_TOKENS): Promise<SpeculativeBench> {
  // Warm-up: a verify step's rows may take pipelines a one-token step does not.
  await speculativeRun(engine, promptIds, Math.min(maxTokens, 8), { ngram: NGRAM });
  if (engine.mtpHead) await speculativeRun(engine, promptIds, Math.min(maxTokens, 4), { mtp: { k: mtpTokens } });
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
  const withHead = await mtpRun(engine, promptIds, maxTokens, mtpTokens);
  let mtp: MtpSpeculativeRun | undefined;
  let m: number[] = want;
  if (withHead) ({ ids: m, ...mtp } = withHead);
  return { none, copy, edited: edit, ngram, ...(draft ? { draft } : {}), ...(mtp ? { mtp } : {}), identical: [a, b, c, d, m].every((ids) => ids.join() === want.join()) };
}
