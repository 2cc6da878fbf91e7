/**
 * One token of Granite 4.0-H's Mamba-2 mixer (Mamba2Config) between its projections, for the CPU
 * reference forward pass and the Mamba-2 kernels' references (src/kernels/mamba2.ts, as delta-net.ts is for Qwen3.5).
 */
import { mamba2ConvDim, mamba2Group, type Mamba2Config } from './config';
import { silu, softplus } from './delta-net';
import { shortConvStep } from './short-conv';

/** What a sequence keeps per Mamba-2 layer: the conv's last kernel − 1 inputs and each head's state. */
export interface Mamba2State {
  /** ((convKernel − 1) × convDim), oldest first (shortConvStep's layout). */
  conv: Float32Array;
  /** (numHeads × headDim × stateSize): head h's S, row p (a head channel) of stateSize values. */
  s: Float32Array;
}

export function mamba2State(m: Mamba2Config): Mamba2State {
  return { conv: new Float32Array((m.convKernel - 1) * mamba2ConvDim(m)), s: new Float32Array(m.numHeads * m.headDim * m.stateSize) };
}

/** A layer's own vectors (f32): the conv [convDim, kernel] and its bias [convDim], dt_bias, decay and D [numHeads], the norm [numHeads · headDim]. */
export interface Mamba2Vectors {
  conv: Float32Array;
  convBias: Float32Array;
  dtBias: Float32Array;
  /** HF's A_log or GGUF's −exp(A_log) (Mamba2Config.aStored). */
  decay: Float32Array;
  d: Float32Array;
  norm: Float32Array;
}

/** A = −exp(A_log) of head h, whichever form the decay tensor holds. */
export function mamba2A(m: Mamba2Config, decay: Float32Array, h: number): number {
  return m.aStored === 'log' ? -Math.exp(decay[h]) : decay[h];
}

/**
 * One token from in_proj's output (z, xBC before the conv, dt) to the input of out_proj (`out`,
 * numHeads × headDim), advancing `state`.
 */
export function mamba2Token(m: Mamba2Config, eps: number, w: Mamba2Vectors, state: Mamba2State, z: Float32Array, xBCIn: Float32Array, dtIn: Float32Array, out: Float32Array): void {
  const xBC = new Float32Array(xBCIn.length);
  shortConvStep(state.conv, xBCIn, w.conv, m.convKernel, xBC);
  for (let c = 0; c < xBC.length; c++) xBC[c] = silu(xBC[c] + w.convBias[c]);
  mamba2Scan(m, w, state.s, xBC, dtIn, out);
  mamba2GatedNorm(m, eps, w.norm, z, out);
}

/**
 * The scan of one token: from the conv's output xBC (x, B, C after SiLU) and in_proj's dt, each
 * head's S [headDim, stateSize] ← exp(dt·A)·S + dt·x ⊗ B of its group, and out (numHeads × headDim) = S·C + D·x.
 */
export function mamba2Scan(m: Mamba2Config, w: Pick<Mamba2Vectors, 'dtBias' | 'decay' | 'd'>, s: Float32Array, xBC: Float32Array, dtIn: Float32Array, out: Float32Array): void {
  const { numHeads, headDim: p, stateSize: n, numGroups } = m;
  const inner = numHeads * p;
  const x = xBC.subarray(0, inner);
  const B = xBC.subarray(inner, inner + numGroups * n);
  const C = xBC.subarray(inner + numGroups * n);
  for (let h = 0; h < numHeads; h++) {
    const g = mamba2Group(m, h) * n;
    const dt = softplus(dtIn[h] + w.dtBias[h]);
    const decay = Math.exp(dt * mamba2A(m, w.decay, h));
    for (let i = 0; i < p; i++) {
      const row = (h * p + i) * n;
      const xi = x[h * p + i];
      let y = 0;
      for (let j = 0; j < n; j++) {
        const v = s[row + j] * decay + dt * xi * B[g + j];
        s[row + j] = v;
        y += v * C[g + j];
      }
      out[h * p + i] = y + w.d[h] * xi;
    }
  }
}

/** y ← RMSNorm(y ⊙ SiLU(z)) per group of inner / numGroups channels, times w (the gate before the norm). */
export function mamba2GatedNorm(m: Mamba2Config, eps: number, norm: Float32Array, z: Float32Array, y: Float32Array): void {
  const size = (m.numHeads * m.headDim) / m.numGroups;
  for (let i = 0; i < y.length; i++) y[i] *= silu(z[i]);
  for (let g = 0; g < m.numGroups; g++) {
    let ss = 0;
    for (let i = g * size; i < (g + 1) * size; i++) ss += y[i] * y[i];
    const inv = 1 / Math.sqrt(ss / size + eps);
    for (let i = g * size; i < (g + 1) * size; i++) y[i] *= inv * norm[i];
  }
}
