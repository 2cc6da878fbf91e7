/**
 * The request lifecycle (src/engine/sequence.ts) is one piece of code that both backends run: the
 * GPU engine and the CPU reference give the same token streams wherever the engine samples on
 * the CPU (DRY with its sequence breakers, mirostat, penalties with logprobs), and an abort
 * stops a prefill between its chunks, leaving the engine ready for the next request.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { DRY_DEFAULTS } from '../api/sampling';
import { ReferenceBackend } from '../reference/backend';
import { useFixtureURLs } from '../testing/fixture-server';
import { testGPU } from '../testing/gpu';
import { greedyRequest } from '../testing/sampling';
import { GpuEngine } from './engine';
import type { Backend, GenerateRequest, GeneratedToken, GenerationResult, SamplingParams } from './types';

async function run(backend: Backend, request: GenerateRequest): Promise<{ ids: number[]; tokens: GeneratedToken[]; result: GenerationResult }> {
  const it = backend.generate(request);
  const tokens: GeneratedToken[] = [];
  let r = await it.next();
  while (!r.done) {
    tokens.push(r.value);
    r = await it.next();
  }
  return { ids: tokens.map((t) => t.id), tokens, result: r.value };
}

/** A macrotask turn, as a network event (a client's disconnect) arrives. */
const nextTurn = () => new Promise<void>((ok) => setImmediate(ok));

describe('one request lifecycle for the GPU engine and the reference backend', () => {
  const urls = useFixtureURLs('llama');
  let engine: GpuEngine;
  let reference: ReferenceBackend;
  let prompt: number[];
  const request = (sampling: Partial<SamplingParams>, extra: Partial<GenerateRequest> = {}): GenerateRequest => greedyRequest(prompt, 8, sampling, extra);

  beforeAll(async () => {
    const opened = await openModel(urls()['F32']!);
    // Small prefill chunks, so a 40-token prompt is five steps.
    engine = await GpuEngine.load(opened, { gpu: await testGPU(), precision: 'f32', prefillChunk: 8, contextLength: 256 });
    reference = await ReferenceBackend.create(opened);
    prompt = Array.from({ length: 14 }, (_, i) => (i * 37 + 11) % 64);
  });
  afterAll(async () => {
    await engine?.dispose();
    await reference?.dispose();
  });

  it('DRY respects the default sequence breakers on the GPU engine as on the reference', async () => {
    // A token that is a default breaker, pushed up by logit_bias so greedy repeats it: DRY may
    // not penalise a repeat that runs across a breaker, so the repeats stay.
    const tok = reference.tokenizer;
    const breaker = Array.from({ length: tok.vocabSize }, (_, id) => id).find((id) => {
      const text = tok.decode([id]);
      return !tok.eosIds.includes(id) && DRY_DEFAULTS.sequenceBreakers.some((b) => text.includes(b));
    })!;
    expect(breaker, 'the fixture vocabulary has a token containing a default breaker').toBeDefined();
    const dry = (sequenceBreakers: string[]) => ({ logitBias: { [breaker]: 20 }, dry: { multiplier: 50, base: DRY_DEFAULTS.base, allowedLength: DRY_DEFAULTS.allowedLength, sequenceBreakers } });
    // A prompt without repeats and without that token: only the output can repeat.
    const promptIds = Array.from({ length: 12 }, (_, i) => 100 + i).filter((id) => id !== breaker);
    const r = request(dry(DRY_DEFAULTS.sequenceBreakers), { promptIds, maxTokens: 5 });
    const want = (await run(reference, r)).ids;
    expect(want).toEqual([breaker, breaker, breaker, breaker, breaker]);
    // Without breakers the same request is penalised: the test tells the two apart.
    expect((await run(reference, request(dry([]), { promptIds, maxTokens: 5 }))).ids).not.toEqual(want);
    expect((await run(engine, r)).ids).toEqual(want);
  });

  // Each of these reads the logits back and samples on the CPU in the engine; seeded, so the two
  // backends must draw the same tokens.
  const CPU_PATH: Array<[string, Partial<SamplingParams>, Partial<GenerateRequest>?]> = [
    ['DRY at temperature 0.8 with top-k', { temperature: 0.8, topK: 20, seed: 7, dry: { multiplier: 0.8, base: 1.75, allowedLength: 2, sequenceBreakers: ['\n'] } }],
    ['DRY with top-p, min-p and a repetition penalty', { temperature: 1, topP: 0.9, minP: 0.05, seed: 11, repetitionPenalty: 1.2, dry: { multiplier: 1, base: 2, allowedLength: 1, sequenceBreakers: [] } }],
    ['mirostat v1', { temperature: 1, seed: 3, mirostat: { mode: 1, tau: 4, eta: 0.2 } }],
    ['mirostat v2 with logprobs', { temperature: 0.9, seed: 5, mirostat: { mode: 2, tau: 3, eta: 0.1 }, logprobs: true, topLogprobs: 2 }],
    ['penalties with logprobs', { temperature: 0.7, seed: 9, frequencyPenalty: 0.5, presencePenalty: 0.3, logitBias: { 5: 2 }, logprobs: true, topLogprobs: 1 }],
    ['DRY with min_tokens and EOS', { temperature: 1, seed: 13, dry: { multiplier: 0.5, base: 1.75, allowedLength: 2, sequenceBreakers: [':'] } }, { minTokens: 3, ignoreEos: false, maxTokens: 10 }],
  ];

  it.each(CPU_PATH)('%s: the same tokens and finish as the reference', async (_name, sampling, extra) => {
    const r = request(sampling, extra);
    const before = engine.cpuSampledSteps;
    const got = await run(engine, r);
    expect(engine.cpuSampledSteps, 'the engine sampled on the CPU').toBeGreaterThan(before);
    const want = await run(reference, r);
    expect(got.ids).toEqual(want.ids);
    expect(got.result.finishReason).toBe(want.result.finishReason);
    expect(got.result.completionTokens).toBe(want.result.completionTokens);
    if (sampling.logprobs) got.tokens.forEach((t, i) => expect(Math.abs(t.logprob! - want.tokens[i]!.logprob!)).toBeLessThan(1e-3));
  });

  it('an abort during a long prefill stops it between chunks, and the next request runs normally', async () => {
    const long = Array.from({ length: 40 }, (_, i) => (i * 13 + 3) % 64); // 5 chunks of 8
    const ctl = new AbortController();
    const chunksBefore = engine.prefillChunks;
    const gen = engine.generate(request({}, { promptIds: long, maxTokens: 4, signal: ctl.signal }));
    const first = gen.next();
    // The client goes away (a macrotask, as a closed connection is) once the first chunk ran.
    while (engine.prefillChunks === chunksBefore) await nextTurn();
    ctl.abort();
    const r = await first;
    expect(r.done).toBe(true);
    expect(r.value).toMatchObject({ finishReason: 'abort', completionTokens: 0 });
    // Four chunks only fill the KV; the fifth samples. The abort left before all of them ran.
    expect(engine.prefillChunks - chunksBefore).toBeLessThan(4);

    const want = await run(reference, request({}, { promptIds: long, maxTokens: 6 }));
    const again = await run(engine, request({}, { promptIds: long, maxTokens: 6 }));
    expect(again.ids).toEqual(want.ids);
    expect(again.result.finishReason).toBe('length');
  });
});
