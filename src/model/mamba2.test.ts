/**
 * The Mamba-2 token step against an independent whole-sequence form (testing/mamba2-naive.ts: the
 * conv as a sum over taps, the scan as SSD's explicit products), with two groups of two heads.
 */
import { describe, expect, it } from 'vitest';
import { mamba2ConvDim, type Mamba2Config } from './config';
import { mamba2State, mamba2Token, type Mamba2Vectors } from './mamba2';
import { mamba2Sequence } from '../testing/mamba2-naive';
import { rng } from '../testing/random-weights';

const M: Mamba2Config = { layers: [0], convKernel: 3, numHeads: 4, headDim: 3, stateSize: 5, numGroups: 2, aStored: 'log' };
const T = 7;
const EPS = 1e-5;

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
      const want = mamba2Sequence(M, EPS, w, tokens.map((t) => t.z), tokens.map((t) => t.xBC), tokens.map((t) => t.dt));
      expect(maxDiff(stepwise(M, w, tokens), want)).toBeLessThan(1e-5);
      // The same layer as GGUF stores it: ssm_a = −exp(A_log).
      const neg = { ...w, decay: w.decay.map((v) => -Math.exp(v)) };
      expect(maxDiff(stepwise({ ...M, aStored: 'neg' }, neg, tokens), want)).toBeLessThan(1e-5);
    }
  });
});
