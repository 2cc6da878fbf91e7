import { beforeAll, describe, expect, it } from 'vitest';
import type { GeneratedToken, GenerateRequest, SamplingParams } from '../engine/types';
import { openModel } from '../model/open';
import { ensureFixture } from '../testing/fixtures/shared';
import { drainGeneration } from '../testing/sampling';
import { ReferenceBackend } from './backend';
import { greedy, logitsFor, ReferenceModel } from './forward';

const sampling: SamplingParams = {
  temperature: 0, topP: 1, topK: 0, minP: 0, frequencyPenalty: 0, presencePenalty: 0, repetitionPenalty: 1, logitBias: {},
  dry: { multiplier: 0, base: 1.75, allowedLength: 2, sequenceBreakers: [] }, mirostat: { mode: 0, tau: 5, eta: 0.1 }, topLogprobs: 0, logprobs: false,
};

let backend: ReferenceBackend;
let oracle: ReferenceModel;

beforeAll(async () => {
  const paths = await ensureFixture({ arch: 'qwen3', preset: 'tiny' }, { hf: ['F32'], gguf: [] });
  const opened = await openModel(paths.hf.F32!);
  backend = await ReferenceBackend.create(opened);
  oracle = await ReferenceModel.load(opened);
});

async function collect(req: Partial<GenerateRequest> & { promptIds: number[] }, onToken?: (n: number) => void) {
  return drainGeneration(backend.generate({ maxTokens: 8, sampling, stopTokenIds: [], ignoreEos: true, minTokens: 0, ...req }), onToken);
}

describe('ReferenceBackend', () => {
  it('generates greedy() tokens and reuses the KV of a shared prompt prefix', async () => {
    const prompt = backend.tokenizer.encode('one two three four');
    const first = await collect({ promptIds: prompt });
    expect(first.ids).toEqual(greedy(oracle, prompt, 8));
    expect(first.result).toMatchObject({ finishReason: 'length', completionTokens: 8, promptTokens: prompt.length });
    const longer = [...prompt, ...backend.tokenizer.encode(' five', { addSpecialTokens: false })];
    const second = await collect({ promptIds: longer });
    expect(second.result.cachedTokens).toBe(prompt.length);
    expect(second.ids).toEqual(greedy(oracle, longer, 8));
  });

  it('stops on a stop id, suppressed until min_tokens', async () => {
    const prompt = backend.tokenizer.encode('one two');
    const free = (await collect({ promptIds: prompt })).ids;
    const stopAt = await collect({ promptIds: prompt, stopTokenIds: [free[0]] });
    expect(stopAt.result).toMatchObject({ finishReason: 'stop', stopTokenId: free[0], completionTokens: 1 });
    const later = await collect({ promptIds: prompt, stopTokenIds: [free[0]], minTokens: 3 });
    expect(later.ids.slice(0, 3)).not.toContain(free[0]);
  });

  it('stops at the next step when aborted', async () => {
    const ctl = new AbortController();
    const r = await collect({ promptIds: backend.tokenizer.encode('x'), maxTokens: 500, signal: ctl.signal }, (n) => n === 2 && ctl.abort());
    expect(r.result.finishReason).toBe('abort');
    expect(r.ids).toHaveLength(2);
  });

  it('ends a request aborted while it waits for its turn at once, and the one ahead is undisturbed', async () => {
    const prompt = backend.tokenizer.encode('one two');
    const ahead = backend.generate({ promptIds: prompt, maxTokens: 6, sampling, stopTokenIds: [], ignoreEos: true, minTokens: 0 });
    const first = await ahead.next();
    const ctl = new AbortController();
    const queued = backend.generate({ promptIds: prompt, maxTokens: 6, sampling, stopTokenIds: [], ignoreEos: true, minTokens: 0, signal: ctl.signal });
    const waiting = queued.next();
    ctl.abort();
    expect(await waiting).toMatchObject({ done: true, value: { finishReason: 'abort', completionTokens: 0 } });
    const ids = [(first.value as GeneratedToken).id];
    for (let r = await ahead.next(); !r.done; r = await ahead.next()) ids.push(r.value.id);
    expect(ids).toEqual(greedy(oracle, prompt, 6));
  });

  it('scores a prompt with teacher forcing', async () => {
    const ids = backend.tokenizer.encode('one two three');
    const scores = await backend.scorePrompt(ids, 2);
    const logits = logitsFor(oracle, ids);
    expect(scores[0].logprob).toBeNull();
    for (let i = 1; i < ids.length; i++) {
      const l = logits[i - 1];
      const max = Math.max(...l);
      const lse = max + Math.log(l.reduce((s, x) => s + Math.exp(x - max), 0));
      expect(scores[i].logprob!).toBeCloseTo(l[ids[i]] - lse, 5);
      expect(scores[i].top).toHaveLength(2);
    }
  });
});

describe('ReferenceBackend on a hybrid model (LFM2: conv state, no rewind)', () => {
  it('computes a prompt that extends the last one whole (cached_tokens 0); a prediction verifies one position at a time', async () => {
    const paths = await ensureFixture({ arch: 'lfm2', preset: 'tiny' }, { hf: ['F32'], gguf: [] });
    const opened = await openModel(paths.hf.F32!);
    const hybrid = await ReferenceBackend.create(opened);
    const ref = await ReferenceModel.load(opened);
    const run = (promptIds: number[], extra: Partial<GenerateRequest> = {}) =>
      drainGeneration(hybrid.generate({ promptIds, maxTokens: 6, sampling, stopTokenIds: [], ignoreEos: true, minTokens: 0, ...extra }));
    const prompt = hybrid.tokenizer.encode('one two three four');
    expect((await run(prompt)).ids).toEqual(greedy(ref, prompt, 6));
    const longer = [...prompt, ...hybrid.tokenizer.encode(' five', { addSpecialTokens: false })];
    const second = await run(longer);
    expect(second.result.cachedTokens).toBe(0);
    expect(second.ids).toEqual(greedy(ref, longer, 6));
    // A prediction wrong after two tokens: the CPU verifies one position at a time, feeding only what it accepts.
    const want = greedy(ref, prompt, 6);
    const prediction = [...want.slice(0, 2), (want[2]! + 1) % opened.config.vocabSize, ...want.slice(3)];
    expect((await run(prompt, { speculation: { prediction } })).ids).toEqual(want);
  });
});
