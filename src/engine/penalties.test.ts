/**
 * logit_bias, the min_tokens ban and the repetition/frequency/presence penalties run on the GPU
 * (src/kernels/penalties.ts) inside the engine's step: the same tokens as the CPU reference
 * backend, and no step reads the logits back (`cpuSampledSteps` stays put).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { penaltiesRef } from '../kernels/penalties';
import { ReferenceBackend } from '../reference/backend';
import { ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { greedyRequest } from '../testing/sampling';
import { GpuEngine } from './engine';
import type { Backend, GenerateRequest, GeneratedToken, GenerationResult, SamplingParams } from './types';

/** GPU and reference logits on the F32 file differ by summation order only (as engine.test.ts). */
const LOGIT_TOLERANCE = 1e-3;

async function run(backend: Backend, request: GenerateRequest): Promise<{ tokens: GeneratedToken[]; result: GenerationResult }> {
  const it = backend.generate(request);
  const tokens: GeneratedToken[] = [];
  let r = await it.next();
  while (!r.done) {
    tokens.push(r.value);
    r = await it.next();
  }
  return { tokens, result: r.value };
}

/** The two largest values' ids, highest first, and the gap from the second to the third. */
function top3(x: Float32Array): { ids: [number, number]; margins: [number, number] } {
  const order = Array.from(x.keys()).sort((a, b) => x[b]! - x[a]!);
  return { ids: [order[0]!, order[1]!], margins: [x[order[0]!]! - x[order[1]!]!, x[order[1]!]! - x[order[2]!]!] };
}

describe('penalties on the GPU engine', () => {
  let engine: GpuEngine;
  let reference: ReferenceBackend;
  let prompt: number[];
  const request = (sampling: Partial<SamplingParams>, extra: Partial<GenerateRequest> = {}): GenerateRequest => greedyRequest(prompt, 16, sampling, extra);

  beforeAll(async () => {
    const gpu = await testGPU();
    const paths = await ensureFixture({ arch: 'llama', preset: 'tiny' });
    const opened = await openModel(paths.gguf.F32!);
    engine = await GpuEngine.load(opened, { gpu, precision: 'f32' });
    reference = await ReferenceBackend.create(opened);
    // A prompt with repeats, so the repetition penalty has prompt tokens to act on.
    prompt = Array.from({ length: 14 }, (_, i) => (i * 37 + 11) % 64);
  });
  afterAll(async () => {
    await engine?.dispose();
    await reference?.dispose();
  });

  it('logit_bias −100 on the greedy token gives the runner-up, sampled on the GPU', async () => {
    const logits = (await engine.teacherForcedLogits(prompt, undefined, prompt.length)).at(-1)!;
    const { ids, margins } = top3(logits);
    expect(margins[1], 'runner-up must be clear of the third').toBeGreaterThan(LOGIT_TOLERANCE);
    const before = engine.cpuSampledSteps;
    const plain = await run(engine, request({}, { maxTokens: 1 }));
    const biased = await run(engine, request({ logitBias: { [ids[0]]: -100 } }, { maxTokens: 1 }));
    expect(plain.tokens[0]!.id).toBe(ids[0]);
    expect(biased.tokens[0]!.id).toBe(ids[1]);
    expect(engine.cpuSampledSteps).toBe(before);
  });

  it('repetition 1.3 + frequency 0.5 + presence 0.5 at temperature 0 gives the reference backend’s tokens', async () => {
    const sampling = { repetitionPenalty: 1.3, frequencyPenalty: 0.5, presencePenalty: 0.5 };
    const want = (await run(reference, request(sampling))).tokens.map((t) => t.id);
    const unpenalised = (await run(reference, request({}))).tokens.map((t) => t.id);
    expect(want, 'the penalties must change this generation').not.toEqual(unpenalised);

    const before = engine.cpuSampledSteps;
    const got = (await run(engine, request(sampling))).tokens.map((t) => t.id);
    expect(engine.cpuSampledSteps).toBe(before);

    // Tokens must agree up to the first step where the penalised top two are within the logit
    // tolerance (random weights make near-ties); the margins come from the GPU's own logits.
    const raw = await engine.teacherForcedLogits([...prompt, ...want]);
    let compared = 0;
    for (let s = 0; s < want.length; s++) {
      const penalised = penaltiesRef(raw[prompt.length - 1 + s]!, { logitBias: {}, ...sampling }, [], prompt, want.slice(0, s));
      if (top3(penalised).margins[0] < LOGIT_TOLERANCE) break;
      expect(got[s], `step ${s}`).toBe(want[s]);
      compared++;
    }
    // ...and past the first step the penalties changed, or the comparison proves nothing.
    const firstChanged = want.findIndex((id, i) => id !== unpenalised[i]);
    expect(compared).toBeGreaterThan(firstChanged);
  });

  it('min_tokens keeps EOS and stop ids out of the first N tokens, then lets them through', async () => {
    const eos = engine.tokenizer.eosIds[0]!;
    const stop = (eos + 1) % engine.config.vocabSize;
    // Forced ids: without the ban the very first token would be EOS.
    const r = request({ logitBias: { [eos]: 100, [stop]: 90 } }, { ignoreEos: false, stopTokenIds: [stop], minTokens: 4 });
    const before = engine.cpuSampledSteps;
    const { tokens, result } = await run(engine, r);
    expect(engine.cpuSampledSteps).toBe(before);
    const ids = tokens.map((t) => t.id);
    expect(ids.slice(0, 4)).not.toContain(eos);
    expect(ids.slice(0, 4)).not.toContain(stop);
    expect(ids).toHaveLength(5);
    expect(result).toMatchObject({ finishReason: 'stop', stopTokenId: eos, completionTokens: 5 });
    expect(ids).toEqual((await run(reference, r)).tokens.map((t) => t.id));
  });

  it('samples on the CPU when penalties come with logprobs (they are of the raw logits)', async () => {
    const r = request({ repetitionPenalty: 1.3, logprobs: true, topLogprobs: 2 }, { maxTokens: 3 });
    const before = engine.cpuSampledSteps;
    const got = await run(engine, r);
    expect(engine.cpuSampledSteps).toBe(before + 3);
    const want = await run(reference, r);
    expect(got.tokens.map((t) => t.id)).toEqual(want.tokens.map((t) => t.id));
    got.tokens.forEach((t, i) => expect(Math.abs(t.logprob! - want.tokens[i]!.logprob!)).toBeLessThan(LOGIT_TOLERANCE));
  });
});
