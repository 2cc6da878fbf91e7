/**
 * The chunked (SSD) Mamba-2 scan (mamba2-chunked.ts) against the token-by-token mamba2Scan
 * (mamba2.ts): one chunk, several, a partial last chunk, a single token, from a nonzero carried-in
 * state, two groups of two heads, both decay tensors (A_log, ssm_a), weak and strong decays. CPU only.
 */
import { describe, expect, it } from 'vitest';
import { maxRelDiff, random } from '../testing/kernel-helpers';
import { mamba2ConvDim, type Mamba2Config } from './config';
import { mamba2Scan, type Mamba2Vectors } from './mamba2';
import { mamba2ScanChunked } from './mamba2-chunked';

// Two groups of two heads; headDim ≠ stateSize so a swapped index shows.
const M: Mamba2Config = { layers: [0], convKernel: 4, numHeads: 4, headDim: 3, stateSize: 5, numGroups: 2, aStored: 'log' };

function inputs(m: Mamba2Config, T: number, seed: number, decayShift: number) {
  const H = m.numHeads;
  const aLog = random(H, seed, 0.5).map((v) => v + decayShift);
  const w: Pick<Mamba2Vectors, 'dtBias' | 'decay' | 'd'> = { dtBias: random(H, seed + 1, 1), decay: m.aStored === 'log' ? aLog : aLog.map((v) => -Math.exp(v)), d: random(H, seed + 2, 1) };
  return { w, xBC: random(T * mamba2ConvDim(m), seed + 3, 1), dt: random(T * H, seed + 4, 2), s0: random(H * m.headDim * m.stateSize, seed + 5, 0.5) };
}

function byToken(m: Mamba2Config, T: number, x: ReturnType<typeof inputs>) {
  const inner = m.numHeads * m.headDim;
  const cd = mamba2ConvDim(m);
  const s = x.s0.slice();
  const out = new Float32Array(T * inner);
  for (let t = 0; t < T; t++) mamba2Scan(m, x.w, s, x.xBC.subarray(t * cd, (t + 1) * cd), x.dt.subarray(t * m.numHeads, (t + 1) * m.numHeads), out.subarray(t * inner, (t + 1) * inner));
  return { s, out };
}

describe('Mamba-2 chunked (SSD) scan', () => {
  // [tokens, chunk]: one whole chunk, several whole, a partial last chunk, a single token, one partial chunk
  const shapes: Array<[number, number]> = [[8, 8], [24, 8], [21, 8], [1, 8], [40, 32], [13, 16]];
  for (const [T, size] of shapes) {
    for (const [m, decayShift, what] of [[M, 0, 'A_log, weak decays'], [{ ...M, aStored: 'neg' }, 1.5, 'ssm_a, strong decays']] as const) {
      it(`equals mamba2Scan token by token over ${T} tokens in chunks of ${size} from a carried-in state (${what})`, () => {
        const x = inputs(m, T, 10 * T + size, decayShift);
        const want = byToken(m, T, x);
        const s = x.s0.slice();
        const out = new Float32Array(T * m.numHeads * m.headDim);
        mamba2ScanChunked(m, x.w, s, x.xBC, x.dt, out, T, size);
        expect(maxRelDiff(out, want.out)).toBeLessThan(1e-5);
        expect(maxRelDiff(s, want.s)).toBeLessThan(1e-5);
      });
    }
  }
});
