import { linearTolerance } from '../testing/tolerances';
import { describe, expect, it } from 'vitest';
import { createBuffer, packParams, readBuffer, STORAGE, UNIFORM, uploadBuffer } from '../gpu/buffers';
import type { Kernel, PipelineCache, Precision, Specialisation } from '../gpu/pipelines';
import { pipelineCache, runKernel, type TestBinding } from '../gpu/run-kernel';
import { f16ArrayToF32, f32ArrayToF16 } from '../formats/halfs';
import { dequantize, quantize } from '../formats/quants';
import { DTYPE_INFO, DTYPES, type DType } from '../formats/types';
import { KERNEL_TYPES, testGPU } from '../testing/gpu';
import {
  chooseDecodeSpec,
  createLinearOp,
  DECODE_SPEC,
  EMULATED_DECODE_SPEC,
  gluPairsRef,
  interleaveRows,
  EMULATED_FEW_TOKENS_SPEC,
  FEW_TOKENS_SPEC,
  EMULATED_PREFILL_SPEC,
  LARGE_PREFILL_SPEC,
  linearConstants,
  linearParams,
  MATMUL_SPECS,
  matmulGrid,
  matmulRef,
  MATVEC_SPECS,
  matvecGrid,
  matvecKernel,
  matvecSubgroupKernel,
  normConstants,
  PREFILL_SPEC,
  prefillKernel,
  type MatvecSpec,
  type PrefillSpec,
  wideConstants,
  wideLoads,
} from './matmul';
import { rmsNormRef } from './rms-norm';
import { readAct, runPass } from '../testing/kernel-helpers';
import { GLU_FN, type GluActivation } from './swiglu';
import { tensorByteLength } from '../formats/dtypes';
import { gpuBytesPerRow, repackForGPU, uploadWeight, uploadWeightParts } from './weights';

// K covers two K-quant super-blocks; N = 37 leaves partial row groups and tiles.
const K = 512;
const N = 37;
const MAX_T = 17;

function random(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (s / 2 ** 32) * 2 - 1;
  }
  return out;
}

// Long enough for the odd-block rows (K = 768) too; a prefix serves K = 512.
const x = random(MAX_T * 768, 1);
const bias = random(N, 2);

interface Layer {
  gpu: Uint8Array; // repacked bytes
  ref: Float32Array; // dequantize() of the same ggml bytes, [N, K]
}
const layers = new Map<string, Layer>();
function layer(dtype: DType, k = K): Layer {
  let l = layers.get(`${dtype} ${k}`);
  if (!l) {
    const bytes = quantize(dtype, random(N * k, 3 + dtype.length));
    layers.set(`${dtype} ${k}`, (l = { gpu: repackForGPU(dtype, bytes, k), ref: dequantize(dtype, bytes, N * k) }));
  }
  return l;
}

/**
 * The kernels under test: the matvec with its shared-memory reduction ('matvec', for devices
 * without subgroups) and with subgroup reductions ('matvec_sg', skipped where the device has no
 * subgroups: SwiftShader's are 4 wide, lavapipe's 8), and the prefill kernels.
 */
type KernelName = 'matvec' | 'matvec_sg' | 'matmul';
const MATVECS = ['matvec', 'matvec_sg'] as const;
const isMatvec = (k: KernelName) => k !== 'matmul';
const kernelOf = (k: KernelName, spec: MatvecSpec | PrefillSpec) => (k === 'matvec' ? matvecKernel : k === 'matvec_sg' ? matvecSubgroupKernel : prefillKernel(spec as PrefillSpec));
/** Skips a test of the subgroup matvec (or in f16) on a device that lacks the feature. */
async function skipUnsupported(kernel: KernelName, precision: Precision, skip: (cond: boolean, note: string) => void): Promise<void> {
  const gpu = await testGPU();
  skip(precision === 'f16' && !gpu.info.f16, 'the device has no shader-f16');
  skip(kernel === 'matvec_sg' && !gpu.info.subgroups, 'the device has no subgroups');
}

/**
 * matvec's bindings 6 and 7: the folded norm's weight (a one-vec4 dummy when it folds none) and the weight
 * bytes again as vec4s (here a copy; the engine binds the same buffer twice).
 */
/** matvec's 16-byte loads where the engine would use them (wideLoads): the word path for the other types and rows. */
const wideOf = (kernel: KernelName, dtype: DType, k = K) => (isMatvec(kernel) ? wideConstants(dtype, k) : {});
const noNorm = (kernel: KernelName, weight: Uint8Array): TestBinding[] => (isMatvec(kernel) ? [{ input: new Float32Array(4) }, { input: weight }] : []);

/** Tests that compile several pipelines: lavapipe compiles slowly (a few seconds each on a busy CPU). */
const SLOW = 300_000;

const maxAbs = (a: Float32Array) => a.reduce((m, v) => Math.max(m, Math.abs(v)), 0);

/**
 * Tolerance. The GPU sums K f32 products (|x|, |w| ≤ 1) in a different order from the f64
 * reference, and rounds dequantised values in f32 (a few ulp per weight): worst case about
 * K · 2⁻²³ · max|x| · max|w| ≈ 6e-5 here, typically √K · 2⁻²⁴. We allow 1e-5 · √K · max|x| ·
 * max|w| (2.3e-4), still three orders below one misplaced or mis-scaled weight (~|x||w| ≈ 0.25).
 * For f16 activations the reference uses the same f16-rounded x, and y is rounded to f16: plus
 * 2⁻¹⁰ relative.
 */
function tolerance(w: Float32Array, precision: Precision, ref: number): number {
  return linearTolerance(K, maxAbs(x), maxAbs(w), precision, ref);
}

async function run(
  kernel: KernelName,
  spec: MatvecSpec | PrefillSpec,
  dtype: DType,
  T: number,
  withBias: boolean,
  precision: Precision = 'f32',
  k = K,
): Promise<{ y: Float32Array; ref: Float32Array; w: Float32Array }> {
  const gpu = await testGPU();
  const { gpu: bytes, ref: w } = layer(dtype, k);
  const xt = x.subarray(0, T * k);
  const xIn = precision === 'f16' ? f32ArrayToF16(xt) : xt;
  const grid = isMatvec(kernel) ? matvecGrid(N, spec as MatvecSpec) : matmulGrid(N, T, spec as PrefillSpec);
  const [out] = await runKernel(
    gpu,
    kernelOf(kernel, spec),
    { precision, constants: { ...linearConstants(spec, dtype, withBias), ...wideOf(kernel, dtype, k) } },
    [
      { input: bytes },
      { input: xIn },
      { output: T * N * (precision === 'f16' ? 2 : 4) },
      { input: withBias ? bias : new Float32Array(1) },
      { uniform: linearParams(dtype, N, k) },
      { uniform: packParams([['u32', T], ['u32', 1]]) },
      ...noNorm(kernel, bytes),
    ],
    grid,
  );
  const y = precision === 'f16' ? f16ArrayToF32(new Uint16Array(out!)) : new Float32Array(out!);
  const xRef = precision === 'f16' ? f16ArrayToF32(xIn as Uint16Array) : xt;
  return { y, ref: matmulRef(xRef, T, k, w, N, withBias ? bias : undefined), w };
}

function expectClose(y: Float32Array, ref: Float32Array, w: Float32Array, precision: Precision = 'f32'): void {
  expect(y.length).toBe(ref.length);
  for (let i = 0; i < y.length; i++) {
    const d = Math.abs(y[i]! - ref[i]!);
    if (!(d <= tolerance(w, precision, ref[i]!))) {
      throw new Error(`y[token ${Math.floor(i / N)}, row ${i % N}] = ${y[i]}, reference ${ref[i]} (off by ${d})`);
    }
  }
}

const describeSpec = (s: object) => Object.entries(s).map(([k, v]) => `${k}=${v}`).join(' ');

/**
 * Every type at the specs a real GPU runs; two (a 32-block and a K-quant type) at the emulated
 * and test-only ones: what differs between specs is the work split and the reduction, the same
 * for every type, and the engine grid runs every type at the emulated specs on every family.
 * LARGE_PREFILL_SPEC is test-only since the H200 showed it slower than PREFILL_SPEC (choosePrefillSpec).
 */
const EMULATED_SPECS: ReadonlyArray<MatvecSpec | PrefillSpec> = [EMULATED_DECODE_SPEC, EMULATED_FEW_TOKENS_SPEC, EMULATED_PREFILL_SPEC, MATMUL_SPECS[2]!, LARGE_PREFILL_SPEC];
/**
 * The specs the epilogue, segment and folded-norm tests run in f16: those a GPU with shader-f16
 * runs. The emulated ones are lavapipe's, and a cold lavapipe compiles some of their f16
 * variants for minutes each (the few-token spec's 8×8 accumulators with the GLU epilogue took
 * over 300 s): the engine's f16 tests on lavapipe run them there, once per type they load.
 */
const f16Spec = (spec: MatvecSpec | PrefillSpec) => spec === DECODE_SPEC || spec === FEW_TOKENS_SPEC || spec === PREFILL_SPEC;
/**
 * The specs the epilogue, segment and folded-norm tests run in f16: f16Spec but the few-token one.
 * Its f16 pipelines over a quantized type take a cold lavapipe 2 to 4 minutes each to compile (its
 * 4 rows × 8 tokens of accumulators, unrolled): seven such cases were 1032 s of this file's 1305 s
 * in a fresh-clone f16 step. The few-token spec runs in f16 in 'f16 activations' (Q4_K with bias)
 * and with F16 weights in the f32 residual stream's folded norm; every epilogue runs at it in
 * f32, and in f16 at the decode and prefill specs: each pair of spec, precision and epilogue is met.
 */
const f16EpilogueSpec = (spec: MatvecSpec | PrefillSpec) => f16Spec(spec) && spec !== FEW_TOKENS_SPEC;
/** The two types (a 32-block and a K-quant one) of the samples below. */
const TWO_TYPES: readonly DType[] = KERNEL_TYPES.filter((d) => d === 'Q8_0' || d === 'Q4_K');
const typesAt = (spec: MatvecSpec | PrefillSpec): readonly DType[] => (EMULATED_SPECS.includes(spec) ? TWO_TYPES : KERNEL_TYPES);

describe('matvec kernel', () => {
  // T = 9 takes several passes over the weights at both MAX_T tested (1 and 8).
  MATVEC_SPECS.forEach((spec, i) => {
    const withBias = i === 1;
    for (const dtype of typesAt(spec)) {
      for (const kernel of MATVECS) {
        it(`${kernel} matches the reference for ${dtype} at ${describeSpec(spec)}${withBias ? ' with bias' : ''}`, async ({ skip }) => {
          await skipUnsupported(kernel, 'f32', skip);
          for (const T of [1, 3, 9]) {
            const { y, ref, w } = await run(kernel, spec, dtype, T, withBias);
            expectClose(y, ref, w);
          }
        });
      }
    }
  });
});

describe('matmul kernel', () => {
  // The tiled kernels and the direct one (EMULATED_PREFILL_SPEC); T = 17 leaves a partial token
  // tile at every spec, N = 37 a partial row tile (and a partial 4-row group in the direct one).
  MATMUL_SPECS.forEach((spec, i) => {
    const withBias = i === 1 || 'THREADS' in spec;
    for (const dtype of typesAt(spec)) {
      it(`matches the reference for ${dtype} at ${describeSpec(spec)}${withBias ? ' with bias' : ''}`, async () => {
        for (const T of [1, 3, 17]) {
          const { y, ref, w } = await run('matmul', spec, dtype, T, withBias);
          expectClose(y, ref, w);
        }
      });
    }
  });
});

describe('rows of an odd number of blocks', () => {
  // Structure-of-arrays rows put the block scales after the quants, two f16 (or four E8M0) per
  // word: an odd block count leaves the last scale word part used. K = 512 has 16 blocks of 32
  // and 2 super-blocks, so here 3 of each (K = 96, 768) at the decode and prefill kernels.
  const oddK = (dtype: DType) => 3 * Math.max(32, DTYPE_INFO[dtype].blockSize);
  const cases: Array<['matvec' | 'matmul', MatvecSpec | PrefillSpec, number]> = [
    ['matvec', MATVEC_SPECS[0]!, 3],
    ['matmul', LARGE_PREFILL_SPEC, 17],
  ];
  for (const precision of ['f32', 'f16'] as const) {
    for (const [kernel, spec, T] of cases) {
      // Only the structure-of-arrays types: the others' rows are their blocks end to end.
      // In f16 the two scale packings alone (two f16 scales per word, four E8M0): the rows are
      // read by the same code whatever the activation type, and each f16 pipeline compiles for
      // seconds on lavapipe.
      const types = KERNEL_TYPES.filter((d) => DTYPE_INFO[d].gpu.streams && (precision === 'f32' || d === 'Q4_0' || d === 'MXFP4'));
      for (const dtype of types) {
        it(`${kernel} matches the reference for ${dtype} rows of 3 blocks at ${describeSpec(spec)}${precision === 'f16' ? ' (f16)' : ''}`, async ({ skip }) => {
          skip(precision === 'f16' && !(await testGPU()).info.f16, 'the device has no shader-f16');
          const r = await run(kernel, spec, dtype, T, false, precision, oddK(dtype));
          expectClose(r.y, r.ref, r.w, precision);
        });
      }
    }
  }
});

describe('16-byte weight loads', () => {
  // The matvec's WIDE path (shaders/lib/dequant_wide.wgsl) runs wherever a wide type's rows are
  // whole vec4s: in the tests above (K = 512) for every wide type but Q3_K and Q6_K, whose rows of
  // 2 super-blocks end mid-vec4 (their scale streams), so here those two at K = 2048 (8
  // super-blocks, as real models' rows), both reductions, the decode spec and one that loops over
  // several groups per thread, f32 and f16. Tolerance: the one above scaled to √2048 (twice K = 512's).
  const WK = 2048;
  const WIDE_TYPES = DTYPES.filter((d) => DTYPE_INFO[d].gpu.wide);
  it('applies to every wide type at K = 2048, to all but Q3_K and Q6_K at K = 512, and to no other type', () => {
    expect(WIDE_TYPES.filter((d) => wideLoads(d, WK))).toEqual(WIDE_TYPES);
    expect(WIDE_TYPES.filter((d) => !wideLoads(d, K))).toEqual(['Q3_K', 'Q6_K']);
    expect(DTYPES.filter((d) => !DTYPE_INFO[d].gpu.wide && wideLoads(d, WK))).toEqual([]);
  });
  for (const precision of ['f32', 'f16'] as const) {
    for (const kernel of MATVECS) {
      // f16 at the decode spec alone: the looping spec's reads are the f32 case's.
      for (const spec of precision === 'f32' ? [DECODE_SPEC, EMULATED_FEW_TOKENS_SPEC] : [DECODE_SPEC]) {
        it(`${kernel} matches the reference for Q3_K and Q6_K at K = ${WK}, ${describeSpec(spec)}${precision === 'f16' ? ' (f16)' : ''}`, async ({ skip }) => {
          await skipUnsupported(kernel, precision, skip);
          for (const dtype of ['Q3_K', 'Q6_K'] as const) {
            const { y, ref, w } = await run(kernel, spec, dtype, spec.MAX_T === 1 ? 1 : 3, false, precision, WK);
            for (let i = 0; i < y.length; i++) {
              const d = Math.abs(y[i]! - ref[i]!);
              if (!(d <= 2 * tolerance(w, precision, ref[i]!))) throw new Error(`${dtype}: y[token ${Math.floor(i / N)}, row ${i % N}] = ${y[i]}, reference ${ref[i]} (off by ${d})`);
            }
          }
        }, SLOW);
      }
    }
  }
});

describe('f16 activations', () => {
  // f16 x in and y out at the specs a GPU with shader-f16 runs (f16Spec). Tolerance: the f32 bound
  // plus the output's own f16 rounding (2^-10 relative, twice the half-ulp for headroom).
  const cases: Array<[KernelName, MatvecSpec | PrefillSpec, number[]]> = [
    // The subgroup matvec (what a device with shader-f16 and subgroups runs) at both specs; the
    // shared-memory reduction at the decode spec only: its reduction does not depend on the
    // activation type, and the f32 tests run it at every spec and type (each f16 pipeline takes
    // seconds to compile on lavapipe).
    ...MATVEC_SPECS.filter(f16Spec).map((s) => ['matvec_sg', s, s.MAX_T === 1 ? [1] : [1, 3, 9]] as [KernelName, MatvecSpec, number[]]),
    ['matvec', MATVEC_SPECS[0]!, [1]],
    ['matmul', PREFILL_SPEC, [17]],
  ];
  // Two types (a 32-block and a K-quant one) at every f16 spec: the f16 activation path is the
  // same code for every type, whose decoding in f16 the engine's f16 grid runs for every type and
  // selfcheck for COVERAGE.emulated.types (both on lavapipe), and a cold lavapipe compiles each
  // f16 pipeline for about 20 s of CPU: this file is the f16 step's longest (91 cases took
  // 1878 s in a fresh-clone run). Selfcheck runs every type in f16 on a GPU that has it.
  cases.forEach(([kernel, spec, tokens], i) => {
    const withBias = i % 2 === 1;
    // The few-token spec at one type (f16EpilogueSpec: each of its quantized f16 pipelines costs minutes).
    for (const dtype of spec === FEW_TOKENS_SPEC ? (['Q4_K'] as const) : TWO_TYPES) {
      it(`${kernel} matches the reference for ${dtype} at ${describeSpec(spec)}${withBias ? ' with bias' : ''} (f16)`, async ({ skip }) => {
        await skipUnsupported(kernel, 'f16', skip);
        for (const T of tokens) {
          const r = await run(kernel, spec, dtype, T, withBias, 'f16');
          expectClose(r.y, r.ref, r.w, 'f16');
        }
      });
    }
  });
});

describe('matvec with a folded RMSNorm', () => {
  // y = W · rmsnorm(x) ⊙ w_norm against rmsNormRef then matmulRef. x is scaled by 40 (sums of
  // squares far from 1, so a missing or misplaced 1 / rms fails) and the norm weights vary.
  // Tolerance: the linear bound on the normed x (|x̂| ≤ √K · max|w_norm|), plus in f16 the
  // output's rounding (the GPU normalises in f32, the reference x̂ too: nothing else is rounded).
  const EPS = 1e-5;
  const xs = x.map((v) => 40 * v);
  const nw = random(K, 21).map((v) => 1 + 0.5 * v);
  MATVEC_SPECS.forEach((spec, i) => {
    const dtype = (['Q4_K', 'Q8_0', 'Q6_K', 'F16'] as DType[])[i]!;
    const kernels = [['f32', 'matvec'], ['f32', 'matvec_sg'], ['f16', 'matvec'], ['f16', 'matvec_sg']] as const;
    for (const [precision, kernel] of kernels.filter(([p]) => p === 'f32' || f16EpilogueSpec(spec))) {
      it(`${kernel} matches rmsNormRef then matmulRef for ${dtype} at ${describeSpec(spec)}${precision === 'f16' ? ' (f16)' : ''}`, async ({ skip }) => {
        await skipUnsupported(kernel, precision, skip);
        const gpu = await testGPU();
        const { gpu: bytes, ref: w } = layer(dtype);
        const f16 = precision === 'f16';
        for (const T of spec.MAX_T === 1 ? [1, 2] : [1, 3, 9]) {
          const xt = xs.subarray(0, T * K);
          const xIn = f16 ? f32ArrayToF16(xt) : xt;
          const xRef = f16 ? f16ArrayToF32(xIn as Uint16Array) : xt;
          const [out] = await runKernel(
            gpu,
            kernelOf(kernel, spec),
            { precision, constants: { ...linearConstants(spec, dtype, true), ...normConstants(EPS), ...wideOf(kernel, dtype) } },
            [
              { input: bytes },
              { input: xIn },
              { output: T * N * (f16 ? 2 : 4) },
              { input: bias },
              { uniform: linearParams(dtype, N, K) },
              { uniform: packParams([['u32', T], ['u32', 1]]) },
              { input: nw },
              { input: bytes },
            ],
            matvecGrid(N, spec),
          );
          const y = f16 ? f16ArrayToF32(new Uint16Array(out!)) : new Float32Array(out!);
          const normed = rmsNormRef(xRef, nw, T, K, EPS);
          const ref = matmulRef(normed, T, K, w, N, bias);
          const tol = 1e-5 * Math.sqrt(K) * maxAbs(normed) * maxAbs(w);
          for (let j = 0; j < ref.length; j++) {
            const d = Math.abs(y[j]! - ref[j]!);
            if (!(d <= tol + (f16 ? Math.abs(ref[j]!) * 2 ** -10 : 0))) throw new Error(`T=${T}: y[${j}] = ${y[j]}, reference ${ref[j]} (off by ${d})`);
          }
        }
      }, SLOW);
    }
  });
});

/**
 * Every matvec and matmul specialisation, with the tokens it runs (one for a one-token matvec) and
 * whether it runs in f16 too: the epilogue and segment tests below run each. In f16 the subgroup
 * matvec alone: the shared-memory one differs only in its reduction, f32 whatever the activations,
 * which its f32 cases run at every spec; each f16 case costs a cold lavapipe about 20 s of
 * compiling, and this file is the f16 step's longest.
 */
const EPILOGUE_CASES: Array<[KernelName, MatvecSpec | PrefillSpec, number, boolean]> = [
  ...MATVECS.flatMap((k) => MATVEC_SPECS.map((s) => [k, s, s.MAX_T === 1 ? 1 : 9, f16EpilogueSpec(s) && k !== 'matvec'] as [KernelName, MatvecSpec, number, boolean])),
  ...MATMUL_SPECS.map((s) => ['matmul', s, MAX_T, f16EpilogueSpec(s)] as [KernelName, PrefillSpec, number, boolean]),
];

describe('the residual epilogue', () => {
  // RESIDUAL adds the layer's output into y (the residual stream): y = r + x · Wᵀ + bias, with r
  // random and large next to the output (×10), past this step's tokens untouched. Tolerance as
  // above (the f32 bound, plus in f16 y's own rounding of r + out).
  const ROTATE: DType[] = ['Q4_K', 'Q8_0', 'F16', 'Q6_K', 'Q4_0', 'F32', 'Q5_K', 'MXFP4'];
  EPILOGUE_CASES.forEach(([kernel, spec, T, engineSpec], i) => {
    const dtype = ROTATE[i % ROTATE.length]!;
    for (const precision of engineSpec ? (['f32', 'f16'] as const) : (['f32'] as const)) {
      it(`${kernel} adds into y as the reference for ${dtype} at ${describeSpec(spec)}${precision === 'f16' ? ' (f16)' : ''}`, async ({ skip }) => {
        await skipUnsupported(kernel, precision, skip);
        const gpu = await testGPU();
        const f16 = precision === 'f16';
        const round = (a: Float32Array) => (f16 ? f16ArrayToF32(f32ArrayToF16(a)) : a);
        const { gpu: bytes, ref: w } = layer(dtype);
        const xRef = round(x.subarray(0, T * K));
        const r = round(random(MAX_T * N, 31).map((v) => 10 * v));
        const grid = isMatvec(kernel) ? matvecGrid(N, spec as MatvecSpec) : matmulGrid(N, T, spec as PrefillSpec);
        const [out] = await runKernel(
          gpu,
          kernelOf(kernel, spec),
          { precision, constants: { ...linearConstants(spec, dtype, true, true), ...wideOf(kernel, dtype) } },
          [
            { input: bytes },
            { input: f16 ? f32ArrayToF16(xRef) : xRef },
            { inout: f16 ? f32ArrayToF16(r) : r },
            { input: bias },
            { uniform: linearParams(dtype, N, K) },
            { uniform: packParams([['u32', T], ['u32', 1]]) },
            ...noNorm(kernel, bytes),
          ],
          grid,
        );
        const y = f16 ? f16ArrayToF32(new Uint16Array(out!)) : new Float32Array(out!);
        const lin = matmulRef(xRef, T, K, w, N, bias);
        for (let j = 0; j < MAX_T * N; j++) {
          const want = j < T * N ? r[j]! + lin[j]! : r[j]!;
          const tol = j < T * N ? tolerance(w, precision, want) : 0;
          if (!(Math.abs(y[j]! - want) <= tol)) throw new Error(`y[token ${Math.floor(j / N)}, row ${j % N}] = ${y[j]}, reference ${want}`);
        }
      }, SLOW);
    }
  });
});

describe('segments', () => {
  // Rows 0..9, 10..23 and 24..36 stored as [T][10] at y[8], [T][14] at y[200], [T][13] at y[500]
  // (q, k and v of a fused projection): each as the reference, everything else in y untouched.
  const SEGMENTS = [{ rows: 10, offset: 8 }, { rows: 14, offset: 200 }, { rows: 13, offset: 500 }];
  const Y = 500 + MAX_T * 13;
  const ROTATE: DType[] = ['Q8_0', 'Q4_K', 'Q6_K', 'F16', 'F32', 'Q4_0', 'Q5_K', 'IQ4_NL'];
  EPILOGUE_CASES.forEach(([kernel, spec, T, engineSpec], i) => {
    const dtype = ROTATE[i % ROTATE.length]!;
    for (const precision of engineSpec ? (['f32', 'f16'] as const) : (['f32'] as const)) {
      it(`${kernel} stores its rows' segments as the reference for ${dtype} at ${describeSpec(spec)}${precision === 'f16' ? ' (f16)' : ''}`, async ({ skip }) => {
        await skipUnsupported(kernel, precision, skip);
        const gpu = await testGPU();
        const f16 = precision === 'f16';
        const round = (a: Float32Array) => (f16 ? f16ArrayToF32(f32ArrayToF16(a)) : a);
        const { gpu: bytes, ref: w } = layer(dtype);
        const xRef = round(x.subarray(0, T * K));
        const grid = isMatvec(kernel) ? matvecGrid(N, spec as MatvecSpec) : matmulGrid(N, T, spec as PrefillSpec);
        const [out] = await runKernel(
          gpu,
          kernelOf(kernel, spec),
          { precision, constants: { ...linearConstants(spec, dtype, true), ...wideOf(kernel, dtype) } },
          [
            { input: bytes },
            { input: f16 ? f32ArrayToF16(xRef) : xRef },
            { output: Y * (f16 ? 2 : 4) },
            { input: bias },
            { uniform: linearParams(dtype, N, K, 0, N, SEGMENTS) },
            { uniform: packParams([['u32', T], ['u32', 1]]) },
            ...noNorm(kernel, bytes),
          ],
          grid,
        );
        const y = f16 ? f16ArrayToF32(new Uint16Array(out!)) : new Float32Array(out!);
        const lin = matmulRef(xRef, T, K, w, N, bias);
        const want = new Float32Array(Y);
        for (let t = 0; t < T; t++) {
          let row = 0;
          for (const { rows, offset } of SEGMENTS) {
            for (let j = 0; j < rows; j++) want[offset + t * rows + j] = lin[t * N + row + j]!;
            row += rows;
          }
        }
        for (let j = 0; j < Y; j++) {
          if (!(Math.abs(y[j]! - want[j]!) <= tolerance(w, precision, want[j]!))) throw new Error(`y[${j}] = ${y[j]}, reference ${want[j]}`);
        }
      }, SLOW);
    }
  });
});

describe('gate/up row pairs', () => {
  // A gate and an up matrix of I = 19 rows each (an odd count: partial row groups), quantised apart
  // and interleaved by interleaveRows as the loader does. GLU (matvec only): y[t, i] =
  // act(gate)·up against matmulRef of each then gluPairsRef, both activations in turn. PAIRS
  // (every kernel): gate rows as [T][19] at y[8], up rows at y[400], the rest of y untouched.
  // Tolerance: g and u are each within the linear bound e; act' ≤ 1.2 for both activations, so
  // act(g)·u is within e · (1.2 |u| + |act(g)| + e), plus in f16 the output's rounding.
  const I = 19;
  const PAIR_Y = 400 + MAX_T * I;
  const ROTATE: DType[] = ['Q4_0', 'Q6_K', 'Q8_0', 'Q4_K', 'F16', 'Q5_K', 'F32'];
  const pairLayer = (dtype: DType) => {
    const [g, u] = [quantize(dtype, random(I * K, 41)), quantize(dtype, random(I * K, 43))];
    return { bytes: repackForGPU(dtype, interleaveRows(g, u, tensorByteLength(dtype, K)), K), wg: dequantize(dtype, g, I * K), wu: dequantize(dtype, u, I * K) };
  };
  EPILOGUE_CASES.forEach(([kernel, spec, T, engineSpec], i) => {
    const dtype = ROTATE[i % ROTATE.length]!;
    const activation: GluActivation = i % 2 === 0 ? 'silu' : 'gelu_tanh';
    for (const precision of engineSpec ? (['f32', 'f16'] as const) : (['f32'] as const)) {
      for (const mode of isMatvec(kernel) ? (['glu', 'pairs'] as const) : (['pairs'] as const)) {
        const what = mode === 'glu' ? `forms ${activation}(gate)·up` : 'stores gate and up rows apart';
        it(`${kernel} ${what} as the reference for ${dtype} at ${describeSpec(spec)}${precision === 'f16' ? ' (f16)' : ''}`, async ({ skip }) => {
          await skipUnsupported(kernel, precision, skip);
          const gpu = await testGPU();
          const f16 = precision === 'f16';
          const round = (a: Float32Array) => (f16 ? f16ArrayToF32(f32ArrayToF16(a)) : a);
          const { bytes, wg, wu } = pairLayer(dtype);
          const xRef = round(x.subarray(0, T * K));
          const grid = isMatvec(kernel) ? matvecGrid(2 * I, spec as MatvecSpec) : matmulGrid(2 * I, T, spec as PrefillSpec);
          const segments = [{ rows: I, offset: 8 }, { rows: I, offset: 400 }];
          const Y = mode === 'glu' ? MAX_T * I : PAIR_Y;
          const [out] = await runKernel(
            gpu,
            kernelOf(kernel, spec),
            { precision, constants: { ...linearConstants(spec, dtype, false, mode === 'glu' ? { glu: activation } : { pairs: true }), ...wideOf(kernel, dtype) } },
            [
              { input: bytes },
              { input: f16 ? f32ArrayToF16(xRef) : xRef },
              { output: Y * (f16 ? 2 : 4) },
              { input: new Float32Array(1) },
              { uniform: linearParams(dtype, 2 * I, K, 0, 2 * I, mode === 'glu' ? undefined : segments) },
              { uniform: packParams([['u32', T], ['u32', 1]]) },
              ...noNorm(kernel, bytes),
            ],
            grid,
          );
          const y = f16 ? f16ArrayToF32(new Uint16Array(out!)) : new Float32Array(out!);
          const [g, u] = [matmulRef(xRef, T, K, wg, I), matmulRef(xRef, T, K, wu, I)];
          const e = tolerance(wg, 'f32', 0);
          const want = new Float32Array(Y);
          const tol = new Float32Array(Y);
          if (mode === 'glu') {
            const paired = new Float32Array(T * 2 * I);
            for (let j = 0; j < T * I; j++) [paired[2 * j], paired[2 * j + 1]] = [g[j]!, u[j]!];
            want.set(gluPairsRef(paired, T, 2 * I, GLU_FN[activation]));
            for (let j = 0; j < T * I; j++) tol[j] = e * (1.2 * Math.abs(u[j]!) + Math.abs(GLU_FN[activation](g[j]!)) + e) + (f16 ? Math.abs(want[j]!) * 2 ** -10 : 0);
          } else {
            for (const [seg, v] of [[segments[0]!, g], [segments[1]!, u]] as const) {
              for (let j = 0; j < T * I; j++) {
                want[seg.offset + j] = v[j]!;
                tol[seg.offset + j] = tolerance(wg, precision, v[j]!);
              }
            }
          }
          for (let j = 0; j < Y; j++) {
            if (!(Math.abs(y[j]! - want[j]!) <= tol[j]!)) throw new Error(`y[${j}] = ${y[j]}, reference ${want[j]}`);
          }
        }, SLOW);
      }
    }
  });
});

describe('the GLU epilogue into an f32 y (f16)', () => {
  // The engine keeps hb f32 in the f16 path: x ×30 gives gate and up of a few hundred, products
  // past f16's 65504, which an f16 y would store as infinity. Both reductions at DECODE_SPEC; the
  // tolerance is the GLU one above with the linear bound scaled by 30, and no output rounding.
  const I = 19;
  for (const kernel of MATVECS) {
    it(`${kernel} stores silu(gate)·up past f16 range as the reference for Q8_0 at ${describeSpec(DECODE_SPEC)} (f16)`, async ({ skip }) => {
      await skipUnsupported(kernel, 'f16', skip);
      const gpu = await testGPU();
      const dtype: DType = 'Q8_0';
      const [gq, uq] = [quantize(dtype, random(I * K, 51)), quantize(dtype, random(I * K, 53))];
      const [wg, wu] = [dequantize(dtype, gq, I * K), dequantize(dtype, uq, I * K)];
      const xh = f32ArrayToF16(x.subarray(0, K).map((v) => 30 * v));
      const packed = repackForGPU(dtype, interleaveRows(gq, uq, tensorByteLength(dtype, K)), K);
      const xRef = f16ArrayToF32(xh);
      const [out] = await runKernel(
        gpu,
        kernelOf(kernel, DECODE_SPEC),
        { precision: 'f16', f32: ['y_t'], constants: { ...linearConstants(DECODE_SPEC, dtype, false, { glu: 'silu' }), ...wideOf(kernel, dtype) } },
        [
          { input: packed },
          { input: xh },
          { output: I * 4 },
          { input: new Float32Array(1) },
          { uniform: linearParams(dtype, 2 * I, K) },
          { uniform: packParams([['u32', 1], ['u32', 1]]) },
          ...noNorm(kernel, packed),
        ],
        matvecGrid(2 * I, DECODE_SPEC),
      );
      const y = new Float32Array(out!);
      const [g, u] = [matmulRef(xRef, 1, K, wg, I), matmulRef(xRef, 1, K, wu, I)];
      const e = 30 * tolerance(wg, 'f32', 0);
      expect(g.some((v, j) => Math.abs(GLU_FN.silu(v) * u[j]!) > 65504)).toBe(true);
      for (let j = 0; j < I; j++) {
        const want = GLU_FN.silu(g[j]!) * u[j]!;
        const tol = e * (1.2 * Math.abs(u[j]!) + Math.abs(GLU_FN.silu(g[j]!)) + e);
        if (!(Math.abs(y[j]! - want) <= tol)) throw new Error(`y[${j}] = ${y[j]}, reference ${want}`);
      }
    }, SLOW);
  }
});

describe('createLinearOp', () => {
  // The engine's default specs, without bias: the kernel tests above already compiled most of them.
  it('computes a layer correctly as the step token count changes between encodes', async () => {
    const gpu = await testGPU();
    const { device } = gpu;
    const dtype: DType = 'Q4_K';
    const bytes = quantize(dtype, random(N * K, 11));
    const w = dequantize(dtype, bytes, N * K);
    const xBuf = uploadBuffer(device, x, STORAGE);
    const yBuf = createBuffer(device, MAX_T * N * 4, STORAGE);
    const step = createBuffer(device, 16, UNIFORM);
    const op = await createLinearOp(
      { device, cache: pipelineCache(device), precision: 'f32' },
      { weight: uploadWeight(device, dtype, bytes, K), dtype, n: N, k: K, x: xBuf, y: yBuf, step, maxTokens: MAX_T },
    );
    // 1 token (decode matvec), 5 (multi-token matvec), 17 (tiled matmul), then back to 1.
    for (const T of [1, 5, MAX_T, 1]) {
      device.queue.writeBuffer(yBuf, 0, new Float32Array(MAX_T * N));
      device.queue.writeBuffer(step, 0, new Uint32Array([T, 1, 0, 0]));
      const encoder = device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      op.encode(pass, T);
      pass.end();
      device.queue.submit([encoder.finish()]);
      const y = new Float32Array(await readBuffer(device, yBuf));
      expectClose(y.subarray(0, T * N), matmulRef(x, T, K, w, N), w);
      // Tokens past this step's T are untouched.
      expect(y.subarray(T * N).every((v) => v === 0)).toBe(true);
    }
    expect(() => op.encode({} as GPUComputePassEncoder, MAX_T + 1)).toThrow(RangeError);
  });
});

describe('decode specs by row count', () => {
  // What chooseDecodeSpec adds to DECODE_SPEC, as the engine runs it: 4 rows per workgroup for a
  // projection of 4400 rows (1100 workgroups), with a folded norm (q/k/v's) and with the norm and
  // the GLU epilogue into an f32 y (gate/up's); 1 row per workgroup is the spec of the 37-row
  // createLinearOp cases. Both reductions in f32, the subgroup one (what f16 devices run) in f16.
  // Tolerance: 1e-4 of the largest output (f32 sums of 512 products of the normed x, ~1e-6 here;
  // one misplaced weight moves an output by ~5e-2 of it), plus in f16 the output's rounding.
  const ROWS = 4400;
  const EPS = 1e-5;
  const xs = x.subarray(0, K).map((v) => 40 * v);
  const nw = random(K, 23).map((v) => 1 + 0.5 * v);
  for (const [kernel, precision] of [['matvec', 'f32'], ['matvec_sg', 'f32'], ['matvec_sg', 'f16']] as const) {
    it(`${kernel} runs the ${ROWS}-row decode spec chooseDecodeSpec picks, with a folded norm, plain and with the GLU epilogue (${precision})`, async ({ skip }) => {
      await skipUnsupported(kernel, precision, skip);
      const gpu = await testGPU();
      const { device } = gpu;
      expect(chooseDecodeSpec(ROWS, device.limits, gpu.info.subgroupMaxSize, true)).toEqual({ WG: 128, ROWS_PER_WG: 4, MAX_T: 1 });
      const act = precision === 'f16' ? 2 : 4;
      const step = uploadBuffer(device, new Uint32Array([1, 1, 0, 0]), UNIFORM);
      const norm = { x: uploadBuffer(device, xs, STORAGE), weight: uploadBuffer(device, nw, STORAGE), eps: EPS, xF32: true };
      const xn = rmsNormRef(xs, nw, 1, K, EPS);
      for (const [dtype, glu] of [['Q4_K', undefined], ['Q4_0', 'silu']] as const) {
        const bytes = quantize(dtype, random(ROWS * K, 29));
        const lin = matmulRef(xn, 1, K, dequantize(dtype, bytes, ROWS * K), ROWS);
        const want = glu ? gluPairsRef(lin, 1, ROWS, GLU_FN[glu]) : lin;
        // y as the engine has it: act for q/k/v, f32 for the GLU product.
        const yF32 = glu !== undefined;
        const y = createBuffer(device, want.length * (yF32 ? 4 : act), STORAGE);
        // The engine's float matvec reads words, not WIDE's 16-byte vectors (LinearSpecs.wide), though both types have them.
        const cache = pipelineCache(device);
        const constants: Record<string, number>[] = [];
        const spy = { get: (k: Kernel, s: Specialisation = {}) => (constants.push(s.constants ?? {}), cache.get(k, s)) } as unknown as PipelineCache;
        const op = await createLinearOp(
          { device, cache: spy, precision },
          { weight: uploadWeight(device, dtype, bytes, K), dtype, n: ROWS, k: K, x: createBuffer(device, K * act, STORAGE), y, yF32, step, maxTokens: 1, norm, glu },
          { subgroups: kernel === 'matvec_sg' },
        );
        expect(wideLoads(dtype, K) && constants.length === 1 && !('WIDE' in constants[0]!)).toBe(true);
        const grids: number[][] = [];
        await runPass(device, (pass) => {
          const dispatch = pass.dispatchWorkgroups.bind(pass);
          pass.dispatchWorkgroups = (gx: number, gy?: number) => (grids.push([gx, gy ?? 1]), dispatch(gx, gy));
          op.encode(pass, 1);
        });
        expect(grids).toEqual([[ROWS / 4, 1]]);
        const got = await readAct(device, y, want.length, yF32 ? 'f32' : precision);
        const top = maxAbs(want);
        for (let i = 0; i < want.length; i++) {
          const tol = 1e-4 * top + (precision === 'f16' && !yF32 ? Math.abs(want[i]!) * 2 ** -10 : 0);
          if (!(Math.abs(got[i]! - want[i]!) <= tol)) throw new Error(`${dtype}${glu ? ' GLU' : ''}: y[${i}] = ${got[i]}, reference ${want[i]}`);
        }
        op.destroy();
      }
    }, SLOW);
  }
});

describe('createLinearOp over a matrix split by rows', () => {
  // 13 rows per part: N = 37 becomes parts of 13, 13 and 11 rows, each dispatch writing its own
  // columns of every token's y row (and adding its rows' bias). Decode matvec (1 token), the
  // multi-token matvec (5) and the prefill kernel (17), with the engine's specs and the emulated
  // ones; the same tolerance as the whole matrix. In f16 (lavapipe, where each pipeline takes
  // seconds to compile) the engine's specs only: every kernel shares store_y, where the offsets are.
  const emulated = { decode: EMULATED_DECODE_SPEC, few: EMULATED_FEW_TOKENS_SPEC, prefill: EMULATED_PREFILL_SPEC };
  const cases = [
    ['f32', 'Q8_0', {}],
    ['f32', 'Q4_K', emulated],
    ['f16', 'Q4_K', {}],
  ] as const;
  for (const [precision, dtype, specs] of cases) {
    it(`writes each part's rows of y for ${dtype} at ${'prefill' in specs ? 'the emulated' : 'the default'} specs (${precision})`, async ({ skip }) => {
      const gpu = await testGPU();
      skip(precision === 'f16' && !gpu.info.f16, 'the device has no shader-f16');
      const { device } = gpu;
      const bytes = quantize(dtype, random(N * K, 17));
      const w = dequantize(dtype, bytes, N * K);
      const parts = uploadWeightParts(device, dtype, bytes, { rows: N, cols: K }, 13 * gpuBytesPerRow(dtype, K));
      expect(parts.map((p) => p.rows)).toEqual([13, 13, 11]);
      const act = precision === 'f16' ? 2 : 4;
      const xBuf = uploadBuffer(device, precision === 'f16' ? f32ArrayToF16(x) : x, STORAGE);
      const xRef = precision === 'f16' ? f16ArrayToF32(f32ArrayToF16(x)) : x;
      const yBuf = createBuffer(device, MAX_T * N * act, STORAGE);
      const biasBuf = uploadBuffer(device, bias, STORAGE);
      const step = createBuffer(device, 16, UNIFORM);
      const op = await createLinearOp(
        { device, cache: pipelineCache(device), precision },
        { weight: parts, dtype, n: N, k: K, bias: biasBuf, x: xBuf, y: yBuf, step, maxTokens: MAX_T },
        specs,
      );
      for (const T of [1, 5, MAX_T]) {
        device.queue.writeBuffer(yBuf, 0, new Uint8Array(yBuf.size));
        device.queue.writeBuffer(step, 0, new Uint32Array([T, 1, 0, 0]));
        const encoder = device.createCommandEncoder();
        const pass = encoder.beginComputePass();
        op.encode(pass, T);
        pass.end();
        device.queue.submit([encoder.finish()]);
        const raw = await readBuffer(device, yBuf);
        const y = precision === 'f16' ? f16ArrayToF32(new Uint16Array(raw)) : new Float32Array(raw);
        expectClose(y.subarray(0, T * N), matmulRef(xRef, T, K, w, N, bias), w, precision);
        expect(y.subarray(T * N).every((v) => v === 0)).toBe(true);
      }
      op.destroy();
      for (const p of parts) p.buffer.destroy();
    });
  }

  it('refuses parts that leave rows out', async () => {
    const { device } = await testGPU();
    const dtype: DType = 'F32';
    const parts = uploadWeightParts(device, dtype, quantize(dtype, random(N * K, 5)), { rows: N, cols: K }, 13 * gpuBytesPerRow(dtype, K));
    const base = { dtype, n: N, k: K, x: createBuffer(device, MAX_T * K * 4, STORAGE), y: createBuffer(device, MAX_T * N * 4, STORAGE), step: createBuffer(device, 16, UNIFORM), maxTokens: MAX_T };
    const ctx = { device, cache: pipelineCache(device), precision: 'f32' as const };
    await expect(createLinearOp(ctx, { ...base, weight: parts.slice(0, 2) })).rejects.toThrow(/parts hold 26 rows/);
    await expect(createLinearOp(ctx, { ...base, weight: [parts[0]!, parts[2]!] })).rejects.toThrow(/does not follow/);
  });
});

describe('the f32 residual stream in the f16 path', () => {
  // In the f16 path the residual stream stays f32 (real models' streams pass 65504): the linear
  // kernels hold y_t at f32 where they add into it, and x_t where they read it unnormed (the
  // matvec's folded norm; an input with no norm before it). The stream here is ×1e5, past f16's
  // range, so an f16 y or x would be ±inf. Tolerance: the f32 bound above, plus 2⁻²³ relative of
  // the stream for y's f32 rounding of r + out; the folded norm's as in its own test.
  const STREAM = 1e5;
  // The tiled matmul stages x as x_t: an f32 x (an input with no norm before it) is staged f32,
  // so a stream past f16's range survives the tile (an f16 tile would hold ±inf).
  for (const spec of [PREFILL_SPEC]) {
    it(`matmul stages an f32 x past f16's range for Q4_0 at ${describeSpec(spec)} (f16)`, async ({ skip }) => {
      const gpu = await testGPU();
      skip(!gpu.info.f16, 'the device has no shader-f16');
      const T = MAX_T;
      const { gpu: bytes, ref: w } = layer('Q4_0');
      const xs = x.subarray(0, T * K).map((v) => STREAM * v);
      const [out] = await runKernel(
        gpu,
        prefillKernel(spec),
        { precision: 'f16', f32: ['x_t', 'y_t'], constants: linearConstants(spec, 'Q4_0', false) },
        [
          { input: bytes },
          { input: xs },
          { output: T * N * 4 },
          { input: new Float32Array(1) },
          { uniform: linearParams('Q4_0', N, K) },
          { uniform: packParams([['u32', T], ['u32', 1]]) },
        ],
        matmulGrid(N, T, spec),
      );
      const y = new Float32Array(out!);
      const ref = matmulRef(xs, T, K, w, N);
      for (let i = 0; i < y.length; i++) expect(Math.abs(y[i]! - ref[i]!)).toBeLessThanOrEqual(STREAM * tolerance(w, 'f32', 0));
    });
  }
  EPILOGUE_CASES.filter(([, , , engineSpec]) => engineSpec).forEach(([kernel, spec, T], i) => {
    const dtype = (['Q8_0', 'F16'] as DType[])[i % 2]!; // cheap to dequantise: the epilogue is under test
    it(`${kernel} adds into an f32 y from f16 x for ${dtype} at ${describeSpec(spec)} (f16)`, async ({ skip }) => {
      await skipUnsupported(kernel, 'f16', skip);
      const gpu = await testGPU();
      const { gpu: bytes, ref: w } = layer(dtype);
      const xRef = f16ArrayToF32(f32ArrayToF16(x.subarray(0, T * K)));
      const r = random(MAX_T * N, 41).map((v) => STREAM * v);
      const grid = isMatvec(kernel) ? matvecGrid(N, spec as MatvecSpec) : matmulGrid(N, T, spec as PrefillSpec);
      const [out] = await runKernel(
        gpu,
        kernelOf(kernel, spec),
        { precision: 'f16', f32: ['y_t'], constants: { ...linearConstants(spec, dtype, true, true), ...wideOf(kernel, dtype) } },
        [
          { input: bytes },
          { input: f32ArrayToF16(xRef) },
          { inout: r },
          { input: bias },
          { uniform: linearParams(dtype, N, K) },
          { uniform: packParams([['u32', T], ['u32', 1]]) },
          ...noNorm(kernel, bytes),
        ],
        grid,
      );
      const y = new Float32Array(out!);
      const lin = matmulRef(xRef, T, K, w, N, bias);
      expect(maxAbs(r)).toBeGreaterThan(65504);
      for (let j = 0; j < MAX_T * N; j++) {
        const want = j < T * N ? r[j]! + lin[j]! : r[j]!;
        const tol = j < T * N ? tolerance(w, 'f32', want) + Math.abs(want) * 2 ** -23 : 0;
        if (!(Math.abs(y[j]! - want) <= tol)) throw new Error(`y[token ${Math.floor(j / N)}, row ${j % N}] = ${y[j]}, reference ${want}`);
      }
    }, SLOW);
  });

  MATVEC_SPECS.filter(f16Spec).forEach((spec, i) => {
    const dtype = (['Q8_0', 'F16'] as DType[])[i % 2]!;
    it(`matvec folds the norm of an f32 stream into f16 y for ${dtype} at ${describeSpec(spec)} (f16)`, async ({ skip }) => {
      const gpu = await testGPU();
      skip(!gpu.info.f16, 'the device has no shader-f16');
      const EPS = 1e-5;
      const { gpu: bytes, ref: w } = layer(dtype);
      const nw = random(K, 23).map((v) => 1 + 0.5 * v);
      for (const T of spec.MAX_T === 1 ? [1, 2] : [3]) {
        const xs = x.subarray(0, T * K).map((v) => STREAM * v);
        const [out] = await runKernel(
          gpu,
          matvecKernel,
          { precision: 'f16', f32: ['x_t'], constants: { ...linearConstants(spec, dtype, true), ...normConstants(EPS), ...wideConstants(dtype, K) } },
          [
            { input: bytes },
            { input: xs },
            { output: T * N * 2 },
            { input: bias },
            { uniform: linearParams(dtype, N, K) },
            { uniform: packParams([['u32', T], ['u32', 1]]) },
            { input: nw },
            { input: bytes },
          ],
          matvecGrid(N, spec),
        );
        const y = f16ArrayToF32(new Uint16Array(out!));
        const normed = rmsNormRef(xs, nw, T, K, EPS);
        const ref = matmulRef(normed, T, K, w, N, bias);
        const tol = 1e-5 * Math.sqrt(K) * maxAbs(normed) * maxAbs(w);
        for (let j = 0; j < ref.length; j++) {
          const d = Math.abs(y[j]! - ref[j]!);
          if (!(d <= tol + Math.abs(ref[j]!) * 2 ** -10)) throw new Error(`T=${T}: y[${j}] = ${y[j]}, reference ${ref[j]} (off by ${d})`);
        }
      }
    }, SLOW);
  });
});
