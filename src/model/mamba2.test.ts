/**
 * The Mamba-2 token step against an independent whole-sequence form: the conv as a sum over taps
 * with zeros before the sequence, and the scan as SSD's explicit products
 * y_t = Σ_{τ≤t} (C_t·B_τ) · exp(A · Σ_{τ<u≤t} dt_u) · dt_τ · x_τ + D · x_t, heads in groups.
 */
import { describe, expect, it } from 'vitest';
import { mamba2ConvDim, type Mamba2Config } from './config';
import { mamba2State, mamba2Token, type Mamba2Vectors } from './mamba2';
import { rng } from '../testing/random-weights';

const M: Mamba2Config = { layers: [0], convKernel: 3, numHeads: 4, headDim: 3, stateSize: 5, numGroups: 2, aStored: 'log' };
const T = 7;
const EPS = 1e-5;

const silu = (v: number) => v / (1 + Math.exp(-v));

function randoms(next: () => number, n: number, scale = 1): Float32Array {
  return Float32Array.from({ length: n }, () => next() * 2 * scale);
}

/** Random per-token inputs (z, xBC, dt) and layer vectors for M. */
function sample(seed: number) {
  const next = rng(seed);
  const inner = M.numHeads * M.headDim;
  const cd = mamba2ConvDim(M);
  const w: Mamba2Vectors = {
    conv: randoms(next, cd * M.convKernel),
    convBias: randoms(next, cd, 0.5),
    dtBias: randoms(next, M.numHeads),
    decay: randoms(next, M.numHeads),
    d: randoms(next, M.numHeads),
    norm: randoms(next, inner),
  };
  const tokens = Array.from({ length: T }, () => ({ z: randoms(next, inner), xBC: randoms(next, cd), dt: randoms(next, M.numHeads, 2) }));
  return { w, tokens };
}

/** The whole sequence at once, written from the definitions without the recurrence. */
function naive(w: Mamba2Vectors, tokens: ReturnType<typeof sample>['tokens']): Float32Array[] {
  const { numHeads: H, headDim: P, stateSize: N, convKernel: K } = M;
  const inner = H * P;
  const cd = mamba2ConvDim(M);
  const conv = tokens.map((_, t) =>
    Float32Array.from({ length: cd }, (_, c) => {
      let s = w.convBias[c];
      for (let j = 0; j < K; j++) {
        const src = t - (K - 1) + j;
        if (src >= 0) s += w.conv[c * K + j] * tokens[src].xBC[c];
      }
      return silu(s);
    }),
  );
  const dt = tokens.map((tok) => Array.from({ length: H }, (_, h) => Math.log1p(Math.exp(tok.dt[h] + w.dtBias[h]))));
  const A = Array.from({ length: H }, (_, h) => -Math.exp(w.decay[h]));
  const headsPerGroup = H / M.numGroups;
  return tokens.map((tok, t) => {
    const y = new Float32Array(inner);
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / headsPerGroup);
      for (let i = 0; i < P; i++) {
        let acc = w.d[h] * conv[t][h * P + i];
        for (let tau = 0; tau <= t; tau++) {
          let cb = 0;
          for (let j = 0; j < N; j++) cb += conv[t][inner + M.numGroups * N + g * N + j] * conv[tau][inner + g * N + j];
          let seg = 0;
          for (let u = tau + 1; u <= t; u++) seg += dt[u][h];
          acc += cb * Math.exp(A[h] * seg) * dt[tau][h] * conv[tau][h * P + i];
        }
        y[h * P + i] = acc * silu(tok.z[h * P + i]);
      }
    }
    const size = inner / M.numGroups;
    for (let g = 0; g < M.numGroups; g++) {
      const part = y.subarray(g * size, (g + 1) * size);
      const rms = Math.sqrt(part.reduce((a, v) => a + v * v, 0) / size + EPS);
      for (let i = 0; i < size; i++) part[i] = (part[i] / rms) * w.norm[g * size + i];
    }
    return y;
  });
}

function stepwise(m: Mamba2Config, w: Mamba2Vectors, tokens: ReturnType<typeof sample>['tokens']): Float32Array[] {
  const state = mamba2State(m);
  return tokens.map((tok) => {
    const out = new Float32Array(m.numHeads * m.headDim);
    mamba2Token(m, EPS, w, state, tok.z, tok.xBC, tok.dt, out);
    return out;
  });
}

function maxDiff(a: Float32Array[], b: Float32Array[]): number {
  return Math.max(...a.map((row, t) => Math.max(...row.map((v, i) => Math.abs(v - b[t][i])))));
}

describe('Mamba-2 token step', () => {
  it('equals the whole-sequence form (conv with bias, grouped B/C, explicit decay products, gated grouped norm)', () => {
    for (const seed of [1, 2]) {
      const { w, tokens } = sample(seed);
      const want = naive(w, tokens);
      expect(maxDiff(stepwise(M, w, tokens), want)).toBeLessThan(1e-5);
      // The same layer as GGUF stores it: ssm_a = −exp(A_log).
      const neg = { ...w, decay: w.decay.map((v) => -Math.exp(v)) };
      expect(maxDiff(stepwise({ ...M, aStored: 'neg' }, neg, tokens), want)).toBeLessThan(1e-5);
    }
  });
});
