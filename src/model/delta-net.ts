/**
 * One token of Qwen3.5's gated DeltaNet (DeltaNetConfig) between its projections, shared by the CPU
 * reference forward pass and, later, the DeltaNet kernels' references (as short-conv.ts is for LFM2).
 * Conventions as HF's Qwen3_5GatedDeltaNet and llama.cpp's qwen35 graph state them: see
 * DeltaNetConfig.
 */
import { deltaNetConvDim, deltaNetKeyHead, type DeltaNetConfig } from './config';
import { shortConvStep } from './short-conv';

/** What a sequence keeps per DeltaNet layer: the conv's last kernel − 1 inputs and each value head's state matrix. */
export interface DeltaNetState {
  /** ((convKernel − 1) × convDim), oldest first (shortConvStep's layout). */
  conv: Float32Array;
  /** (numVHeads × headKDim × headVDim): value head h's S, row i (a key dimension) of headVDim values. */
  s: Float32Array;
}

export function deltaNetState(d: DeltaNetConfig): DeltaNetState {
  return { conv: new Float32Array((d.convKernel - 1) * deltaNetConvDim(d)), s: new Float32Array(d.numVHeads * d.headKDim * d.headVDim) };
}

/** A layer's own vectors (f32): the conv [convDim, kernel], dt_bias and the decay tensor [numVHeads], the output norm [headVDim]. */
export interface DeltaNetVectors {
  conv: Float32Array;
  dtBias: Float32Array;
  /** HF's A_log or GGUF's −exp(A_log) (DeltaNetConfig.aStored). */
  decay: Float32Array;
  norm: Float32Array;
}

/** softplus as torch's (beta 1, threshold 20: linear above). */
export function softplus(x: number): number {
  return x > 20 ? x : Math.log1p(Math.exp(x));
}

/** The per-token log-decay g = −A·softplus(a + dt_bias) of value head h, A = exp(A_log). */
export function deltaNetLogDecay(d: DeltaNetConfig, decay: Float32Array, dtBias: Float32Array, a: number, h: number): number {
  const rate = d.aStored === 'log' ? Math.exp(decay[h]) : -decay[h];
  return -rate * softplus(a + dtBias[h]);
}

/**
 * The gated delta rule for one token on every value head, q and k already normalised (and q
 * scaled): S ← S·exp(g); S += k ⊗ β(v − Sᵀk); out = Sᵀq. q and k are per key head (value head h
 * reads key head deltaNetKeyHead), v and out per value head; g and β per value head.
 */
export function deltaRuleStep(d: DeltaNetConfig, s: Float32Array, q: Float32Array, k: Float32Array, v: Float32Array, g: Float32Array, beta: Float32Array, out: Float32Array): void {
  const { headKDim: dk, headVDim: dv } = d;
  const kvMem = new Float64Array(dv);
  for (let h = 0; h < d.numVHeads; h++) {
    const kh = deltaNetKeyHead(d, h) * dk;
    const sh = h * dk * dv;
    const decay = Math.exp(g[h]);
    for (let i = 0; i < dk * dv; i++) s[sh + i] *= decay;
    kvMem.fill(0);
    for (let i = 0; i < dk; i++) for (let j = 0; j < dv; j++) kvMem[j] += s[sh + i * dv + j] * k[kh + i];
    for (let j = 0; j < dv; j++) kvMem[j] = beta[h] * (v[h * dv + j] - kvMem[j]);
    for (let i = 0; i < dk; i++) for (let j = 0; j < dv; j++) s[sh + i * dv + j] += k[kh + i] * kvMem[j];
    for (let j = 0; j < dv; j++) {
      let o = 0;
      for (let i = 0; i < dk; i++) o += s[sh + i * dv + j] * q[kh + i];
      out[h * dv + j] = o;
    }
  }
}

/** x ← x·rsqrt(Σx² + eps) (HF's l2norm in the DeltaNet, eps the model's RMSNorm eps). */
export function l2normalize(x: Float32Array, eps: number): void {
  let ss = 0;
  for (let i = 0; i < x.length; i++) ss += x[i] * x[i];
  const inv = 1 / Math.sqrt(ss + eps);
  for (let i = 0; i < x.length; i++) x[i] *= inv;
}

/** x·sigmoid(x). */
export const silu = (x: number): number => x / (1 + Math.exp(-x));

/**
 * One token of the mixer from its projections (qkv before the conv, z, b, a) to the input of
 * out_proj (`out`, numVHeads × headVDim), advancing `state`: the conv + SiLU, then deltaNetCore.
 */
export function deltaNetToken(d: DeltaNetConfig, eps: number, w: DeltaNetVectors, state: DeltaNetState, qkv: Float32Array, z: Float32Array, b: Float32Array, a: Float32Array, out: Float32Array): void {
  const conv = new Float32Array(qkv.length);
  shortConvStep(state.conv, qkv, w.conv, d.convKernel, conv);
  for (let i = 0; i < conv.length; i++) conv[i] = silu(conv[i]);
  deltaNetCore(d, eps, w, state.s, conv, z, b, a, out);
}

/**
 * The mixer after its conv (`conv`: q, k, v after SiLU; the conv's state is not touched): q/k L2
 * norms, q·1/√dk, β and g, the delta rule over `s`, then each head's RMSNorm by the plain w times
 * SiLU(z). `conv` is normalised in place.
 */
export function deltaNetCore(d: DeltaNetConfig, eps: number, w: Omit<DeltaNetVectors, 'conv'>, s: Float32Array, conv: Float32Array, z: Float32Array, b: Float32Array, a: Float32Array, out: Float32Array): void {
  const { q, k, v, g, beta } = deltaNetRuleInputs(d, eps, w, conv, b, a);
  deltaRuleStep(d, s, q, k, v, g, beta, out);
  deltaNetGatedNorm(d, eps, w.norm, out, z);
}

/**
 * The delta rule's inputs of one token from the conv's output (normalised in place): q and k L2
 * normalised per key head, q times 1/√dk, v as is; g and β per value head.
 */
export function deltaNetRuleInputs(d: DeltaNetConfig, eps: number, w: Omit<DeltaNetVectors, 'conv' | 'norm'>, conv: Float32Array, b: Float32Array, a: Float32Array) {
  const { numKHeads, numVHeads, headKDim: dk } = d;
  const q = conv.subarray(0, numKHeads * dk);
  const k = conv.subarray(numKHeads * dk, 2 * numKHeads * dk);
  const v = conv.subarray(2 * numKHeads * dk);
  const scale = 1 / Math.sqrt(dk);
  for (let h = 0; h < numKHeads; h++) {
    const qh = q.subarray(h * dk, (h + 1) * dk);
    l2normalize(qh, eps);
    for (let i = 0; i < dk; i++) qh[i] *= scale;
    l2normalize(k.subarray(h * dk, (h + 1) * dk), eps);
  }
  const g = new Float32Array(numVHeads);
  const beta = new Float32Array(numVHeads);
  for (let h = 0; h < numVHeads; h++) {
    g[h] = deltaNetLogDecay(d, w.decay, w.dtBias, a[h], h);
    beta[h] = 1 / (1 + Math.exp(-b[h]));
  }
  return { q, k, v, g, beta };
}

/** out ← RMSNorm(out)·norm ⊙ SiLU(z) per value head (the plain w), in place. */
export function deltaNetGatedNorm(d: DeltaNetConfig, eps: number, norm: Float32Array, out: Float32Array, z: Float32Array): void {
  const { numVHeads, headVDim: dv } = d;
  for (let h = 0; h < numVHeads; h++) {
    const o = out.subarray(h * dv, (h + 1) * dv);
    let ss = 0;
    for (let j = 0; j < dv; j++) ss += o[j] * o[j];
    const inv = 1 / Math.sqrt(ss / dv + eps);
    for (let j = 0; j < dv; j++) o[j] = o[j] * inv * norm[j] * silu(z[h * dv + j]);
  }
}
