/**
 * The chunked delta rule (delta-net-chunked.ts) against the token-by-token recurrence
 * (delta-net.ts's deltaRuleStep): one chunk, several, a partial last chunk, a single token, from a
 * nonzero state, in both value-head orders, with decays strong and weak. CPU only.
 */
import { describe, expect, it } from 'vitest';
import { random } from '../testing/kernel-helpers';
import type { DeltaNetConfig } from './config';
import { deltaRuleStep, l2normalize } from './delta-net';
import { deltaRuleChunked } from './delta-net-chunked';

// Two value heads per key head; dk ≠ dv so a swapped index shows.
const D: DeltaNetConfig = { layers: [0], convKernel: 4, numKHeads: 2, numVHeads: 4, headKDim: 6, headVDim: 5, vHeadOrder: 'grouped', aStored: 'log' };

function inputs(d: DeltaNetConfig, T: number, seed: number, decayScale: number) {
  const { numKHeads: nk, numVHeads: nv, headKDim: dk, headVDim: dv } = d;
  const q = random(T * nk * dk, seed, 1);
  const k = random(T * nk * dk, seed + 1, 1);
  for (let x = 0; x < T * nk; x++) {
    l2normalize(q.subarray(x * dk, (x + 1) * dk), 1e-6);
    l2normalize(k.subarray(x * dk, (x + 1) * dk), 1e-6);
  }
  const v = random(T * nv * dv, seed + 2, 1);
  // g ≤ 0 (a log decay), β in (0, 1)
  const g = random(T * nv, seed + 3, 1).map((x) => -decayScale * (x + 1));
  const beta = random(T * nv, seed + 4, 1).map((x) => 1 / (1 + Math.exp(-2 * x)));
  const s0 = random(nv * dk * dv, seed + 5, 0.5);
  return { q, k, v, g, beta, s0 };
}

function byToken(d: DeltaNetConfig, T: number, x: ReturnType<typeof inputs>) {
  const { numKHeads: nk, numVHeads: nv, headKDim: dk, headVDim: dv } = d;
  const s = x.s0.slice();
  const out = new Float32Array(T * nv * dv);
  for (let t = 0; t < T; t++) {
    const kq = (a: Float32Array) => a.subarray(t * nk * dk, (t + 1) * nk * dk);
    deltaRuleStep(d, s, kq(x.q), kq(x.k), x.v.subarray(t * nv * dv, (t + 1) * nv * dv), x.g.subarray(t * nv, (t + 1) * nv), x.beta.subarray(t * nv, (t + 1) * nv), out.subarray(t * nv * dv, (t + 1) * nv * dv));
  }
  return { s, out };
}

function chunked(d: DeltaNetConfig, T: number, chunk: number, x: ReturnType<typeof inputs>) {
  const s = x.s0.slice();
  const out = new Float32Array(T * d.numVHeads * d.headVDim);
  deltaRuleChunked(d, s, x.q, x.k, x.v, x.g, x.beta, out, T, chunk);
  return { s, out };
}

const maxAbs = (a: Float32Array, b: Float32Array) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i]!)), 0);

describe('the chunked delta rule', () => {
  const cases: Array<[string, DeltaNetConfig, number, number, number]> = [
    // [what, config, T, chunk, decay scale]
    ['one token', D, 1, 4, 0.3],
    ['one partial chunk', D, 3, 4, 0.3],
    ['one whole chunk', D, 4, 4, 0.3],
    ['three chunks, the last partial', D, 11, 4, 0.3],
    ["GGUF's tiled value heads, five chunks of 8", { ...D, vHeadOrder: 'tiled' }, 37, 8, 0.3],
    ['strong decays (g down to −8) over chunks of 16', D, 40, 16, 4],
    ['weak decays over one chunk of 32', D, 30, 32, 0.01],
  ];
  for (const [what, d, T, chunk, decay] of cases)
    it(`equals the recurrence from a carried-in state: ${what} (T = ${T}, C = ${chunk})`, () => {
      const x = inputs(d, T, T * 7 + chunk, decay);
      const want = byToken(d, T, x);
      const got = chunked(d, T, chunk, x);
      expect(maxAbs(got.out, want.out)).toBeLessThan(1e-5);
      expect(maxAbs(got.s, want.s)).toBeLessThan(1e-5);
    });

  it('tells the two head orders apart (the test above can fail on the key head a value head reads)', () => {
    const x = inputs(D, 9, 3, 0.3);
    const want = byToken({ ...D, vHeadOrder: 'tiled' }, 9, x);
    expect(maxAbs(chunked(D, 9, 4, x).out, want.out)).toBeGreaterThan(1e-2);
  });
});
