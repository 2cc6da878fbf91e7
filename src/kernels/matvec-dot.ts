/**
 * The integer dot-product decode matvec (shaders/matvec_dot.wgsl, issue #14 part 3): the step's
 * activation quantised to int8 per block of 32 in each workgroup's prologue, dotted with the
 * weights' own quants by `dot4I8Packed` (WGSL's `packed_4x8_integer_dot_product`). Bindings,
 * params and epilogues are the float matvec's (./matmul.ts binds both the same way); the engine
 * picks it for one-token steps where its `integerDot` option is on, the device reports the
 * language feature, the weight type has an integer form (DTypeInfo.gpu.intDot) and the
 * activation fits in workgroup memory (integerDotFits). Off by default until a GPU shows it helps.
 */
import dequantLib from '../../shaders/lib/dequant.wgsl';
import dequantIntLib from '../../shaders/lib/dequant_int.wgsl';
import gluLib from '../../shaders/lib/glu.wgsl';
import linearLib from '../../shaders/lib/linear.wgsl';
import matvecDotBody from '../../shaders/matvec_dot.wgsl';
import subgroupsLib from '../../shaders/lib/subgroups.wgsl';
import subgroupsOffLib from '../../shaders/lib/subgroups_off.wgsl';
import type { Kernel } from '../gpu/pipelines';
import { DTYPE_INFO, type DType } from '../formats/types';

/** The WGSL language feature the kernel needs (navigator.gpu.wgslLanguageFeatures). */
export const INTEGER_DOT_FEATURE = 'packed_4x8_integer_dot_product';

const REQUIRES = `requires ${INTEGER_DOT_FEATURE};\n`;
const body = dequantLib + dequantIntLib + gluLib + linearLib;

/** Rows' partial sums in a shared-memory tree: for devices without subgroups. */
export const matvecDotKernel: Kernel = { name: 'matvec_dot', source: REQUIRES + body + subgroupsOffLib + matvecDotBody };
/** Rows' partial sums by subgroup shuffles (the `subgroups` feature). */
export const matvecDotSubgroupKernel: Kernel = { name: 'matvec_dot_subgroups', source: 'enable subgroups;\n' + REQUIRES + body + subgroupsLib + matvecDotBody };

/** The variant for a device: subgroup reductions where it has the feature (unless told not to). */
export function matvecDotKernelFor(device: GPUDevice, subgroups = true): Kernel {
  return subgroups && device.features.has('subgroups') ? matvecDotSubgroupKernel : matvecDotKernel;
}

/** Elements per quantised activation block (the scale's span; every intDot type's blocks and sub-blocks of 32 line up with it). */
export const X_BLOCK = 32;

/** Workgroup bytes the kernel stages for rows of `k` and `wg` threads: int8s, (d, sum) per block, two f32 per thread, the subgroup counter. */
export function matvecDotWorkgroupBytes(k: number, wg: number): number {
  return k + (k / X_BLOCK) * 8 + 2 * wg * 4 + 4;
}

/**
 * Whether a layer of `dtype` rows of `k` may take the integer matvec at a spec of `wg` threads: the
 * type has an integer form and the token's int8 activation fits in the device's workgroup memory
 * (k = 4096 takes 5 KB; llama 8B's down projection, k = 14336, 18 KB: more than WebGPU's default
 * 16 KiB, within the 32 KiB most GPUs grant). Elsewhere the float matvec runs.
 */
export function integerDotFits(dtype: DType, k: number, wg: number, limits: Pick<GPUSupportedLimits, 'maxComputeWorkgroupStorageSize'>): boolean {
  return DTYPE_INFO[dtype].gpu.intDot === true && k % X_BLOCK === 0 && matvecDotWorkgroupBytes(k, wg) <= limits.maxComputeWorkgroupStorageSize;
}

/** The kernel's override constants beyond the float matvec's: the staged row length. */
export function matvecDotConstants(k: number): Record<string, number> {
  return { XK: k };
}

/** One token's activation as the kernel quantises it: int8 per column, and each block's scale. */
export interface QuantizedActivation {
  q: Int8Array; // [T][K]
  d: Float32Array; // [T][K / 32]
}

/** round() of WGSL: to the nearest integer, ties to even. */
function roundEven(v: number): number {
  const r = Math.round(v);
  return Math.abs(v % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * TypeScript reference of the prologue: each token's x (⊙ `normWeight` when a norm is folded)
 * per block of 32 as d = max|v| / 127 and q = round(v · (1 / d)), in f32 as the kernel computes
 * them (so the int8s match but where the GPU's division rounds otherwise, at most ±1 on a value
 * at a rounding tie).
 */
export function quantizeActivationRef(x: Float32Array, T: number, K: number, normWeight?: Float32Array): QuantizedActivation {
  const f = Math.fround;
  const q = new Int8Array(T * K);
  const d = new Float32Array((T * K) / X_BLOCK);
  const v = new Float32Array(X_BLOCK);
  for (let b = 0; b < (T * K) / X_BLOCK; b++) {
    let amax = 0;
    for (let i = 0; i < X_BLOCK; i++) {
      const c = b * X_BLOCK + i;
      v[i] = normWeight ? f(x[c]! * normWeight[c % K]!) : x[c]!;
      amax = Math.max(amax, Math.abs(v[i]!));
    }
    const db = f(amax / 127);
    const id = db > 0 ? f(1 / db) : 0;
    d[b] = db;
    for (let i = 0; i < X_BLOCK; i++) q[b * X_BLOCK + i] = Math.max(-127, Math.min(127, roundEven(f(v[i]! * id))));
  }
  return { q, d };
}

/**
 * TypeScript reference of the kernel: y[t, n] = (Σ_b d[t, b] · Σ_{c ∈ b} q[t, c] · W[n, c]) ·
 * s_t + bias[n], the quantised activation of quantizeActivationRef dotted (in f64) with the
 * dequantised weights `w` [N, K]; s_t = 1 / √(mean(x_t²) + eps) with a folded norm, else 1.
 */
export function matvecDotRef(
  x: Float32Array,
  T: number,
  K: number,
  w: Float32Array,
  N: number,
  opts: { bias?: Float32Array; norm?: { weight: Float32Array; eps: number } } = {},
): Float32Array {
  const { q, d } = quantizeActivationRef(x, T, K, opts.norm?.weight);
  const y = new Float32Array(T * N);
  for (let t = 0; t < T; t++) {
    let scale = 1;
    if (opts.norm) {
      let ss = 0;
      for (let c = 0; c < K; c++) ss += x[t * K + c]! ** 2;
      scale = 1 / Math.sqrt(ss / K + opts.norm.eps);
    }
    for (let n = 0; n < N; n++) {
      let s = 0;
      for (let b = 0; b < K / X_BLOCK; b++) {
        let sb = 0;
        for (let i = 0; i < X_BLOCK; i++) {
          const c = b * X_BLOCK + i;
          sb += q[t * K + c]! * w[n * K + c]!;
        }
        s += d[(t * K) / X_BLOCK + b]! * sb;
      }
      y[t * N + n] = s * scale + (opts.bias ? opts.bias[n]! : 0);
    }
  }
  return y;
}

/**
 * How far the integer matvec may be from the float one (matmulRef of the unquantised x), row by
 * row: each activation value moves by at most half its block's step d / 2 when rounded to int8,
 * so |Δy[t, n]| ≤ Σ_b (d[t, b] / 2) · Σ_{c ∈ b} |W[n, c]| (times the folded norm's scale). This
 * worst case is what a test against the float reference may allow (plus the float tolerance).
 */
export function quantizationBound(x: Float32Array, T: number, K: number, w: Float32Array, N: number, normWeight?: Float32Array): Float32Array {
  const { d } = quantizeActivationRef(x, T, K, normWeight);
  const out = new Float32Array(T * N);
  for (let t = 0; t < T; t++) {
    for (let n = 0; n < N; n++) {
      let s = 0;
      for (let b = 0; b < K / X_BLOCK; b++) {
        let a = 0;
        for (let i = 0; i < X_BLOCK; i++) a += Math.abs(w[n * K + b * X_BLOCK + i]!);
        s += (d[(t * K) / X_BLOCK + b]! / 2) * a;
      }
      out[t * N + n] = s;
    }
  }
  return out;
}
