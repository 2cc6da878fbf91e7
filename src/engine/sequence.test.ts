/**
 * The shared request lifecycle on its own: a runner that only hands out logits (as a backend's
 * step does) drives `runSequence`, and the sequence decides what is fed, what is banned, and
 * how and when it ends.
 */
import { describe, expect, it } from 'vitest';
import { drainGeneration, GREEDY } from '../testing/sampling';
import { GrammarDeadEndError, GrammarRefusedError } from './errors';
import { BreakerTable, runSequence, Sequence, type SeqStep, type SequenceEnv, type StepRunner } from './sequence';
import type { GenerateRequest } from './types';

const VOCAB = 8;
const EOS = 7;
const env: SequenceEnv = { eosIds: [EOS], contextLength: 64, breakers: () => () => false };

/** Logits whose greedy pick is `id`, with `runnerUp` second. */
function peak(id: number, runnerUp = (id + 1) % VOCAB): Float32Array {
  const l = new Float32Array(VOCAB);
  l[id] = 10;
  l[runnerUp] = 5;
  return l;
}

/** A backend step that records what it was fed and answers the sampling steps with scripted logits. */
function scripted(picks: number[], chunk = 4): StepRunner & { fed: SeqStep[] } {
  const fed: SeqStep[] = [];
  let i = 0;
  return {
    fed,
    async step(batch) {
      for (const seq of batch) {
        const work = seq.work(chunk);
        fed.push(work);
        seq.advance(work);
        if (work.samples) seq.sampleLogits(peak(picks[i++ % picks.length]!));
      }
    },
  };
}

const request = (extra: Partial<GenerateRequest> = {}): GenerateRequest => ({
  promptIds: [1, 2, 3, 4, 5, 6],
  maxTokens: 4,
  sampling: GREEDY,
  stopTokenIds: [],
  ignoreEos: false,
  minTokens: 0,
  ...extra,
});

const drain = (seq: Sequence, runner: StepRunner, onToken?: (n: number) => void) => drainGeneration(runSequence(seq, runner), onToken);

describe('Sequence and runSequence', () => {
  it('feeds the prompt in chunks after the reused prefix (only the last chunk samples), then each new token', async () => {
    const seq = new Sequence(request({ promptIds: [1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5], maxTokens: 3 }), env);
    seq.reuse(2);
    const runner = scripted([3, 4, 5]);
    const { ids, result } = await drain(seq, runner);
    expect(runner.fed).toEqual([
      { tokens: [3, 4, 5, 6], samples: false },
      { tokens: [1, 2, 3, 4], samples: false },
      { tokens: [5], samples: true },
      { tokens: [3], samples: true },
      { tokens: [4], samples: true },
    ]);
    expect(ids).toEqual([3, 4, 5]);
    expect(result).toEqual({ finishReason: 'length', promptTokens: 11, completionTokens: 3, cachedTokens: 2 });
  });

  it('ends on EOS or a stop id (the id is produced), and bans them until min_tokens', async () => {
    const stopped = await drain(new Sequence(request({ stopTokenIds: [2] }), env), scripted([0, 2, 0]));
    expect(stopped.ids).toEqual([0, 2]);
    expect(stopped.result).toMatchObject({ finishReason: 'stop', stopTokenId: 2, completionTokens: 2 });
    // EOS is the top pick every step: banned for the first 2 tokens (the runner-up wins), then it ends the sequence.
    const banned = await drain(new Sequence(request({ minTokens: 2 }), env), scripted([EOS]));
    expect(banned.ids).toEqual([0, 0, EOS]);
    expect(banned.result).toMatchObject({ finishReason: 'stop', stopTokenId: EOS });
    const ignored = await drain(new Sequence(request({ ignoreEos: true }), env), scripted([EOS]));
    expect(ignored.result).toMatchObject({ finishReason: 'length', completionTokens: 4 });
  });

  it('clamps max_tokens to the context left after the prompt, and runs nothing for max_tokens 0', async () => {
    const seq = new Sequence(request({ maxTokens: 100 }), { ...env, contextLength: 9 });
    expect(seq.maxTokens).toBe(3);
    const runner = scripted([1]);
    expect((await drain(new Sequence(request({ maxTokens: 0 }), env), runner)).result).toMatchObject({ finishReason: 'length', completionTokens: 0 });
    expect(runner.fed).toEqual([]);
  });

  it('stops at the next step boundary when aborted, and does no work when aborted before it starts', async () => {
    const ctl = new AbortController();
    const r = await drain(new Sequence(request({ maxTokens: 50, signal: ctl.signal }), env), scripted([1]), (n) => n === 2 && ctl.abort());
    expect(r.ids).toHaveLength(2);
    expect(r.result).toMatchObject({ finishReason: 'abort', completionTokens: 2 });

    const runner = scripted([1], 2);
    const late = new AbortController();
    const during = drain(new Sequence(request({ signal: late.signal }), env), { step: (b) => (late.abort(), runner.step(b)) });
    expect((await during).result).toMatchObject({ finishReason: 'abort', completionTokens: 0 });
    expect(runner.fed).toEqual([{ tokens: [1, 2], samples: false }]); // one prefill chunk of three

    const before = new AbortController();
    before.abort();
    const idle = scripted([1]);
    expect((await drain(new Sequence(request({ signal: before.signal }), env), idle)).result.finishReason).toBe('abort');
    expect(idle.fed).toEqual([]);
  });

  it('a grammar accepts each token, ends the sequence when it terminates, and lifts the min_tokens ban', async () => {
    let accepted = 0;
    const constraint = {
      words: 1,
      mask: async () => undefined,
      accept: (id: number) => id !== 6 && ++accepted > 0,
      isTerminated: () => accepted === 2,
      dispose: () => undefined,
    };
    const seq = new Sequence(request({ constraint }), env);
    const r = await drain(seq, scripted([3, 4, 5]));
    expect(r.ids).toEqual([3, 4]);
    expect(r.result).toMatchObject({ finishReason: 'stop', completionTokens: 2 });
    expect(r.result.stopTokenId).toBeUndefined();
    // The grammar decides where the output may end: EOS is not banned before min_tokens.
    const early = new Sequence(request({ constraint, minTokens: 3 }), env);
    expect(early.banned()).toEqual([]);
    expect(early.maskBits).toHaveLength(1);
    expect((await drain(early, scripted([EOS]))).ids).toEqual([EOS]);
  });

  it('tells a token the mask allowed and the grammar refused from a mask that allowed nothing (a dead end), each naming the grammar field', async () => {
    const constraint = { words: 1, param: 'ebnf', mask: async () => undefined, accept: (id: number) => id !== 6, isTerminated: () => false, dispose: () => undefined };
    // Backends write the step's mask into maskBits before the draw.
    const refused = new Sequence(request({ constraint }), env);
    refused.maskBits!.fill(1 << 6);
    const e = await drain(refused, scripted([6])).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(GrammarRefusedError);
    expect(e).toMatchObject({ status: 400, param: 'ebnf', code: 'grammar_refused' });
    const dead = await drain(new Sequence(request({ constraint }), env), scripted([3, 6])).catch((x: unknown) => x);
    expect(dead).toBeInstanceOf(GrammarDeadEndError);
    expect(dead).toMatchObject({ status: 400, param: 'ebnf', code: 'grammar_dead_end' });
    expect((dead as Error).message).toMatch(/^ebnf: after 1 tokens of output the grammar allows no next token/);
  });

  it('jump-forward takes the tokens a one-token mask forces without a draw, feeds them with the next step, and changes no token', async () => {
    // A grammar as a script of masks by tokens accepted: free, then two forced tokens, free, then EOS.
    const masks = [[3, 6], [4], [5], [1, 2], [EOS]];
    const grammar = () => {
      let at = 0;
      return {
        words: 1,
        mask: async (out: Uint32Array) => void (out[0] = masks[Math.min(at, masks.length - 1)]!.reduce((w, id) => w | (1 << id), 0)),
        forcesText: () => at === 1 || at === 2,
        accept: (id: number) => masks[at]!.includes(id) && ++at > 0,
        isTerminated: () => at === masks.length,
        dispose: () => undefined,
      };
    };
    // A backend that masks fixed logits (the model's preference: 6 > 3, 2 > 1) and draws greedily.
    const masked = (): StepRunner & { fed: SeqStep[]; draws: number } => {
      const fed: SeqStep[] = [];
      const runner = {
        fed,
        draws: 0,
        async step(batch: readonly Sequence[]) {
          for (const seq of batch) {
            const work = seq.work(16);
            fed.push(work);
            seq.advance(work);
            if (!work.samples) continue;
            const bits = await seq.nextMask();
            const logits = Float32Array.from([0, 1, 2, 5, 1, 1, 6, 1], (x, id) => ((bits[0]! >>> id) & 1 ? x : -Infinity));
            runner.draws++;
            seq.sampleLogits(logits);
            await seq.jumpForward();
          }
        },
      };
      return runner;
    };
    const run = async (jumpForward: boolean) => {
      const runner = masked();
      const seq = new Sequence(request({ maxTokens: 10, constraint: grammar(), jumpForward }), env);
      return { ...(await drain(seq, runner)), runner, seq };
    };
    const off = await run(false);
    const on = await run(true);
    expect(off.ids).toEqual([6, 4, 5, 2, EOS]);
    expect(on.ids).toEqual(off.ids);
    expect(on.result).toEqual(off.result);
    expect(off.runner.draws).toBe(5);
    expect(on.runner.draws).toBe(3);
    // The draw and the two tokens it forced are fed as one chunk, which samples once.
    expect(on.runner.fed.map((w) => w.tokens)).toEqual([[1, 2, 3, 4, 5, 6], [6, 4, 5], [2]]);
    expect(on.seq.jumpsForward).toBe(true);
    // Where a forced token would skip state a draw keeps, jump-forward is off.
    for (const sampling of [{ logprobs: true }, { repetitionPenalty: 1.1 }, { presencePenalty: 0.5 }, { mirostat: { mode: 2 as const, tau: 5, eta: 0.1 } }, { dry: { ...GREEDY.dry, multiplier: 0.8 } }]) {
      expect(new Sequence(request({ constraint: grammar(), sampling: { ...GREEDY, ...sampling } }), env).jumpsForward, JSON.stringify(sampling)).toBe(false);
    }
    expect(new Sequence(request({ constraint: grammar(), returnHiddenStates: true }), env).jumpsForward).toBe(false);
    expect(new Sequence(request({}), env).jumpsForward).toBe(false);
  });

  it('finds the ids whose text contains a breaker, once per breaker list', () => {
    const pieces = ['a', '\n', 'b:c', 'd', '"x', ''];
    let decodes = 0;
    const table = new BreakerTable({ vocabSize: pieces.length, decode: (ids) => (decodes++, pieces[ids[0]!]!) });
    const isBreaker = table.of(['\n', ':', '"', '*']);
    expect(pieces.map((_, id) => isBreaker(id))).toEqual([false, true, true, false, true, false]);
    table.of(['\n', ':', '"', '*']);
    expect(decodes).toBe(pieces.length);
    expect(table.of([])(1)).toBe(false);
  });

  it('asks for the breaker table only when DRY is on', () => {
    const asked: string[][] = [];
    const counting: SequenceEnv = { ...env, breakers: (list) => (asked.push([...list]), () => false) };
    new Sequence(request({ sampling: { ...GREEDY, dry: { ...GREEDY.dry, sequenceBreakers: ['\n'] } } }), counting);
    expect(asked).toEqual([]);
    new Sequence(request({ sampling: { ...GREEDY, dry: { ...GREEDY.dry, multiplier: 0.8, sequenceBreakers: ['\n'] } } }), counting);
    expect(asked).toEqual([['\n']]);
  });
});
