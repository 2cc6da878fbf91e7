import { describe, expect, it } from 'vitest';
import { createBuffer, readBuffer, STORAGE, uploadBuffer } from '../gpu/buffers';
import { testGPU } from '../testing/gpu';
import {
  createSampleOp,
  LOGPROB_WORDS,
  packSamplingParams,
  SAMPLE_WG,
  sampleRef,
  uniform01,
  unpackSampled,
  type SampledToken,
  type SeqSampling,
} from './sample';
import { opContext, random, runPass } from '../testing/kernel-helpers';

const BASE: SeqSampling = { temperature: 1, topK: 0, topP: 1, minP: 0, seed: 1234, step: 0, logprobs: false, topLogprobs: 0 };

/** Samples every entry of `list` in one dispatch; rowStride 0 makes them all read row 0. */
async function sample(logits: Float32Array, vocab: number, rowStride: number, list: SeqSampling[], wg: number, chunk?: number): Promise<SampledToken[]> {
  const { device } = await testGPU();
  const S = list.length;
  const tokens = createBuffer(device, S * 4, STORAGE);
  const logprobs = createBuffer(device, S * LOGPROB_WORDS * 4, STORAGE);
  const op = await createSampleOp(opContext(device, 'f32'), {
    logits: uploadBuffer(device, logits),
    params: uploadBuffer(device, new Uint8Array(packSamplingParams(list))),
    tokens,
    logprobs,
    vocab,
    rowStride,
    wg,
    chunk,
  });
  await runPass(device, (pass) => op.encode(pass, S));
  const ids = new Uint32Array(await readBuffer(device, tokens, S * 4));
  const lp = new Uint32Array(await readBuffer(device, logprobs, S * LOGPROB_WORDS * 4));
  return unpackSampled(ids, lp, list);
}

/** Logits with many exact ties (multiples of 1/4), to pin down tie behaviour at every threshold. */
function tiedLogits(n: number, seed: number): Float32Array {
  return random(n, seed, 6).map((v) => Math.round(v * 4) / 4);
}

const argmaxOf = (x: Float32Array) => x.reduce((best, v, i) => (v > x[best]! ? i : best), 0);

describe('sample kernel', () => {
  it('writes row r’s token at its sequence slot rowSlot[r]', async () => {
    const { device } = await testGPU();
    const V = 300;
    const list = [0, 1, 2].map((r) => ({ ...BASE, seed: 40 + r, temperature: r === 1 ? 0 : 0.8 }));
    const logits = random(3 * V, 5, 4);
    const tokens = uploadBuffer(device, new Uint32Array([9999, 9999, 9999, 9999, 9999]));
    const logprobs = createBuffer(device, 3 * LOGPROB_WORDS * 4, STORAGE);
    const rowSlot = uploadBuffer(device, new Uint32Array([4, 0, 2]));
    const op = await createSampleOp(opContext(device, 'f32'), { logits: uploadBuffer(device, logits), params: uploadBuffer(device, new Uint8Array(packSamplingParams(list))), tokens, logprobs, vocab: V, rowSlot });
    await runPass(device, (pass) => op.encode(pass, 3));
    const got = new Uint32Array(await readBuffer(device, tokens, 5 * 4));
    const want = list.map((s, r) => sampleRef(logits.subarray(r * V, (r + 1) * V), s, uniform01(s.seed, s.step)).token);
    expect(Array.from(got)).toEqual([want[1], 9999, want[2], 9999, want[0]]);
    op.destroy();
  });

  it('picks the argmax greedily over a 150k vocabulary, with its top logprobs', async () => {
    const V = 150_001;
    const logits = random(V, 7, 10);
    logits[V - 3] = 12; // the winner near the end: the strided loops must reach it
    const s = { ...BASE, temperature: 0, logprobs: true, topLogprobs: 5 };
    const want = sampleRef(logits, s, 0);
    const [got] = await sample(logits, V, V, [s], 256);
    expect(got!.token).toBe(V - 3);
    expect(got!.top!.map((t) => t.id)).toEqual(want.top!.map((t) => t.id));
    expect(Math.abs(got!.logprob! - want.logprob!)).toBeLessThan(1e-5);
  });

  // Small chunks split V = 1000 over many wide-pass workgroups: the random logits' top-k runs on
  // the candidates, the tied ones' often drop ties at a chunk's cut and fall back to the row.
  for (const [wg, chunk] of [...SAMPLE_WG.map((w) => [w, undefined] as const), [64, 37] as const]) {
    it(`matches the reference draw for every filter setting, token for token, at WG=${wg}${chunk ? `, chunk ${chunk}` : ''}`, async () => {
      const V = 1000;
      const settings: Array<Partial<SeqSampling>> = [
        {},
        { temperature: 0.7 },
        { topK: 1 },
        { topK: 5 },
        { topK: 40, temperature: 1.5 },
        { topP: 0.5 },
        { topP: 0.9, temperature: 0.8 },
        { topP: 0.999 },
        { minP: 0.05 },
        { minP: 0.3, temperature: 2 },
        { topK: 50, topP: 0.9, minP: 0.02 },
        { topK: 3, topP: 0.2 },
        { topK: 64, topP: 0.95 },
        { topK: 65, temperature: 0.9 }, // above the candidates: the row walk
        { topK: 200, topP: 0.8, minP: 0.01 },
      ];
      for (const logits of [random(V, 3, 5), tiedLogits(V, 4)]) {
        const list = settings.flatMap((s, i) => Array.from({ length: 6 }, (_, step) => ({ ...BASE, ...s, seed: 1000 + i, step })));
        const got = await sample(logits, V, 0, list, wg, chunk);
        const want = list.map((s) => sampleRef(logits, s, uniform01(s.seed, s.step)));
        expect(got.map((g) => g.token)).toEqual(want.map((w) => w.token));
      }
    });
  }

  for (const V of [151_936, 262_144]) {
    it(`matches the reference over a ${V}-token vocabulary: greedy, T 0.7 / top-k 40 / top-p 0.9, temperature alone, top logprobs`, async () => {
      const logits = random(V, V, 8);
      logits[V - 1] = 9; // the largest in the last chunk
      logits[V >> 1] = 8.9;
      const list: SeqSampling[] = [
        { ...BASE, temperature: 0, logprobs: true, topLogprobs: 20 },
        ...[0, 1].map((step) => ({ ...BASE, temperature: 0.7, topK: 40, topP: 0.9, step, seed: V })),
        { ...BASE, temperature: 1.2, topK: 50, minP: 0.05, logprobs: true, topLogprobs: 3, seed: 9 },
        ...[0, 1, 2].map((step) => ({ ...BASE, temperature: 1, step, seed: 77 })), // temperature alone: chunk, then token
      ];
      const got = await sample(logits, V, 0, list, 256);
      list.forEach((s, i) => {
        const want = sampleRef(logits, s, uniform01(s.seed, s.step));
        expect(got[i]!.token).toBe(want.token);
        expect(got[i]!.top?.map((t) => t.id)).toEqual(want.top?.map((t) => t.id));
        if (s.logprobs) expect(Math.abs(got[i]!.logprob! - want.logprob!)).toBeLessThan(1e-5);
      });
      expect(got[0]!.token).toBe(V - 1);
    });
  }

  it('keeps the ties a chunk’s candidate list could not hold (the row walk takes over)', async () => {
    // 24 tokens tie at the top, 16 of them in the first 37-id chunk: with top-k 3 (candidates
    // per chunk: 3) that chunk drops 13 ties that the kept set must still hold.
    const V = 300;
    const logits = random(V, 12, 2);
    const tied = [...Array.from({ length: 16 }, (_, i) => 2 * i + 1), 40, 41, 77, 150, 151, 152, 298, 299];
    for (const i of tied) logits[i] = 5;
    const list = Array.from({ length: 48 }, (_, step) => ({ ...BASE, topK: 3, topP: step % 2 ? 0.5 : 1, step }));
    const want = list.map((q) => sampleRef(logits, q, uniform01(q.seed, q.step)));
    expect(want[0]!.kept).toEqual(tied);
    const got = await sample(logits, V, 0, list, 64, 37);
    expect(got.map((g) => g.token)).toEqual(want.map((w) => w.token));
    expect(new Set(got.map((g) => g.token)).size).toBeGreaterThan(10);
  });

  it('keeps every logit tied at the top-k cut and draws only among the kept', async () => {
    const logits = new Float32Array([1, 3, 2, 3, 0, 3, 2.5, -1]);
    const list = Array.from({ length: 64 }, (_, step) => ({ ...BASE, topK: 2, step }));
    const got = await sample(logits, 8, 0, list, 64);
    const want = list.map((s) => sampleRef(logits, s, uniform01(s.seed, s.step)));
    expect(want[0]!.kept).toEqual([1, 3, 5]); // three ties at the 2nd-largest value: all kept
    expect(got.map((g) => g.token)).toEqual(want.map((w) => w.token));
    expect(new Set(got.map((g) => g.token))).toEqual(new Set([1, 3, 5]));
    // Greedy takes the lowest id among tied maxima.
    const [greedy] = await sample(logits, 8, 0, [{ ...BASE, temperature: 0 }], 64);
    expect(greedy!.token).toBe(1);
  });

  it('cuts the nucleus between nearly equal logits that share their leading key bits', async () => {
    // 3 and 3.0001 differ only in the key's third byte: the radix select must descend to it.
    const logits = new Float32Array([3, 3.0001, -5, -6, -7]);
    const list = Array.from({ length: 16 }, (_, step) => ({ ...BASE, topP: 0.3, step }));
    const got = await sample(logits, 5, 0, list, 64);
    expect(sampleRef(logits, list[0]!, 0.5).kept).toEqual([1]);
    expect(got.every((g) => g.token === 1)).toBe(true);
    // With top-p = 0.5 the two tied 3s join the nucleus (ties kept).
    const tied = new Float32Array([3, 3.0001, -5, -6, 3, -7]);
    const half = Array.from({ length: 32 }, (_, step) => ({ ...BASE, topP: 0.5, step }));
    expect(sampleRef(tied, half[0]!, 0.5).kept).toEqual([0, 1, 4]);
    const drawn = await sample(tied, 6, 0, half, 64);
    expect(drawn.map((g) => g.token)).toEqual(half.map((q) => sampleRef(tied, q, uniform01(q.seed, q.step)).token));
    expect(new Set(drawn.map((g) => g.token))).toEqual(new Set([0, 1, 4]));
  });

  it('equals greedy at top-k = 1 and at temperature 0, whatever the seed', async () => {
    const logits = random(5000, 21, 4);
    const list = [0, 1, 2, 3].flatMap((step) => [
      { ...BASE, topK: 1, step, seed: step * 77 },
      { ...BASE, temperature: 0, step, seed: step * 77 },
    ]);
    const got = await sample(logits, 5000, 0, list, 128);
    expect(got.map((g) => g.token)).toEqual(list.map(() => argmaxOf(logits)));
  });

  it('reports logprobs of the raw logits (log-softmax, before temperature and filters), ties by lowest id', async () => {
    const V = 3000;
    const logits = tiedLogits(V, 9);
    const list = [
      { ...BASE, temperature: 0.5, topK: 10, logprobs: true, topLogprobs: 20 },
      { ...BASE, temperature: 0, logprobs: true, topLogprobs: 1 },
      { ...BASE, topP: 0.5, logprobs: true, topLogprobs: 0 },
      { ...BASE, logprobs: false, topLogprobs: 0 },
    ];
    for (const [wg, chunk] of [...SAMPLE_WG.map((w) => [w, undefined] as const), [64, 29] as const]) {
      const got = await sample(logits, V, 0, list, wg, chunk);
      list.forEach((s, i) => {
        const want = sampleRef(logits, s, uniform01(s.seed, s.step));
        expect(got[i]!.token).toBe(want.token);
        if (!s.logprobs) return expect(got[i]!.logprob).toBeUndefined();
        expect(Math.abs(got[i]!.logprob! - want.logprob!)).toBeLessThan(1e-5);
        expect(got[i]!.top!.map((t) => t.id)).toEqual(want.top!.map((t) => t.id));
        got[i]!.top!.forEach((t, j) => expect(Math.abs(t.logprob - want.top![j]!.logprob)).toBeLessThan(1e-5));
      });
    }
  });

  it('samples three sequences with different parameters from their own rows in one dispatch', async () => {
    const V = 700;
    const logits = random(3 * V, 31, 5);
    const list: SeqSampling[] = [
      { ...BASE, temperature: 0, logprobs: true, topLogprobs: 3 },
      { ...BASE, topK: 7, seed: 5, step: 9 },
      { ...BASE, temperature: 0.6, topP: 0.8, minP: 0.1, seed: 2 ** 40 + 3, step: 1, logprobs: true, topLogprobs: 2 },
    ];
    const got = await sample(logits, V, V, list, 256);
    list.forEach((s, i) => {
      const row = logits.subarray(i * V, (i + 1) * V);
      const want = sampleRef(row, s, uniform01(s.seed, s.step));
      expect(got[i]!.token).toBe(want.token);
      expect(got[i]!.top?.map((t) => t.id)).toEqual(want.top?.map((t) => t.id));
    });
  });

  it('draws with the filtered softmax frequencies and never a filtered-out token', async () => {
    const V = 50;
    const N = 1000;
    const logits = random(V, 77, 3);
    const s = { ...BASE, temperature: 0.8, topK: 30, topP: 0.95, minP: 0.01, seed: 42 };
    const list = Array.from({ length: N }, (_, step) => ({ ...s, step }));
    const got = await sample(logits, V, 0, list, 64);
    const { kept } = sampleRef(logits, s, 0);
    expect(kept.length).toBeGreaterThan(5);
    expect(kept.length).toBeLessThan(30); // top-p and min-p cut below top-k here

    const counts = new Map<number, number>();
    for (const g of got) counts.set(g.token, (counts.get(g.token) ?? 0) + 1);
    for (const id of counts.keys()) expect(kept).toContain(id);

    // Chi-square against the filtered softmax, tokens with < 5 expected draws pooled into one bin.
    // Bound: df + 6·sqrt(2·df), about six standard deviations of the statistic (the draws are
    // deterministic, so this cannot flake; a biased sampler lands far above it).
    const w = kept.map((i) => Math.exp(Math.fround((logits[i]! - logits[argmaxOf(logits)]!) * Math.fround(1 / 0.8))));
    const z = w.reduce((a, b) => a + b, 0);
    let chi = 0;
    let bins = 0;
    let pooledExp = 0;
    let pooledObs = 0;
    kept.forEach((id, j) => {
      const expected = (N * w[j]!) / z;
      const observed = counts.get(id) ?? 0;
      if (expected < 5) {
        pooledExp += expected;
        pooledObs += observed;
        return;
      }
      chi += (observed - expected) ** 2 / expected;
      bins++;
    });
    if (pooledExp > 0) {
      chi += (pooledObs - pooledExp) ** 2 / pooledExp;
      bins++;
    }
    const df = bins - 1;
    expect(chi).toBeLessThan(df + 6 * Math.sqrt(2 * df));
    // And each draw is the reference's for the same (seed, step).
    expect(got.map((g) => g.token)).toEqual(list.map((q) => sampleRef(logits, q, uniform01(q.seed, q.step)).token));
  });
});
