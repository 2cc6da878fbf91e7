/**
 * /v1/completions through the real `openai` client on the tiny fixtures: greedy output equals the
 * reference model's, streaming equals the folded reply, stops never leak, seeds reproduce, and the
 * penalties, logit_bias, logprobs, echo, n / best_of and abort all act observably.
 */
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { greedy } from '../reference/forward';
import { appFor, clientFor, loadRig, SpyBackend, type Rig } from '../testing/api-rig';

let rig: Rig;
let client: OpenAI;
const PROMPT = 'The quick brown fox';

beforeAll(async () => {
  rig = await loadRig();
  client = clientFor(appFor([rig.qwen.backend, rig.llama.backend]));
});
afterAll(() => rig?.close());

const greedyReq = (model: string, extra: object = {}) =>
  ({ model, prompt: PROMPT, max_tokens: 12, temperature: 0, ignore_eos: true, ...extra }) as OpenAI.CompletionCreateParamsNonStreaming;

async function streamed(params: object) {
  const stream = await client.completions.create({ ...(params as object), stream: true } as OpenAI.CompletionCreateParamsStreaming);
  const chunks: OpenAI.Completion[] = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

describe('completions', () => {
  for (const which of ['qwen', 'llama'] as const) {
    it(`greedy output of ${which} equals the reference model's greedy() on the same prompt ids`, async () => {
      const { backend, oracle } = rig[which];
      const ids = backend.tokenizer.encode(PROMPT);
      const want = greedy(await oracle(), ids, 12);
      const res = await client.completions.create(greedyReq(backend.id, { prompt: ids }));
      expect(res.choices[0].text).toBe(backend.tokenizer.decode(want, { skipSpecialTokens: true }));
      expect(res.choices[0].finish_reason).toBe('length');
      expect(res.object).toBe('text_completion');
      expect(res.id).toMatch(/^cmpl-/);
      expect(res.created).toBeLessThan(Date.now() / 1000 + 1);
      expect(res.created).toBeGreaterThan(Date.now() / 1000 - 60);
      expect(res.usage).toMatchObject({ prompt_tokens: ids.length, completion_tokens: 12, total_tokens: ids.length + 12 });
    });
  }

  it('streams the same text it returns unstreamed, and ends with a usage chunk when asked', async () => {
    const full = await client.completions.create(greedyReq('qwen3-tiny'));
    const chunks = await streamed({ ...greedyReq('qwen3-tiny'), stream_options: { include_usage: true } });
    const text = chunks.flatMap((c) => c.choices.map((x) => x.text)).join('');
    expect(text).toBe(full.choices[0].text);
    const last = chunks[chunks.length - 1];
    expect(last.choices).toEqual([]);
    expect(last.usage?.completion_tokens).toBe(12);
    expect(chunks[chunks.length - 2].choices[0].finish_reason).toBe('length');
  });

  it('reports the reused prompt prefix as cached tokens', async () => {
    await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 1 }));
    const again = await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 1 }));
    const n = again.usage!.prompt_tokens;
    expect((again.usage as { prompt_tokens_details?: { cached_tokens: number } }).prompt_tokens_details?.cached_tokens).toBe(n - 1);
    const cold = await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 1, cache_prompt: false } as object));
    expect((cold.usage as { prompt_tokens_details?: { cached_tokens: number } }).prompt_tokens_details?.cached_tokens).toBe(0);
  });

  it('stops at a stop string that spans a token boundary and never streams any of it', async () => {
    const tok = rig.qwen.backend.tokenizer;
    const res = await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 24, logprobs: 0 }));
    const pieces = res.choices[0].logprobs!.tokens!;
    const full = res.choices[0].text;
    // A stop made of the end of one token and the start of the next, first occurring there.
    let stop = '';
    let at = -1;
    for (let k = 1; k + 1 < pieces.length && !stop; k++) {
      const a = pieces[k];
      const b = pieces[k + 1];
      if (a.length < 1 || b.length < 1 || a.includes('\uFFFD') || b.includes('\uFFFD')) continue;
      const cand = a.slice(-2) + b.slice(0, 2);
      const offset = res.choices[0].logprobs!.text_offset![k + 1] - a.slice(-2).length;
      if (full.indexOf(cand) === offset) [stop, at] = [cand, offset];
    }
    expect(stop, `no boundary-spanning stop in ${JSON.stringify(pieces)}`).not.toBe('');
    expect(tok.encode(stop, { addSpecialTokens: false }).length).toBeGreaterThan(0);
    const chunks = await streamed(greedyReq('qwen3-tiny', { max_tokens: 24, stop: [stop] }));
    const texts = chunks.flatMap((c) => c.choices.map((x) => x.text));
    expect(texts.join('')).toBe(full.slice(0, at));
    for (const t of texts) expect(t.includes(stop)).toBe(false);
    const end = chunks[chunks.length - 1].choices[0] as OpenAI.CompletionChoice & { matched_stop?: unknown };
    expect(end.finish_reason).toBe('stop');
    expect(end.matched_stop).toBe(stop);
    // no_stop_trim keeps it.
    const kept = await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 24, stop: [stop], no_stop_trim: true } as object));
    expect(kept.choices[0].text).toBe(full.slice(0, at + stop.length));
  });

  it('takes a prediction (Predicted Outputs) or n-gram lookup without changing the text, stop strings included, and counts the prediction tokens', async () => {
    const full = await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 16 }));
    const text = full.choices[0].text;
    expect(full.usage!.completion_tokens_details).toBeUndefined();
    const own = await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 16, prediction: { type: 'content', content: [{ type: 'text', text }] } }));
    expect(own.choices[0].text).toBe(text);
    expect(own.usage!.completion_tokens).toBe(16);
    // (The text tokenized again is not always the tokens drawn: the tiny model's random output.)
    expect(own.usage!.completion_tokens_details!.accepted_prediction_tokens).toBeGreaterThan(0);
    const other = await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 16, prediction: { type: 'content', content: 'zebra 42 quux' } }));
    expect(other.choices[0].text).toBe(text);
    expect(other.usage!.completion_tokens_details!.rejected_prediction_tokens).toBeGreaterThan(0);
    const ngram = await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 16, speculative: { type: 'ngram', n: 2, k: 4 } }));
    expect(ngram.choices[0].text).toBe(text);
    // MTP: a model without a head refuses it; k is 1 to 8 chained guesses.
    await expect(client.completions.create(greedyReq('qwen3-tiny', { speculative: { type: 'mtp', k: 8 } }))).rejects.toMatchObject({ status: 400, param: 'speculative', code: 'invalid_field' });
    await expect(client.completions.create(greedyReq('qwen3-tiny', { speculative: { type: 'mtp', k: 9 } }))).rejects.toMatchObject({ status: 400, param: 'speculative.k' });
    // A stop string inside a run of accepted tokens ends the text where it does without one.
    const stop = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 3);
    const stopped = await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 16, stop: [stop], prediction: { type: 'content', content: text } }));
    expect(stopped.choices[0].text).toBe(text.slice(0, text.indexOf(stop)));
    await expect(client.completions.create(greedyReq('qwen3-tiny', { prediction: { type: 'file', content: 'x' } }))).rejects.toMatchObject({ status: 400, param: 'prediction.type' });
  });

  it('gives the same text for the same seed and another for a different seed', async () => {
    const req = { model: 'qwen3-tiny', prompt: PROMPT, max_tokens: 16, temperature: 1, ignore_eos: true };
    const a = await client.completions.create({ ...req, seed: 1 });
    const b = await client.completions.create({ ...req, seed: 1 });
    const c = await client.completions.create({ ...req, seed: 2 });
    expect(b.choices[0].text).toBe(a.choices[0].text);
    expect(c.choices[0].text).not.toBe(a.choices[0].text);
  });

  it('returns n choices, each indexed, streamed or not', async () => {
    const req = { model: 'qwen3-tiny', prompt: PROMPT, max_tokens: 6, temperature: 1, seed: 7, n: 3, ignore_eos: true };
    const res = await client.completions.create(req);
    expect(res.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(new Set(res.choices.map((c) => c.text)).size).toBeGreaterThan(1);
    expect(res.usage?.completion_tokens).toBe(18);
    const chunks = await streamed(req);
    const byIndex = new Map<number, string>();
    for (const c of chunks) for (const ch of c.choices) byIndex.set(ch.index, (byIndex.get(ch.index) ?? '') + ch.text);
    expect([...byIndex.keys()].sort()).toEqual([0, 1, 2]);
    expect(res.choices.map((c) => c.text)).toEqual([0, 1, 2].map((i) => byIndex.get(i)));
  });

  it('answers a batch of prompts and best_of with the requested number of choices', async () => {
    const batch = await client.completions.create({ ...greedyReq('qwen3-tiny', { max_tokens: 3 }), prompt: ['a b', 'c d'] });
    expect(batch.choices.map((c) => c.index)).toEqual([0, 1]);
    const best = await client.completions.create({ ...greedyReq('qwen3-tiny', { max_tokens: 4, temperature: 1, seed: 3 }), best_of: 3, n: 1 });
    expect(best.choices).toHaveLength(1);
    expect(best.choices[0].logprobs).toBeNull();
    expect(best.usage?.completion_tokens).toBe(12);
  });

  it('returns logprobs in OpenAI completions shape, consistent with greedy choice', async () => {
    const res = await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 5, logprobs: 3 }));
    const lp = res.choices[0].logprobs! as Required<OpenAI.CompletionChoice.Logprobs>;
    expect(lp.tokens).toHaveLength(5);
    // Byte tokens of a split character show as U+FFFD on their own; whole-character text must add up.
    if (!lp.tokens.join('').includes('\uFFFD')) expect(lp.tokens.join('')).toBe(res.choices[0].text);
    expect(lp.text_offset[0]).toBe(0);
    for (let i = 0; i < 5; i++) {
      const top = lp.top_logprobs![i]!;
      expect(Object.keys(top).length).toBeGreaterThanOrEqual(1);
      expect(Object.keys(top).length).toBeLessThanOrEqual(4);
      expect(lp.token_logprobs![i]).toBeLessThanOrEqual(0);
      // Greedy: the chosen token is the most likely one.
      expect(lp.token_logprobs![i]).toBeCloseTo(Math.max(...Object.values(top)), 5);
      if (i > 0) expect(lp.text_offset[i]).toBeGreaterThanOrEqual(lp.text_offset[i - 1]);
    }
  });

  it('echoes the prompt, with teacher-forced prompt logprobs', async () => {
    const res = await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 3, echo: true, logprobs: 1 }));
    const plain = await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 3 }));
    expect(res.choices[0].text).toBe(PROMPT + plain.choices[0].text);
    const lp = res.choices[0].logprobs! as Required<OpenAI.CompletionChoice.Logprobs>;
    const promptLen = res.usage!.prompt_tokens;
    expect(lp.tokens).toHaveLength(promptLen + 3);
    expect(lp.token_logprobs![0]).toBeNull();
    expect(lp.token_logprobs!.slice(1).every((x) => typeof x === 'number' && x <= 0)).toBe(true);
    expect(lp.text_offset[promptLen]).toBe(PROMPT.length);
  });

  it('applies logit_bias: -100 bans the greedy token, +100 forces one', async () => {
    const tok = rig.qwen.backend.tokenizer;
    const ids = tok.encode(PROMPT);
    const [first] = greedy(await rig.qwen.oracle(), ids, 1);
    const base = await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 1, logprobs: 0 }));
    const banned = await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 1, logprobs: 0, logit_bias: { [first]: -100 } }));
    // Logprobs are of the raw logits: the token chosen instead of the banned greedy one is less likely.
    expect(banned.choices[0].logprobs!.token_logprobs![0]).toBeLessThan(base.choices[0].logprobs!.token_logprobs![0]!);
    const forced = tok.encode(' fox', { addSpecialTokens: false });
    const id = forced[forced.length - 1];
    const res = await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 4, temperature: 1, seed: 5, logit_bias: { [id]: 100 } }));
    expect(res.choices[0].text).toBe(tok.decode([id, id, id, id]));
  });

  it('applies presence, frequency, repetition and DRY penalties and mirostat to repeated output', async () => {
    const base = await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 24, logprobs: 0 }));
    const toks = base.choices[0].logprobs!.tokens!;
    expect(new Set(toks).size, 'the greedy output should repeat tokens for this test to mean anything').toBeLessThan(toks.length);
    for (const extra of [
      { presence_penalty: 2 },
      { frequency_penalty: 2 },
      { repetition_penalty: 3 },
      { dry_multiplier: 5, dry_allowed_length: 1 },
    ]) {
      const res = await client.completions.create(greedyReq('qwen3-tiny', { max_tokens: 24, ...extra } as object));
      expect(res.choices[0].text, JSON.stringify(extra)).not.toBe(base.choices[0].text);
    }
    const m = { ...greedyReq('qwen3-tiny', { max_tokens: 10, temperature: 1, seed: 9, mirostat: 2, mirostat_tau: 3 }) } as object;
    const m1 = await client.completions.create(m as OpenAI.CompletionCreateParamsNonStreaming);
    const m2 = await client.completions.create(m as OpenAI.CompletionCreateParamsNonStreaming);
    expect(m2.choices[0].text).toBe(m1.choices[0].text);
  });

  it('fills in the middle with the FIM tokens of a model that has them', async () => {
    const res = await client.completions.create(greedyReq('qwen3-tiny', { prompt: 'def f(', suffix: '):', max_tokens: 3 }));
    expect(res.choices[0].finish_reason).toBe('length');
    const tok = rig.qwen.backend.tokenizer;
    expect(res.usage!.prompt_tokens).toBe(3 + tok.encode('def f(', { addSpecialTokens: false }).length + tok.encode('):', { addSpecialTokens: false }).length);
  });

  it('stops generating when the caller aborts mid-stream, and the next request runs', async () => {
    const spy = new SpyBackend(rig.qwen.backend);
    const c = clientFor(appFor([spy]));
    const ctl = new AbortController();
    const stream = await c.completions.create({ model: 'qwen3-tiny', prompt: PROMPT, max_tokens: 1000, temperature: 0, stream: true, ...{ ignore_eos: true } }, { signal: ctl.signal });
    let seen = 0;
    const finishes: (string | null)[] = [];
    try {
      for await (const ch of stream) {
        finishes.push(ch.choices[0]?.finish_reason ?? null);
        if (++seen === 3) ctl.abort();
      }
      // The stream may end on its own with a last chunk saying why.
      expect(finishes[finishes.length - 1]).toBe('abort');
    } catch (e) {
      expect((e as Error).name).toMatch(/Abort/);
    }
    await new Promise((ok) => setTimeout(ok, 50));
    expect(spy.tokens).toBeLessThan(20);
    expect(spy.finished).not.toBeNull();
    const next = await c.completions.create(greedyReq('qwen3-tiny', { max_tokens: 2 }));
    expect(next.choices[0].finish_reason).toBe('length');
  });

  it('replies with finish_reason abort when an unstreamed request is aborted', async () => {
    const app = appFor([rig.qwen.backend]);
    const ctl = new AbortController();
    const pending = app.handle(
      new Request('http://localhost/v1/completions', {
        method: 'POST',
        body: JSON.stringify({ model: 'default', prompt: PROMPT, max_tokens: 1500, ignore_eos: true, temperature: 0 }),
        signal: ctl.signal,
      }),
    );
    setTimeout(() => ctl.abort(), 30);
    const res = await pending;
    const body = await res.json();
    expect(res.status).toBe(200);
    expect(body.choices[0].finish_reason).toBe('abort');
    expect(body.usage.completion_tokens).toBeLessThan(1500);
  });

  it('ends a stream with an error event when the backend fails mid-generation', async () => {
    const c = clientFor(appFor([new SpyBackend(rig.qwen.backend, 2)]));
    const stream = await c.completions.create({ model: 'qwen3-tiny', prompt: PROMPT, max_tokens: 10, temperature: 0, stream: true });
    const got: string[] = [];
    await expect(
      (async () => {
        for await (const ch of stream) got.push(ch.choices[0]?.text ?? '');
      })(),
    ).rejects.toThrow(/simulated device failure/);
  });

  it('return_hidden_states: each choice carries the final hidden state its last token was drawn from, streamed or not', async () => {
    const { backend, oracle } = rig.llama;
    const ids = backend.tokenizer.encode(PROMPT);
    const params = { ...greedyReq(backend.id, { prompt: ids, max_tokens: 5, n: 2 }), return_hidden_states: true } as never;
    const res = (await client.completions.create(params)) as unknown as { choices: Array<{ hidden_states?: number[] }> };
    const model = await oracle();
    const out = greedy(model, ids, 5);
    // The hidden state after feeding the prompt and the first four outputs: where the fifth was drawn.
    model.reset();
    [...ids, ...out.slice(0, 4)].forEach((id, pos) => model.forward(id, pos));
    const want = Array.from(model.hidden);
    expect(res.choices).toHaveLength(2);
    for (const c of res.choices) {
      expect(c.hidden_states).toHaveLength(backend.config.hiddenSize);
      c.hidden_states!.forEach((v, k) => expect(v).toBeCloseTo(want[k]!, 5));
    }
    const chunks = await streamed(params);
    const ends = chunks.flatMap((c) => c.choices).filter((c) => c.finish_reason) as Array<{ hidden_states?: number[] }>;
    expect(ends.map((c) => c.hidden_states)).toEqual(res.choices.map((c) => c.hidden_states));
    const plain = await client.completions.create(greedyReq(backend.id, { prompt: ids, max_tokens: 2 }));
    expect(plain.choices[0]).not.toHaveProperty('hidden_states');
  });
});
