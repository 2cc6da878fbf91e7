import { integerDotTolerance } from '../testing/tolerances';
import { describe, expect, it } from 'vitest';
import dequantIntLib from '../../shaders/lib/dequant_int.wgsl';
import { createBuffer, packParams, readBuffer, STORAGE, UNIFORM, uploadBuffer } from '../gpu/buffers';
import type { Precision } from '../gpu/pipelines';
import { pipelineCache, runKernel } from '../gpu/run-kernel';
import { f16ArrayToF32, f32ArrayToF16 } from '../formats/halfs';
import { dequantize, quantize } from '../formats/quants';
import { DTYPE_INFO, DTYPES, tensorByteLength, type DType } from '../formats/types';
import { KERNEL_TYPES, testGPU } from '../testing/gpu';
import { actRound, random } from '../testing/kernel-helpers';
import {
  createLinearOp,
  DECODE_SPEC,
  EMULATED_DECODE_SPEC,
  EMULATED_FEW_TOKENS_SPEC,
  gluPairsRef,
  interleaveRows,
  linearConstants,
  linearParams,
  matmulRef,
  matvecGrid,
  normConstants,
  wideConstants,
  type MatvecSpec,
} from './matmul';
import {
  integerDotFits,
  matvecDotConstants,
  matvecDotKernel,
  matvecDotRef,
  matvecDotSubgroupKernel,
  matvecDotWorkgroupBytes,
  quantizationBound,
  quantizeActivationRef,
} from './matvec-dot';
import { GLU_FN } from './swiglu';
import { gpuBytesPerRow, repackForGPU, uploadWeightParts } from './weights';

// The integer dot-product matvec (shaders/matvec_dot.wgsl) against its reference (the activation
// quantised as the kernel does, then dotted in f64), and against the float reference within the
// int8 rounding's bound. N = 37 rows leaves a partial row group at both specs.
const N = 37;
const INT_TYPES = DTYPES.filter((d) => DTYPE_INFO[d].gpu.intDot);
const x = random(2 * 2048, 1);
const bias = random(2 * N, 2);

type Variant = 'sg' | 'shared';
const kernelOf = (v: Variant) => (v === 'sg' ? matvecDotSubgroupKernel : matvecDotKernel);

async function skipUnsupported(variant: Variant, precision: Precision, skip: (cond: boolean, note: string) => void): Promise<void> {
  const { info } = await testGPU();
  skip(!info.integerDot, 'the device has no packed_4x8_integer_dot_product');
  skip(precision === 'f16' && !info.f16, 'the device has no shader-f16');
  skip(variant === 'sg' && !info.subgroups, 'the device has no subgroups');
}

const layers = new Map<string, { bytes: Uint8Array; gpu: Uint8Array; w: Float32Array }>();
function layer(dtype: DType, k: number, rows = N, seed = 3): { bytes: Uint8Array; gpu: Uint8Array; w: Float32Array } {
  const key = `${dtype} ${k} ${rows} ${seed}`;
  let l = layers.get(key);
  if (!l) {
    const bytes = quantize(dtype, random(rows * k, seed + dtype.length));
    layers.set(key, (l = { bytes, gpu: repackForGPU(dtype, bytes, k), w: dequantize(dtype, bytes, rows * k) }));
  }
  return l;
}

const maxAbs = (a: Float32Array) => a.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
const maxOf = (a: Float32Array) => a.reduce((m, v) => Math.max(m, v), 0);

function dotTolerance(xq: Float32Array, K: number, w: Float32Array, d: Float32Array, scale = 1): number {
  return integerDotTolerance(K, maxAbs(xq), maxAbs(w), maxOf(d), scale);
}

interface Case {
  variant: Variant;
  spec: MatvecSpec;
  dtype: DType;
  K: number;
  T: number;
  precision?: Precision;
  bias?: boolean;
  norm?: { weight: Float32Array; eps: number; xF32?: boolean };
}

/** Runs the kernel on x[0 .. T·K) (scaled by `xScale`) and returns y with its two references. */
async function run(c: Case, xScale = 1): Promise<{ y: Float32Array; ref: Float32Array; float: Float32Array; tol: number; bound: Float32Array }> {
  const gpu = await testGPU();
  const { gpu: bytes, w } = layer(c.dtype, c.K);
  const precision = c.precision ?? 'f32';
  const f16 = precision === 'f16';
  const xF32 = c.norm?.xF32 ?? false;
  const xt = actRound(x.subarray(0, c.T * c.K).map((v) => v * xScale), xF32 ? 'f32' : precision);
  const constants = { ...linearConstants(c.spec, c.dtype, c.bias ?? false), ...normConstants(c.norm?.eps), ...wideConstants(c.dtype, c.K), ...matvecDotConstants(c.K) };
  delete constants.MAX_T;
  const [out] = await runKernel(
    gpu,
    kernelOf(c.variant),
    { precision, f32: xF32 ? ['x_t'] : [], constants },
    [
      { input: bytes },
      { input: f16 && !xF32 ? f32ArrayToF16(xt) : xt },
      { output: c.T * N * (f16 ? 2 : 4) },
      { input: c.bias ? bias : new Float32Array(1) },
      { uniform: linearParams(c.dtype, N, c.K) },
      { uniform: packParams([['u32', c.T], ['u32', 1]]) },
      { input: c.norm?.weight ?? new Float32Array(1) },
      { input: bytes },
    ],
    matvecGrid(N, c.spec),
  );
  const y = f16 ? f16ArrayToF32(new Uint16Array(out!)) : new Float32Array(out!);
  const norm = c.norm && { weight: c.norm.weight, eps: c.norm.eps };
  const ref = matvecDotRef(xt, c.T, c.K, w, N, { bias: c.bias ? bias : undefined, norm });
  const { d } = quantizeActivationRef(xt, c.T, c.K, norm?.weight);
  const xw = norm ? xt.map((v, i) => v * norm.weight[i % c.K]!) : xt;
  let scale = 1;
  if (norm) for (let t = 0; t < c.T; t++) scale = Math.max(scale, 1 / Math.sqrt(xt.subarray(t * c.K, (t + 1) * c.K).reduce((s, v) => s + v * v, 0) / c.K + norm.eps));
  const float = matmulRef(xt, c.T, c.K, w, N, c.bias ? bias : undefined);
  return { y, ref, float, tol: dotTolerance(xw, c.K, w, d, scale), bound: quantizationBound(xt, c.T, c.K, w, N) };
}

function expectWithin(y: Float32Array, want: Float32Array, tol: (i: number) => number, what: string): void {
  expect(y.length).toBe(want.length);
  for (let i = 0; i < y.length; i++) {
    const d = Math.abs(y[i]! - want[i]!);
    if (!(d <= tol(i))) throw new Error(`${what}: y[token ${Math.floor(i / N)}, row ${i % N}] = ${y[i]}, reference ${want[i]} (off by ${d}, allowed ${tol(i)})`);
  }
}

const describeSpec = (s: MatvecSpec) => `WG=${s.WG} ROWS_PER_WG=${s.ROWS_PER_WG}`;
/** Rows of an odd number of blocks, not a multiple of 256 for the 32-blocks (3 blocks or super-blocks). */
const oddK = (dtype: DType) => 3 * Math.max(32, DTYPE_INFO[dtype].blockSize);

describe('the activation quantiser reference', () => {
  it('maps each block of 32 to int8 with d = max|x| / 127, within d / 2 of x, and a zero block to d = 0', () => {
    const v = random(96, 5);
    v.fill(0, 32, 64);
    const { q, d } = quantizeActivationRef(v, 1, 96);
    expect(d[1]).toBe(0);
    expect([...q.subarray(32, 64)].every((e) => e === 0)).toBe(true);
    for (const b of [0, 2]) {
      const block = v.subarray(32 * b, 32 * b + 32);
      expect(d[b]).toBeCloseTo(maxAbs(block) / 127, 7);
      expect(Math.max(...[...q.subarray(32 * b, 32 * b + 32)].map(Math.abs))).toBe(127);
      block.forEach((e, i) => expect(Math.abs(e - d[b]! * q[32 * b + i]!)).toBeLessThanOrEqual(d[b]! / 2 + 1e-7));
    }
    // A folded norm's weights scale the values quantised (a zero weight zeroes its column).
    const nw = new Float32Array(96).fill(2);
    nw[0] = 0;
    const normed = quantizeActivationRef(v, 1, 96, nw);
    expect(normed.d[0]).toBeCloseTo(2 * d[0]!, 6);
    expect(normed.q[0]).toBe(0);
  });

  it('takes every quantised type but the floats, and only rows whose int8s fit in workgroup memory', () => {
    expect(INT_TYPES).toEqual(DTYPES.filter((t) => !['F32', 'F16', 'BF16'].includes(t)));
    // dq_idot has a case for each (a type without one would dot as zero).
    const cased = [...dequantIntLib.matchAll(/case ([A-Z0-9_, ]+):/g)].flatMap((m) => m[1]!.split(',').map((c) => c.trim().replace(/^WT_/, '')));
    expect(new Set(cased.filter((c) => DTYPES.includes(c as DType)))).toEqual(new Set(INT_TYPES));
    const limits = { maxComputeWorkgroupStorageSize: 16384 };
    expect(matvecDotWorkgroupBytes(4096, 128)).toBeLessThanOrEqual(16384);
    expect(integerDotFits('Q4_K', 4096, 128, limits)).toBe(true);
    expect(integerDotFits('Q4_K', 14336, 128, limits)).toBe(false); // llama 8B's down: the float matvec
    expect(integerDotFits('Q4_K', 14336, 128, { maxComputeWorkgroupStorageSize: 32768 })).toBe(true);
    expect(integerDotFits('F16', 4096, 128, limits)).toBe(false);
  });
});

describe('matvec_dot kernel', () => {
  // Every type at the decode spec of real GPUs (subgroup reduction, 16-byte loads where
  // wideLoads allows: all the wide types but Q3_K and Q6_K at K = 512) over 1 and 2 tokens
  // (a second pass re-quantises); then every type on rows of 3 blocks (K = 96 or 768) at the
  // emulated spec with the shared-memory reduction (one thread per row). Against the float
  // reference too, within the rounding bound (quantizationBound: each x̂ within d / 2 of x).
  const cases: Array<[Variant, MatvecSpec, (d: DType) => number]> = [
    ['sg', DECODE_SPEC, () => 512],
    ['shared', EMULATED_DECODE_SPEC, oddK],
  ];
  for (const [variant, spec, kOf] of cases) {
    // Chromium: KERNEL_TYPES' sample (its WebGPU is Node's Dawn and Tint; the arithmetic runs here).
    for (const dtype of KERNEL_TYPES.filter((d) => DTYPE_INFO[d].gpu.intDot)) {
      it(`${variant === 'sg' ? 'with subgroups' : 'shared-memory'} matches its reference for ${dtype} at K = ${kOf(dtype)}, ${describeSpec(spec)}`, async ({ skip }) => {
        await skipUnsupported(variant, 'f32', skip);
        const K = kOf(dtype);
        const r = await run({ variant, spec, dtype, K, T: 2, bias: variant === 'shared' });
        expectWithin(r.y, r.ref, () => r.tol, `${dtype} against matvecDotRef`);
        expectWithin(r.y, r.float, (i) => r.bound[i]! + r.tol, `${dtype} against matmulRef`);
      });
    }
  }

  it('folds the RMSNorm: x ⊙ norm_w quantised, the row scaled by 1 / rms(x), for Q4_K with bias (f32)', async ({ skip }) => {
    await skipUnsupported('sg', 'f32', skip);
    // x ×40: sums of squares far from 1, so a missing or misplaced 1 / rms fails.
    const norm = { weight: random(512, 21).map((v) => 1 + 0.5 * v), eps: 1e-5 };
    const r = await run({ variant: 'sg', spec: DECODE_SPEC, dtype: 'Q4_K', K: 512, T: 2, bias: true, norm }, 40);
    expectWithin(r.y, r.ref, () => r.tol, 'Q4_K with a folded norm');
  });
});

describe('matvec_dot epilogues', () => {
  // GLU (gate, up interleaved) and a residual add, as the engine runs them: the gate/up matrix with
  // its norm folded and act(gate)·up stored, o/down adding into the residual stream. f16 at the
  // decode spec with subgroups only (what f16 devices run): the f32 residual stream x read
  // unnormed by the norm, hb (y) f32; and f16 x added into an f32 y. Tolerance: dotTolerance per
  // output, for the GLU product propagated as matmul.gpu.test.ts's (e·(1.2|u| + |act(g)| + e)).
  const I = 19;
  const gluCases: Array<[Variant, MatvecSpec, DType, Precision]> = [
    ['shared', EMULATED_DECODE_SPEC, 'Q5_K', 'f32'],
    ['sg', DECODE_SPEC, 'Q4_K', 'f16'],
  ];
  for (const [variant, spec, dtype, precision] of gluCases) {
    it(`stores silu(gate)·up with a folded norm for ${dtype} at ${describeSpec(spec)} (${precision})`, async ({ skip }) => {
      await skipUnsupported(variant, precision, skip);
      const gpu = await testGPU();
      const K = 256;
      const g = layer(dtype, K, I, 51);
      const u = layer(dtype, K, I, 53);
      const packed = repackForGPU(dtype, interleaveRows(g.bytes, u.bytes, tensorByteLength(dtype, K)), K);
      const norm = { weight: random(K, 23).map((v) => 1 + 0.5 * v), eps: 1e-5 };
      const xs = x.subarray(0, K).map((v) => 10 * v); // the f32 stream: read as f32 at every precision
      const constants = { ...linearConstants(spec, dtype, false, { glu: 'silu' }), ...normConstants(norm.eps), ...wideConstants(dtype, K), ...matvecDotConstants(K) };
      delete constants.MAX_T;
      const [out] = await runKernel(
        gpu,
        kernelOf(variant),
        { precision, f32: ['x_t', 'y_t'], constants },
        [
          { input: packed },
          { input: xs },
          { output: I * 4 },
          { input: new Float32Array(1) },
          { uniform: linearParams(dtype, 2 * I, K) },
          { uniform: packParams([['u32', 1], ['u32', 1]]) },
          { input: norm.weight },
          { input: packed },
        ],
        matvecGrid(2 * I, spec),
      );
      const y = new Float32Array(out!);
      const [gy, uy] = [matvecDotRef(xs, 1, K, g.w, I, { norm }), matvecDotRef(xs, 1, K, u.w, I, { norm })];
      const paired = new Float32Array(2 * I);
      for (let j = 0; j < I; j++) [paired[2 * j], paired[2 * j + 1]] = [gy[j]!, uy[j]!];
      const want = gluPairsRef(paired, 1, 2 * I, GLU_FN.silu);
      const scale = 1 / Math.sqrt(xs.reduce((s, v) => s + v * v, 0) / K + norm.eps);
      const { d } = quantizeActivationRef(xs, 1, K, norm.weight);
      const e = dotTolerance(xs.map((v, i) => v * norm.weight[i]!), K, g.w, d, scale);
      expectWithin(y, want, (j) => e * (1.2 * Math.abs(uy[j]!) + Math.abs(GLU_FN.silu(gy[j]!)) + e), `${dtype} GLU`);
    });
  }

  it('adds f16 x · Wᵀ + bias into an f32 residual y for Q4_0 at the decode spec (f16)', async ({ skip }) => {
    await skipUnsupported('sg', 'f16', skip);
    const gpu = await testGPU();
    const K = 512;
    const { gpu: bytes, w } = layer('Q4_0', K);
    const xh = f32ArrayToF16(x.subarray(0, K));
    const xr = f16ArrayToF32(xh);
    const r = random(N, 41).map((v) => 1e5 * v); // past f16's range: an f16 y would be ±inf
    const constants = { ...linearConstants(DECODE_SPEC, 'Q4_0', true, true), ...wideConstants('Q4_0', K), ...matvecDotConstants(K) };
    delete constants.MAX_T;
    const [out] = await runKernel(
      gpu,
      matvecDotSubgroupKernel,
      { precision: 'f16', f32: ['y_t'], constants },
      [
        { input: bytes },
        { input: xh },
        { inout: r },
        { input: bias },
        { uniform: linearParams('Q4_0', N, K) },
        { uniform: packParams([['u32', 1], ['u32', 1]]) },
        { input: new Float32Array(1) },
        { input: bytes },
      ],
      matvecGrid(N, DECODE_SPEC),
    );
    const y = new Float32Array(out!);
    const lin = matvecDotRef(xr, 1, K, w, N, { bias });
    const tol = dotTolerance(xr, K, w, quantizeActivationRef(xr, 1, K).d);
    expectWithin(y, lin.map((v, j) => v + r[j]!), (j) => tol + Math.abs(r[j]!) * 2 ** -23, 'Q4_0 residual');
  });
});

describe('createLinearOp with integerDot', () => {
  // The engine's selection: with the context's integerDot a one-token step takes matvec_dot (its
  // result is the quantised reference's, not the float one's: told apart by x ×1 with the int8
  // rounding well above the float tolerance), a 5-token step the float matvec; over a matrix in
  // 3 row parts (13, 13, 11 rows: row0 and y_stride), with bias. Emulated specs where the device
  // is SwiftShader, as the engine picks.
  it('runs one-token steps by integer dot products over each part, and several tokens as floats (Q8_0)', async ({ skip }) => {
    const gpu = await testGPU();
    skip(!gpu.info.integerDot, 'the device has no packed_4x8_integer_dot_product');
    const { device } = gpu;
    const dtype: DType = 'Q8_0';
    const K = 512;
    const { bytes, w } = layer(dtype, K);
    const parts = uploadWeightParts(device, dtype, bytes, { rows: N, cols: K }, 13 * gpuBytesPerRow(dtype, K));
    expect(parts.map((p) => p.rows)).toEqual([13, 13, 11]);
    const emulated = gpu.info.architecture === 'swiftshader' || gpu.info.isFallbackAdapter;
    const specs = emulated ? { decode: EMULATED_DECODE_SPEC, few: EMULATED_FEW_TOKENS_SPEC } : {};
    const xBuf = uploadBuffer(device, x, STORAGE);
    const yBuf = createBuffer(device, 8 * N * 4, STORAGE);
    const biasBuf = uploadBuffer(device, bias, STORAGE);
    const step = createBuffer(device, 16, UNIFORM);
    const op = await createLinearOp(
      { device, cache: pipelineCache(device), precision: 'f32', integerDot: true },
      { weight: parts, dtype, n: N, k: K, bias: biasBuf, x: xBuf, y: yBuf, step, maxTokens: 8 },
      specs,
    );
    for (const T of [1, 5]) {
      device.queue.writeBuffer(yBuf, 0, new Uint8Array(yBuf.size));
      device.queue.writeBuffer(step, 0, new Uint32Array([T, 1, 0, 0]));
      const encoder = device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      op.encode(pass, T);
      pass.end();
      device.queue.submit([encoder.finish()]);
      const y = new Float32Array(await readBuffer(device, yBuf)).subarray(0, T * N);
      const xt = x.subarray(0, T * K);
      const float = matmulRef(xt, T, K, w, N, bias);
      const floatTol = 1e-5 * Math.sqrt(K) * maxAbs(xt) * maxAbs(w);
      if (T === 1) {
        const { d } = quantizeActivationRef(xt, T, K);
        expectWithin(y, matvecDotRef(xt, T, K, w, N, { bias }), () => dotTolerance(xt, K, w, d), 'one token');
        // Not the float matvec: its rounding shows, beyond the float tolerance.
        expect(Math.max(...y.map((v, i) => Math.abs(v - float[i]!)))).toBeGreaterThan(10 * floatTol);
      } else {
        expectWithin(y, float, () => floatTol, 'five tokens');
      }
    }
    op.destroy();
    for (const p of parts) p.buffer.destroy();
  });
});
