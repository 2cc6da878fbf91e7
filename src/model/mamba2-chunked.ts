/**
 * The chunked (SSD, "state-space duality") form of Granite 4.0-H's Mamba-2 scan, for prefill rows:
 * the same result as mamba2Scan (./mamba2.ts) token by token, in ⌈T/Q⌉ state updates instead of T.
 * Per head h, with dt_t = softplus(dt_t + dt_bias), a_t = dt_t·A (≤ 0) and, within a chunk of n
 * tokens, seg(s, t) = a_{s+1} + … + a_t (the segment sum: 0 when s = t):
 *   intra-chunk, no state:  y_t = Σ_{s≤t} exp(seg(s, t))·(C_t·B_s)·dt_s·x_s + D·x_t   (L ∘ C·Bᵀ applied to dt·x)
 *   from the carried state: y_t += exp(a_0 + … + a_t)·S·C_t
 *   the state pass:         S ← exp(a_0 + … + a_{n−1})·S + Σ_s exp(seg(s, n − 1))·dt_s·x_s ⊗ B_s
 * Segment sums are summed over their own range rather than taken as differences of running sums,
 * so a long strong decay does not cancel digits (transformers' segsum does the same by masking).
 * The kernels that run it: src/kernels/mamba2-chunked.ts.
 */
import { mamba2ConvDim, mamba2Group, type Mamba2Config } from './config';
import { softplus } from './delta-net';
import { mamba2A, type Mamba2Vectors } from './mamba2';

/**
 * n tokens of one sequence in chunks of `size`: xBC [n, convDim] after the conv and SiLU, dtIn
 * [n, heads] (in_proj's dt), `s` the sequence's S [heads, headDim, stateSize] advanced, out
 * [n, heads·headDim] = S·C + D·x per token (before the gate), as mamba2Scan's.
 */
export function mamba2ScanChunked(m: Mamba2Config, w: Pick<Mamba2Vectors, 'dtBias' | 'decay' | 'd'>, s: Float32Array, xBC: Float32Array, dtIn: Float32Array, out: Float32Array, n: number, size: number): void {
  const { numHeads: H, headDim: P, stateSize: N, numGroups: G } = m;
  const inner = H * P;
  const cd = mamba2ConvDim(m);
  const x = (t: number, h: number, i: number) => xBC[t * cd + h * P + i]!;
  const B = (t: number, g: number, j: number) => xBC[t * cd + inner + g * N + j]!;
  const C = (t: number, g: number, j: number) => xBC[t * cd + inner + (G + g) * N + j]!;
  for (let h = 0; h < H; h++) {
    const g = mamba2Group(m, h);
    const A = mamba2A(m, w.decay, h);
    const sh = s.subarray(h * P * N, (h + 1) * P * N);
    for (let t0 = 0; t0 < n; t0 += size) {
      const len = Math.min(size, n - t0);
      const dt = Array.from({ length: len }, (_, t) => softplus(dtIn[(t0 + t) * H + h]! + w.dtBias[h]!));
      const a = dt.map((v) => v * A);
      const seg = (from: number, to: number) => {
        let sum = 0;
        for (let r = from + 1; r <= to; r++) sum += a[r]!;
        return sum;
      };
      for (let t = 0; t < len; t++) {
        const tt = t0 + t;
        // L ∘ C·Bᵀ: the decay-masked scores of this token against the chunk's earlier ones
        const score = Array.from({ length: t + 1 }, (_, u) => {
          let cb = 0;
          for (let j = 0; j < N; j++) cb += C(tt, g, j) * B(t0 + u, g, j);
          return Math.exp(seg(u, t)) * cb * dt[u]!;
        });
        const fromState = Math.exp(seg(-1, t));
        for (let i = 0; i < P; i++) {
          let y = 0;
          for (let u = 0; u <= t; u++) y += score[u]! * x(t0 + u, h, i);
          let sc = 0;
          for (let j = 0; j < N; j++) sc += sh[i * N + j]! * C(tt, g, j);
          out[tt * inner + h * P + i] = y + fromState * sc + w.d[h]! * x(tt, h, i);
        }
      }
      // The state pass: decay the carried state over the chunk, add each token's decayed outer product.
      const whole = Math.exp(seg(-1, len - 1));
      const k = Array.from({ length: len }, (_, u) => Math.exp(seg(u, len - 1)) * dt[u]!);
      for (let i = 0; i < P; i++) {
        for (let j = 0; j < N; j++) {
          let v = whole * sh[i * N + j]!;
          for (let u = 0; u < len; u++) v += k[u]! * x(t0 + u, h, i) * B(t0 + u, g, j);
          sh[i * N + j] = v;
        }
      }
    }
  }
}
