/**
 * Linear layers y = x · Wᵀ (+ bias) over quantised or float weights: `matvec` for decode (a few
 * tokens, memory bound) and `matmul` for prefill (tiled, compute bound), or on CPU-emulated
 * adapters `matmul_direct` (register-tiled, no workgroup memory). Both dequantise W in
 * registers with `shaders/lib/dequant.wgsl`, take the bindings below from `shaders/lib/linear.wgsl`
 * and read the step's token count from a uniform. A matrix split by rows (larger than one
 * binding: ./weights `uploadWeightParts`) is one dispatch per part, each writing its rows' columns
 * of y (`row0`, `yStride`).
 *
 * Binding layout (every kernel here, group 0):
 *   0  w     storage read   array<u32>        weight rows in the GPU layout (see ./weights)
 *   1  x     storage read   array<vec4<act>>  [maxTokens][k]
 *   2  y     storage rw     array<act>        [maxTokens][yStride]
 *   3  bias  storage read   array<f32>        [yStride] (a 4-byte dummy when the layer has none)
 *   4  p     uniform        Params { k, n, rowWords (u32 words per weight row), row0, yStride, pad × 3 }
 *   5  counts uniform       Step { tokens: T, seqs, pad, pad } (StepBuffers.counts, written per step)
 *   6  norm_w storage read  array<vec4<f32>>  [k / 4] the folded RMSNorm's weight (matvec; the integer-dot one reads array<f32>; a dummy without)
 *   7  w4    storage read   array<vec4<u32>>  binding 0's buffer again, for 16-byte loads (matvec only; read with WIDE)
 */
import dequantLib from '../../shaders/lib/dequant.wgsl';
import dequantWideLib from '../../shaders/lib/dequant_wide.wgsl';
import gluLib from '../../shaders/lib/glu.wgsl';
import linearLib from '../../shaders/lib/linear.wgsl';
import matmulBody from '../../shaders/matmul.wgsl';
import matmulDirectBody from '../../shaders/matmul_direct.wgsl';
import matvecBody from '../../shaders/matvec.wgsl';
import subgroupsLib from '../../shaders/lib/subgroups.wgsl';
import subgroupsOffLib from '../../shaders/lib/subgroups_off.wgsl';
import { packParams, STORAGE, UNIFORM, uploadBuffer, bindBuffers, type BufferRef } from '../gpu/buffers';
import type { Kernel, Precision } from '../gpu/pipelines';
import { DTYPE_INFO, type DType } from '../formats/types';
import { actBytes, describeDispatch, elemBytes, type Op, type OpContext, type OpLabel } from './op';
import { GLU_ACT, type GluActivation } from './swiglu';
import { gpuBytesPerRow, WTYPE, type WeightPart } from './weights';
import { integerDotFits, matvecDotConstants, matvecDotKernelFor } from './matvec-dot';

export { gpuBytesPerRow, repackForGPU, uploadWeight, WTYPE } from './weights';

/** The matvec whose rows' partial sums meet in a shared-memory tree: for devices without subgroups. */
export const matvecKernel: Kernel = { name: 'matvec', source: dequantLib + dequantWideLib + gluLib + linearLib + subgroupsOffLib + matvecBody };
/** The matvec whose rows' partial sums meet by subgroup shuffles (the `subgroups` feature). */
export const matvecSubgroupKernel: Kernel = { name: 'matvec_subgroups', source: 'enable subgroups;\n' + dequantLib + dequantWideLib + gluLib + linearLib + subgroupsLib + matvecBody };

/** The matvec variant for a device: subgroup reductions where it has the feature (unless told not to). */
export function matvecKernelFor(device: GPUDevice, subgroups = true): Kernel {
  return subgroups && device.features.has('subgroups') ? matvecSubgroupKernel : matvecKernel;
}
export const matmulKernel: Kernel = { name: 'matmul', source: dequantLib + gluLib + linearLib + matmulBody };
export const matmulDirectKernel: Kernel = { name: 'matmul_direct', source: dequantLib + gluLib + linearLib + matmulDirectBody };

/** matvec overrides (WTYPE and HAS_BIAS are added per layer). WG / ROWS_PER_WG: a power of two ≥ MAX_T. */
export interface MatvecSpec {
  WG: number;
  ROWS_PER_WG: number;
  /** Tokens per pass over the weights (1..8); more tokens take more passes. */
  MAX_T: number;
}

/** matmul overrides. TILE_M / TM and TILE_N / TN threads; TM, TN ≤ 8; TILE_K a multiple of 4. */
export interface MatmulSpec {
  TILE_M: number;
  TILE_N: number;
  TILE_K: number;
  TM: number;
  TN: number;
}

/**
 * The engine's matvec choices: one token, and a few tokens (≤ MATVEC_MAX_TOKENS) per pass.
 * DECODE_SPEC, 2 rows per workgroup of 128 threads, is the middle of chooseDecodeSpec's choices
 * (DECODE_ROW_SPECS), and the integer-dot matvec's spec. It stays even for the GLU epilogue's row
 * pairs.
 */
export const DECODE_SPEC: MatvecSpec = { WG: 128, ROWS_PER_WG: 2, MAX_T: 1 };
export const FEW_TOKENS_SPEC: MatvecSpec = { WG: 128, ROWS_PER_WG: 4, MAX_T: 8 };
export const MATVEC_MAX_TOKENS = 8;

/**
 * The decode specs chooseDecodeSpec picks from, most rows per workgroup first: 4, 2 (DECODE_SPEC)
 * and 1 rows of 128 threads, so 32 to 128 threads per row.
 */
export const DECODE_ROW_SPECS: readonly MatvecSpec[] = [
  { WG: 128, ROWS_PER_WG: 4, MAX_T: 1 },
  DECODE_SPEC,
  { WG: 128, ROWS_PER_WG: 1, MAX_T: 1 },
];

/**
 * Workgroups a decode matvec aims for. WebGPU does not tell the compute-unit count, so the rule is
 * eight workgroups per SM of the largest GPU in view, a 132-SM H100 or H200 (1056), half the
 * 128-thread workgroups an SM holds: on the H200 the projections of few workgroups ran about twice
 * as long per row as those of many (F16 o, 512 workgroups of 4 rows: 7.3 ns a row; gate_up, 4096:
 * 4 ns; lm_head, 32064: 3.3 ns), their workgroups' loads too few to cover memory latency. So
 * Llama-3.2-1B's o and down (2048 rows) take a row per workgroup, qkv (3072) 2, gate_up (16384)
 * and lm_head 4. Apple's GPUs (up to 80 cores) and desktop ones (20 to 128 SMs or CUs) get at least as
 * many per unit.
 */
export const MATVEC_TARGET_WORKGROUPS = 8 * 132;

/**
 * The decode matvec spec for a projection of `n` rows (of one dispatch: a row part's): the most
 * rows per workgroup that still make MATVEC_TARGET_WORKGROUPS workgroups, else the fewest rows (so
 * a small projection gets as many workgroups as it can). More rows per workgroup recompute the
 * folded norm's sums and re-read x fewer times. A row keeps at least 32 threads (its 16-byte loads
 * span 512 contiguous bytes a trip) and, where the device says how wide its subgroups can be
 * (`subgroupMaxSize`), at least one whole subgroup, so its sum is a subgroup's shuffles; the
 * threads and the reduction's workgroup memory must fit the device's limits; a GLU epilogue takes
 * an even row count (a (gate, up) pair meets in one workgroup). DECODE_SPEC where nothing fits.
 */
export function chooseDecodeSpec(
  n: number,
  limits: Pick<GPUSupportedLimits, 'maxComputeWorkgroupStorageSize' | 'maxComputeInvocationsPerWorkgroup'>,
  subgroupMaxSize = 0,
  glu = false,
): MatvecSpec {
  const usable = DECODE_ROW_SPECS.filter(
    (s) =>
      s.WG <= limits.maxComputeInvocationsPerWorkgroup &&
      // partial [MAX_T][WG], inv_rms [8] and the subgroup counter (shaders/matvec.wgsl)
      4 * (s.WG * s.MAX_T + 9) <= limits.maxComputeWorkgroupStorageSize &&
      s.WG / s.ROWS_PER_WG >= Math.max(32, subgroupMaxSize) &&
      (!glu || s.ROWS_PER_WG % 2 === 0),
  );
  return usable.find((s) => Math.ceil(n / s.ROWS_PER_WG) >= MATVEC_TARGET_WORKGROUPS) ?? usable[usable.length - 1] ?? DECODE_SPEC;
}

/**
 * On CPU-emulated adapters (SwiftShader) a workgroup's barriers and shared-memory reduction cost
 * far more than they save: one row per thread in small workgroups ran a 512×256 F32 mat-vec in
 * 1.5 ms against 82 ms for DECODE_SPEC.
 */
export const EMULATED_DECODE_SPEC: MatvecSpec = { WG: 16, ROWS_PER_WG: 16, MAX_T: 1 };
export const EMULATED_FEW_TOKENS_SPEC: MatvecSpec = { WG: 64, ROWS_PER_WG: 8, MAX_T: 8 };

/**
 * Specialisations the tests run at every weight type and epilogue: every one the engine may choose
 * but DECODE_ROW_SPECS' 4- and 1-row ones, which differ from DECODE_SPEC in ROWS_PER_WG alone
 * (tested through createLinearOp at the rows that pick them).
 */
export const MATVEC_SPECS: readonly MatvecSpec[] = [DECODE_SPEC, FEW_TOKENS_SPEC, EMULATED_DECODE_SPEC, EMULATED_FEW_TOKENS_SPEC];

/**
 * matmul_direct overrides: THREADS per workgroup, each thread 4 weight rows × 8 tokens (fixed in
 * the shader, so the accumulators stay in registers).
 */
export interface DirectMatmulSpec {
  THREADS: number;
}

/** Rows and tokens one matmul_direct thread computes (shaders/matmul_direct.wgsl). */
export const DIRECT_ROWS = 4;
export const DIRECT_TOKENS = 8;

/** A prefill specialisation: of the tiled kernel or of the direct one. */
export type PrefillSpec = MatmulSpec | DirectMatmulSpec;

const isDirect = (spec: MatvecSpec | PrefillSpec): spec is DirectMatmulSpec => 'THREADS' in spec;

// Small tiles: SwiftShader's compile time grows with the tile sizes (seconds per variant at 8 KB
// of workgroup memory), and the tests compile every spec × dtype.
/**
 * The engine's prefill tiles on GPUs: 32 tokens × 64 rows per workgroup, K in steps of 8, 4 × 4
 * outputs per thread (128 threads, 3 KB of workgroup memory: within every device's limits). On an
 * H200 (the first real-GPU bench) LARGE_PREFILL_SPEC's 8 × 8 per thread ran each workgroup's K
 * serially at about 14 ms per 2048 columns whatever the grid: at 128 tokens o (64 workgroups) and
 * gate_up (512) took the same 14 ms, down (K = 8192) 56 ms, so the time is per thread, not per
 * device; a thread here does a quarter of the multiply-adds (and holds a quarter of the
 * accumulators), in twice the workgroups, which the device ran side by side.
 */
export const PREFILL_SPEC: MatmulSpec = { TILE_M: 32, TILE_N: 64, TILE_K: 8, TM: 4, TN: 4 };

/**
 * Larger tiles (PERF.md §3 #6): 64 tokens × 64 rows per workgroup, K in steps of 32, 8 × 8
 * outputs per thread (64 threads). Each weight is dequantised once per 64 tokens instead of once
 * per 32, but on an H200 a workgroup's time grew with its thread's 64 accumulators (see
 * PREFILL_SPEC), so the engine no longer picks it; tested as a specialisation the kernel takes.
 * Workgroup memory: 16 KB in f32, 12 KB with f16 activations (prefillWorkgroupBytes).
 */
export const LARGE_PREFILL_SPEC: MatmulSpec = { TILE_M: 64, TILE_N: 64, TILE_K: 32, TM: 8, TN: 8 };

/** Workgroup memory a tiled spec stages: the x tile as x is (`precision`: f32 where x is the f32 residual stream), the W tile as f32. */
export function prefillWorkgroupBytes(spec: MatmulSpec, precision: Precision): number {
  return spec.TILE_K * (spec.TILE_M * actBytes(precision) + spec.TILE_N * 4);
}

/** The prefill spec for a device: the direct kernel on CPU emulations, else PREFILL_SPEC. */
export function choosePrefillSpec(emulated: boolean): PrefillSpec {
  return emulated ? EMULATED_PREFILL_SPEC : PREFILL_SPEC;
}

/**
 * On CPU-emulated adapters (SwiftShader) the tiled kernel's barriers, workgroup staging and
 * loop-indexed accumulators cost far more than they save: the direct kernel ran the small
 * preset's Q4_K gate (1536×512) and down (512×1536) projections at 128 tokens in 174 and 170 ms
 * against 1312 and 1352 ms for PREFILL_SPEC (see docs/benchmarks.md). THREADS from 4 to 64 were
 * within noise of each other there.
 */
export const EMULATED_PREFILL_SPEC: DirectMatmulSpec = { THREADS: 16 };

/** Prefill tokens per step where the engine is not told (EngineOptions.prefillChunk). */
export const DEFAULT_PREFILL_CHUNK = 128;
export const DISCRETE_PREFILL_CHUNK = 512;

/**
 * The default prefill chunk for a GPU: larger on discrete GPUs, where a 128-token chunk leaves a
 * 64 × 64-tile GEMM of a 4096-row matrix with 128 workgroups, under one per SM on large GPUs, and
 * where the activations of 512 tokens are a small share of memory. The adapter's `type` is known
 * in Chrome with WebGPU developer features; elsewhere an NVIDIA vendor stands for it (NVIDIA
 * makes no integrated WebGPU adapters on desktops).
 */
export function defaultPrefillChunk(info: { type: string; vendor: string }, emulated: boolean): number {
  if (emulated) return DEFAULT_PREFILL_CHUNK;
  return /discrete/i.test(info.type) || /nvidia/i.test(info.vendor) ? DISCRETE_PREFILL_CHUNK : DEFAULT_PREFILL_CHUNK;
}

/** Specialisations the tests run: every one the engine may choose, plus a small tiled one. */
export const MATMUL_SPECS: readonly PrefillSpec[] = [
  LARGE_PREFILL_SPEC,
  PREFILL_SPEC,
  { TILE_M: 16, TILE_N: 16, TILE_K: 16, TM: 2, TN: 2 },
  EMULATED_PREFILL_SPEC,
];

/** The kernel a prefill spec specialises. */
export function prefillKernel(spec: PrefillSpec): Kernel {
  return isDirect(spec) ? matmulDirectKernel : matmulKernel;
}

const isPow2 = (v: number) => Number.isInteger(v) && v > 0 && (v & (v - 1)) === 0;

/** Why a spec cannot work (the shaders assume these), or null when it can. */
export function specProblem(spec: MatvecSpec | PrefillSpec): string | null {
  if (isDirect(spec)) {
    if (!(Number.isInteger(spec.THREADS) && spec.THREADS >= 1 && spec.THREADS <= 256)) return `THREADS must be 1..256, got ${spec.THREADS}`;
    return null;
  }
  if ('WG' in spec) {
    const tpr = spec.WG / spec.ROWS_PER_WG;
    if (!isPow2(tpr)) return `WG / ROWS_PER_WG = ${tpr} threads per row must be a power of two`;
    if (!(spec.MAX_T >= 1 && spec.MAX_T <= 8 && spec.MAX_T <= tpr)) return `MAX_T must be 1..min(8, threads per row), got ${spec.MAX_T}`;
    if (!isPow2(spec.WG)) return `WG must be a power of two (the folded norm's reduction), got ${spec.WG}`;
    return null;
  }
  if (spec.TILE_M % spec.TM !== 0 || spec.TILE_N % spec.TN !== 0) return 'TILE_M and TILE_N must be multiples of TM and TN';
  if (spec.TM > 8 || spec.TN > 8) return `TM and TN must be at most 8, got ${spec.TM} and ${spec.TN}`;
  if (spec.TILE_K % 4 !== 0 || spec.TILE_K <= 0) return `TILE_K must be a positive multiple of 4, got ${spec.TILE_K}`;
  return null;
}

/** Workgroups for matvec over `n` rows: row groups spill into y past 65535. */
export function matvecGrid(n: number, spec: MatvecSpec): [number, number] {
  const groups = Math.ceil(n / spec.ROWS_PER_WG);
  const x = Math.min(groups, 65535);
  return [x, Math.ceil(groups / x)];
}

/** Workgroups for a prefill kernel: x over weight-row tiles, y over token tiles. */
export function matmulGrid(n: number, tokens: number, spec: PrefillSpec): [number, number] {
  if (isDirect(spec)) return [Math.ceil(n / (DIRECT_ROWS * spec.THREADS)), Math.ceil(tokens / DIRECT_TOKENS)];
  return [Math.ceil(n / spec.TILE_N), Math.ceil(tokens / spec.TILE_M)];
}

/** A run of consecutive matrix rows stored as its own [T][rows] matrix at `offset` elements into y. */
export interface LinearSegment {
  rows: number;
  offset: number;
}

/**
 * The static `Params` uniform of a layer with `n` rows of `k` elements of `dtype`; of a part of a
 * split matrix: its rows `n` from matrix row `row0`, into y rows of `yStride` (the matrix's rows);
 * the matrix's rows stored as `segments` (default one: [T][yStride] at y[0]).
 */
export function linearParams(dtype: DType, n: number, k: number, row0 = 0, yStride = n, segments?: readonly LinearSegment[]): ArrayBuffer {
  const segs = segments ?? [{ rows: yStride, offset: 0 }];
  if (segs.length < 1 || segs.length > 3 || segs.reduce((r, s) => r + s.rows, 0) !== yStride) {
    throw new LinearOpError(`linear [${yStride}, ${k}]: segments must be 1..3 runs of its ${yStride} rows`);
  }
  const seg1 = segs.length > 1 ? segs[0]!.rows : yStride;
  const seg2 = segs.length > 2 ? seg1 + segs[1]!.rows : yStride;
  return packParams([
    ['u32', k],
    ['u32', n],
    ['u32', gpuBytesPerRow(dtype, k) / 4],
    ['u32', row0],
    ['u32', yStride],
    ['u32', seg1],
    ['u32', seg2],
    ['u32', segs[0]!.offset],
    ['u32', segs[1]?.offset ?? 0],
    ['u32', segs[2]?.offset ?? 0],
    ['u32', 0],
    ['u32', 0],
  ]);
}

/** How a layer's outputs are stored (shaders/lib/linear.wgsl): plainly, added, or as (gate, up) row pairs. */
export interface LinearEpilogue {
  residual?: boolean;
  /** Rows are interleaved (gate, up) pairs stored apart: gate rows as segment 0, up rows as segment 1. */
  pairs?: boolean;
  /** Rows are interleaved (gate, up) pairs and y receives act(gate)·up, [T][n / 2] (matvec only). */
  glu?: GluActivation;
}

/** Override constants for a layer: the spec plus its weight type, bias flag and epilogue. */
export function linearConstants(spec: MatvecSpec | PrefillSpec, dtype: DType, hasBias: boolean, epi: LinearEpilogue | boolean = {}): Record<string, number> {
  const e = typeof epi === 'boolean' ? { residual: epi } : epi;
  return {
    ...spec,
    WTYPE: WTYPE[dtype],
    HAS_BIAS: hasBias ? 1 : 0,
    ...(e.residual ? { RESIDUAL: 1 } : {}),
    ...(e.pairs ? { PAIRS: 1 } : {}),
    ...(e.glu ? { GLU: 1, ACT: GLU_ACT[e.glu] } : {}),
  };
}

/** TypeScript reference of the GLU epilogue: out[t, i] = act(y[t, 2i]) · y[t, 2i + 1] of a pair-interleaved y [T, n]. */
export function gluPairsRef(y: Float32Array, T: number, n: number, act: (g: number) => number): Float32Array {
  const out = new Float32Array((T * n) / 2);
  for (let t = 0; t < T; t++) for (let i = 0; i < n / 2; i++) out[(t * n) / 2 + i] = act(y[t * n + 2 * i]!) * y[t * n + 2 * i + 1]!;
  return out;
}

/** Interleaves the rows of two [rows, rowBytes] matrices (ggml bytes): a's row i becomes row 2i, b's row 2i + 1. */
export function interleaveRows(a: Uint8Array, b: Uint8Array, rowBytes: number): Uint8Array {
  if (a.length !== b.length || a.length % rowBytes !== 0) throw new LinearOpError(`interleaveRows: ${a.length} and ${b.length} bytes are not equal counts of ${rowBytes}-byte rows`);
  const out = new Uint8Array(a.length * 2);
  for (let r = 0; r < a.length / rowBytes; r++) {
    out.set(a.subarray(r * rowBytes, (r + 1) * rowBytes), 2 * r * rowBytes);
    out.set(b.subarray(r * rowBytes, (r + 1) * rowBytes), (2 * r + 1) * rowBytes);
  }
  return out;
}

/**
 * TypeScript reference: y[t, n] = Σ_k x[t, k] · W[n, k] (+ bias[n]), with `x` [T, K] and `w`
 * [N, K] (e.g. from `dequantize()`), accumulated in f64.
 */
export function matmulRef(x: Float32Array, T: number, K: number, w: Float32Array, N: number, bias?: Float32Array): Float32Array {
  const y = new Float32Array(T * N);
  for (let t = 0; t < T; t++) {
    for (let n = 0; n < N; n++) {
      let s = bias ? bias[n]! : 0;
      for (let k = 0; k < K; k++) s += x[t * K + k]! * w[n * K + k]!;
      y[t * N + n] = s;
    }
  }
  return y;
}

/** Thrown when a linear layer's buffers or dims do not fit together. */
export class LinearOpError extends Error {
  override readonly name = 'LinearOpError';
}

export interface LinearArgs {
  /** From uploadWeight, or a split matrix's row parts (uploadWeightParts): one dispatch each. */
  weight: GPUBuffer | readonly WeightPart[];
  dtype: DType;
  n: number; // output features (weight rows; all parts' together)
  k: number; // input features (a multiple of 8 and of the dtype's block)
  bias?: GPUBuffer; // f32 [n]
  x: GPUBuffer; // act [maxTokens][k] (f32 with xF32)
  y: GPUBuffer; // act [maxTokens][n] (f32 with yF32)
  /** x is f32 at every precision (the residual stream, read unnormed). */
  xF32?: boolean;
  /** y is f32 at every precision (the residual stream, with `residual`). */
  yF32?: boolean;
  step: BufferRef; // uniform, u32 T at offset 0
  maxTokens: number;
  label?: OpLabel;
  /**
   * An RMSNorm folded into the matvec paths (T ≤ MATVEC_MAX_TOKENS): they read the unnormed
   * `norm.x` and scale by `norm.weight` themselves. The prefill path still reads `x`, which the
   * caller fills with the normed input (its norm op) on those steps only.
   */
  norm?: { x: GPUBuffer; weight: GPUBuffer; eps: number; /** norm.x is f32 at every precision (the residual stream). */ xF32?: boolean };
  /** y is the residual stream: the output is added into it (y += x · Wᵀ + bias) instead of stored. */
  residual?: boolean;
  /**
   * The rows are interleaved (gate, up) pairs (engine/gpu-weights.ts). `pairs`: store them apart,
   * as `segments` (gate's, then up's); `glu`: store act(gate)·up into y [maxTokens][n / 2], which
   * only the matvec paths can (T ≤ MATVEC_MAX_TOKENS; the row parts must start at even rows).
   */
  pairs?: boolean;
  glu?: GluActivation;
  /** Where the rows go in y (default all as one [maxTokens][n] at y[0]). */
  segments?: readonly LinearSegment[];
}

const dummies = new WeakMap<GPUDevice, GPUBuffer>();

/**
 * A 16-byte storage buffer standing in for a missing bias or folded norm's weight (the bindings
 * exist either way; the matvec reads norm_w as vec4s, so a binding holds at least one).
 */
function dummyBias(device: GPUDevice): GPUBuffer {
  let b = dummies.get(device);
  if (!b) dummies.set(device, (b = uploadBuffer(device, new Float32Array(4), STORAGE, 'no bias')));
  return b;
}

function check(ctx: OpContext, a: LinearArgs): void {
  const fail = (what: string) => {
    throw new LinearOpError(`linear ${a.dtype} [${a.n}, ${a.k}]: ${what}`);
  };
  if (a.k % 8 !== 0 || a.k % DTYPE_INFO[a.dtype].blockSize !== 0) fail(`k must be a multiple of 8 and of the ${a.dtype} block`);
  if (!(a.n > 0 && a.maxTokens > 0)) fail('n and maxTokens must be positive');
  const need = (buf: GPUBuffer, bytes: number, name: string) => {
    if (buf.size < bytes) fail(`${name} holds ${buf.size} bytes, needs ${bytes}`);
  };
  const parts = partsOf(a);
  parts.forEach((p, i) => {
    if (p.row0 !== (i === 0 ? 0 : parts[i - 1]!.row0 + parts[i - 1]!.rows) || !(p.rows > 0)) fail(`weight part ${i} (rows ${p.row0}..${p.row0 + p.rows}) does not follow the one before`);
    need(p.buffer, p.rows * gpuBytesPerRow(a.dtype, a.k), parts.length > 1 ? `weight part ${i}` : 'weight');
  });
  const last = parts[parts.length - 1]!;
  if (last.row0 + last.rows !== a.n) fail(`the weight parts hold ${last.row0 + last.rows} rows`);
  need(a.x, a.maxTokens * a.k * elemBytes(ctx.precision, a.xF32), 'x');
  const yAct = elemBytes(ctx.precision, a.yF32);
  if (a.glu) {
    if (a.n % 2 !== 0 || a.bias || a.residual || a.segments || a.pairs) fail('a GLU epilogue takes an even row count and no bias, residual, segments or pairs');
    if (parts.some((p) => p.row0 % 2 !== 0)) fail('a GLU epilogue needs every weight part to start at an even row');
    need(a.y, (a.maxTokens * a.n * yAct) / 2, 'y');
  } else {
    if (a.pairs && (a.n % 2 !== 0 || a.segments?.length !== 2 || a.segments.some((s) => s.rows !== a.n / 2))) fail('pairs take an even row count and two segments of half the rows');
    for (const s of a.segments ?? [{ rows: a.n, offset: 0 }]) need(a.y, (s.offset + a.maxTokens * s.rows) * yAct, 'y');
  }
  if (a.bias) need(a.bias, a.n * 4, 'bias');
  if (a.norm) {
    need(a.norm.x, a.maxTokens * a.k * elemBytes(ctx.precision, a.norm.xF32), 'norm.x');
    need(a.norm.weight, a.k * 4, 'norm.weight');
  }
}

/**
 * Whether the matvec reads a layer's quants as 16-byte vectors (WIDE, shaders/lib/dequant_wide.wgsl):
 * for the types that have a 16-byte form (DTypeInfo.gpu.wide) whose rows are whole vec4s, so that
 * every row starts on one (real models' k, multiples of 2048, always are; K-quant rows of an odd
 * or small number of super-blocks, and scale streams that end mid-vec4, may not).
 */
export function wideLoads(dtype: DType, k: number): boolean {
  return DTYPE_INFO[dtype].gpu.wide === true && gpuBytesPerRow(dtype, k) % 16 === 0;
}

/** The matvec override constants of its 16-byte loads (none where wideLoads says no). */
export function wideConstants(dtype: DType, k: number): Record<string, number> {
  return wideLoads(dtype, k) ? { WIDE: 1 } : {};
}

/** The matvec override constants of a folded RMSNorm (none without one). */
export function normConstants(eps: number | undefined): Record<string, number> {
  return eps === undefined ? {} : { NORM: 1, NORM_EPS: eps };
}

/** The row parts of a layer's weight: a whole buffer is one part of all `n` rows. */
function partsOf(a: LinearArgs): readonly WeightPart[] {
  return 'length' in a.weight ? a.weight : [{ buffer: a.weight, row0: 0, rows: a.n }];
}

/** The specialisations a linear op runs at (defaults: the engine's for a real GPU, and subgroups where the device has them). */
/**
 * The specs the engine's linear layers run at: on a CPU-emulated adapter the small ones that suit
 * it (SwiftShader is faster untiled); on a GPU the defaults, chosen per dispatch from its rows and
 * the device (`selfcheck` checks the kernels at exactly these).
 */
export function engineLinearSpecs(ctx: OpContext): LinearSpecs {
  return ctx.emulated ? { decode: EMULATED_DECODE_SPEC, few: EMULATED_FEW_TOKENS_SPEC, prefill: EMULATED_PREFILL_SPEC } : {};
}

export interface LinearSpecs {
  /** Default: chooseDecodeSpec for each dispatch's rows. */
  decode?: MatvecSpec;
  few?: MatvecSpec;
  prefill?: PrefillSpec;
  /** false: the matvec's shared-memory reduction even where the device has subgroups (tests force the fallback). */
  subgroups?: boolean;
  /**
   * true: the float matvec reads the quants as 16-byte vectors where wideLoads allows (WIDE).
   * Off by default: a thread then takes a whole 32-element group, so a subgroup's x and norm_w
   * loads stride 128 bytes a lane (32 cache lines a load instead of 4 to 8 in the word path, whose
   * neighbouring threads take neighbouring 4-element runs). On an H200 the WIDE Q4_0 and Q8_0
   * projections ran at 2.6 and 5% of the copy bandwidth, time independent of their bytes, where
   * the word path's F16 reached 25 to 30% (docs/benchmarks.md). The integer-dot matvec keeps
   * them (it reads x from workgroup memory).
   */
  wide?: boolean;
}

/**
 * A linear layer for every step size: matvec for T ≤ MATVEC_MAX_TOKENS (one pass over W for T = 1
 * and for up to 8 tokens), matmul above (tiled, or direct for a DirectMatmulSpec). Pipelines, the
 * params uniform and bind groups are made here, once; `encode` picks one and dispatches.
 */
export async function createLinearOp(
  ctx: OpContext,
  args: LinearArgs,
  specs: LinearSpecs = {},
): Promise<Op> {
  check(ctx, args);
  const parts = partsOf(args);
  if (parts.length > 1) {
    // One op per part, each writing its rows' columns of y; in one pass they run in order.
    const ops = await Promise.all(parts.map((p) => createPartOp(ctx, args, p, specs)));
    return {
      destroy: () => ops.forEach((op) => op.destroy()),
      encode: (pass, tokens) => ops.forEach((op) => op.encode(pass, tokens)),
    };
  }
  return createPartOp(ctx, args, parts[0]!, specs);
}

/** Whether a layer's one-token steps run the integer dot-product matvec (else the float one). */
export function takesIntegerDot(ctx: OpContext, dtype: DType, k: number, specs: LinearSpecs): boolean {
  const spec = specs.decode ?? DECODE_SPEC;
  return ctx.integerDot === true && spec.MAX_T === 1 && integerDotFits(dtype, k, spec.WG, ctx.device.limits);
}

/** The layer's dispatches over one row part of its weight (the whole matrix when it is not split). */
async function createPartOp(
  ctx: OpContext,
  args: LinearArgs,
  part: WeightPart,
  specs: LinearSpecs,
): Promise<Op> {
  const { device } = ctx;
  const { dtype, k, maxTokens } = args;
  const n = part.rows;
  // One-token steps take the integer dot-product matvec where the context allows it and the layer
  // fits (./matvec-dot.ts: one token per pass, so the few-token steps keep the float matvec); it
  // runs at DECODE_SPEC (what its tests run), the float matvec at the spec chosen for its rows.
  const intDot = takesIntegerDot(ctx, dtype, k, specs);
  const decode = specs.decode ?? (intDot ? DECODE_SPEC : chooseDecodeSpec(n, device.limits, ctx.subgroupMaxSize, args.glu !== undefined));
  const few = specs.few ?? FEW_TOKENS_SPEC;
  const prefill = specs.prefill ?? choosePrefillSpec(ctx.emulated ?? false);
  for (const spec of [decode, few, prefill]) {
    const problem = specProblem(spec);
    if (problem) throw new LinearOpError(`linear spec ${JSON.stringify(spec)}: ${problem}`);
  }
  const { glu } = args;
  if (glu && (decode.ROWS_PER_WG % 2 !== 0 || few.ROWS_PER_WG % 2 !== 0)) throw new LinearOpError('a GLU epilogue needs an even ROWS_PER_WG: a row pair meets in one workgroup');
  const hasBias = args.bias !== undefined;
  const params = uploadBuffer(device, new Uint8Array(linearParams(dtype, n, k, part.row0, args.n, args.segments)), UNIFORM, `linear params ${n}x${k}`);
  const buffers = [part.buffer, args.x, args.y, args.bias ?? dummyBias(device), params, args.step];
  // matvec binds the norm's weight too, and with a folded norm reads the unnormed stream.
  const { norm } = args;
  // and binds the weight again as vec4s (binding 7).
  const matvecBuffers = [...(norm ? [part.buffer, norm.x, ...buffers.slice(2), norm.weight] : [...buffers, dummyBias(device)]), part.buffer];
  // The weight read once (however many tokens), x read and y written per row, the bias once (this
  // part's rows of each: a split layer's parts add up to the whole).
  const weightBytes = n * gpuBytesPerRow(dtype, k) + (hasBias ? n * 4 : 0);
  const yBytes = elemBytes(ctx.precision, args.yF32);

  const matvecK = matvecKernelFor(device, specs.subgroups);
  const dotK = intDot ? matvecDotKernelFor(device, specs.subgroups) : undefined;
  const prepare = async (kernel: Kernel, spec: MatvecSpec | PrefillSpec) => {
    const dot = kernel === dotK;
    const matvec = kernel === matvecK || dot;
    const wide = dot || specs.wide === true ? wideConstants(dtype, k) : {};
    const constants: Record<string, number> = { ...linearConstants(spec, dtype, hasBias, args), ...(matvec ? { ...normConstants(norm?.eps), ...wide } : {}) };
    if (dot) {
      // One token per pass: the kernel has no MAX_T; it sizes its workgroup arrays by k.
      delete constants.MAX_T;
      Object.assign(constants, matvecDotConstants(k));
    }
    // The residual stream is f32 at every precision: x where the kernel reads it (the matvec's
    // folded norm reads norm.x), y where it adds into it.
    const xF32 = matvec && norm ? norm.xF32 : args.xF32;
    const f32 = [...(xF32 ? ['x_t'] : []), ...(args.yF32 ? ['y_t'] : [])];
    const bytes = (rows: number) => weightBytes + rows * (k * elemBytes(ctx.precision, xF32) + (glu ? n / 2 : n) * yBytes);
    const pipeline = await ctx.cache.get(kernel, { precision: ctx.precision, f32, constants });
    const bindGroup = describeDispatch(bindBuffers(device, pipeline, matvec ? matvecBuffers : buffers), args.label, 'linear', bytes);
    return { pipeline, bindGroup };
  };
  const [one, several, tiled] = await Promise.all([
    prepare(dotK ?? matvecK, decode),
    maxTokens > 1 ? prepare(matvecK, few) : undefined,
    maxTokens > MATVEC_MAX_TOKENS && !glu ? prepare(prefillKernel(prefill), prefill) : undefined,
  ]);
  const rowGrid = matvecGrid(n, decode);
  const fewGrid = matvecGrid(n, few);

  return {
    // The shared `no bias` buffer lives as long as its device.
    destroy: () => params.destroy(),
    encode(pass, tokens) {
      if (!(tokens >= 1 && tokens <= maxTokens)) throw new RangeError(`a step of ${tokens} tokens; this layer takes 1..${maxTokens}`);
      if (tokens === 1) {
        pass.setPipeline(one.pipeline);
        pass.setBindGroup(0, one.bindGroup);
        pass.dispatchWorkgroups(...rowGrid);
      } else if (tokens <= MATVEC_MAX_TOKENS) {
        pass.setPipeline(several!.pipeline);
        pass.setBindGroup(0, several!.bindGroup);
        pass.dispatchWorkgroups(...fewGrid);
      } else {
        if (!tiled) throw new RangeError(`a step of ${tokens} tokens; a GLU epilogue takes at most ${MATVEC_MAX_TOKENS}`);
        pass.setPipeline(tiled.pipeline);
        pass.setBindGroup(0, tiled.bindGroup);
        pass.dispatchWorkgroups(...matmulGrid(n, tokens, prefill));
      }
    },
  };
}
