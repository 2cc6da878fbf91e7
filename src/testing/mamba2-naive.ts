/**
 * Granite 4.0-H's Mamba-2 mixer over a whole sequence, written from the definitions without the
 * recurrence (tests only): the conv as a sum over taps with zeros before the sequence, and the scan
 * as SSD's explicit products y_t = Σ_{τ≤t} (C_t·B_τ) · exp(A · Σ_{τ<u≤t} dt_u) · dt_τ · x_τ + D · x_t,
 * head h reading group h // (heads / groups); then y ⊙ SiLU(z) and the grouped RMSNorm.
 */
import { mamba2ConvDim, type Mamba2Config } from '../model/config';
import type { Mamba2Vectors } from '../model/mamba2';

const silu = (v: number) => v / (1 + Math.exp(-v));

/** Each token's output (numHeads · headDim) from its z, xBC (before the conv) and dt rows; the decay as `m.aStored` says. */
export function mamba2Sequence(m: Mamba2Config, eps: number, w: Mamba2Vectors, z: ArrayLike<number>[], xBC: ArrayLike<number>[], dtIn: ArrayLike<number>[]): Float32Array[] {
  const { numHeads: H, headDim: P, stateSize: N, convKernel: K, numGroups: G } = m;
  const inner = H * P;
  const cd = mamba2ConvDim(m);
  const conv = xBC.map((_, t) =>
    Float32Array.from({ length: cd }, (_, c) => {
      let s = w.convBias[c];
      for (let j = 0; j < K; j++) {
        const src = t - (K - 1) + j;
        if (src >= 0) s += w.conv[c * K + j] * xBC[src][c];
      }
      return silu(s);
    }),
  );
  const dt = dtIn.map((row) => Array.from({ length: H }, (_, h) => Math.log1p(Math.exp(row[h] + w.dtBias[h]))));
  const A = Array.from({ length: H }, (_, h) => (m.aStored === 'log' ? -Math.exp(w.decay[h]) : w.decay[h]));
  return z.map((zt, t) => {
    const y = new Float32Array(inner);
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / (H / G));
      for (let i = 0; i < P; i++) {
        let acc = w.d[h] * conv[t][h * P + i];
        for (let tau = 0; tau <= t; tau++) {
          let cb = 0;
          for (let j = 0; j < N; j++) cb += conv[t][inner + G * N + g * N + j] * conv[tau][inner + g * N + j];
          let seg = 0;
          for (let u = tau + 1; u <= t; u++) seg += dt[u][h];
          acc += cb * Math.exp(A[h] * seg) * dt[tau][h] * conv[tau][h * P + i];
        }
        y[h * P + i] = acc * silu(zt[h * P + i]);
      }
    }
    const size = inner / G;
    for (let g = 0; g < G; g++) {
      const part = y.subarray(g * size, (g + 1) * size);
      const rms = Math.sqrt(part.reduce((a, v) => a + v * v, 0) / size + eps);
      for (let i = 0; i < size; i++) part[i] = (part[i] / rms) * w.norm[g * size + i];
    }
    return y;
  });
}
