import { describe, expect, it } from 'vitest';
import { createBuffer, packParams, readBuffer, STORAGE, UNIFORM, uploadBuffer } from '../gpu/buffers';
import type { Precision } from '../gpu/pipelines';
import { runKernel } from '../gpu/run-kernel';
import { f16ArrayToF32, f32ArrayToF16 } from '../formats/halfs';
import { dequantize, quantize } from '../formats/quants';
import type { DType } from '../formats/types';
import { KERNEL_TYPES, testGPU } from '../testing/gpu';
import { actRound, opContext, random, readAct, runPass, shuffled, uploadAct } from '../testing/kernel-helpers';
import {
  createMoeGroupedOp,
  createMoeMatvecOp,
  createMoeSortOp,
  moeSortRef,
  EMULATED_MOE_SPEC,
  MOE_ROUTE_WG,
  MOE_SPEC,
  MOE_SPECS,
  moeMatvecConstants,
  moeMatvecGrid,
  moeMatvecKernel,
  moeMatvecParams,
  moeMatvecRef,
  moeRouteKernel,
  moeRouteRef,
  uploadExpertParts,
  type MoeMatvecSpec,
} from './moe';
import { gpuBytesPerRow, repackForGPU } from './weights';

// 4 experts, top-2 (the fixtures' shape); n = 37 leaves a partial row group; k = 256: one K-quant super-block.
const E = 4;
const USED = 2;
const N = 37;
const KD = 256;
const T = 5;

const counts = (tokens: number) => packParams([['u32', tokens], ['u32', 1]]);
const toAct = (v: Float32Array, precision: Precision) => (precision === 'f16' ? f32ArrayToF16(v) : v);
const fromAct = (buf: ArrayBuffer, precision: Precision) => (precision === 'f16' ? f16ArrayToF32(new Uint16Array(buf)) : new Float32Array(buf));

describe('moe_route kernel', () => {
  const cases: Array<[number, number, boolean]> = [
    [4, 2, true],
    [4, 2, false],
    [60, 4, false], // Qwen1.5-MoE's 60 experts, top-4
    [128, 8, true], // Qwen3-30B-A3B's 128, top-8
    [4, 4, true], // every expert
  ];
  const run = async (experts: number, used: number, norm: boolean, logits: Float32Array, tokens: number, precision: Precision) => {
    const gpu = await testGPU();
    const [ids, weights] = await runKernel(
      gpu,
      moeRouteKernel,
      { precision, constants: { WG: MOE_ROUTE_WG, E: experts, K: used, NORM: norm ? 1 : 0 } },
      [{ input: toAct(logits, precision) }, { output: tokens * used * 4 }, { output: tokens * used * 4 }, { uniform: counts(tokens) }],
      [Math.ceil(tokens / MOE_ROUTE_WG)],
    );
    return { ids: new Uint32Array(ids!), weights: new Float32Array(weights!) };
  };
  const check = async (precision: Precision) => {
    for (const [experts, used, norm] of cases) {
      // 70 tokens: more than one workgroup. Scale 4: peaked enough that top-k matters.
      const tokens = 70;
      const logits = actRound(random(tokens * experts, experts + used, 4), precision);
      // Exact ties in token 0: the lower id must come first, as in the reference.
      logits[1] = logits[2] = logits[3] = 9;
      const got = await run(experts, used, norm, logits, tokens, precision);
      const want = moeRouteRef(logits, tokens, experts, used, norm);
      expect([...got.ids], `${experts} experts, top-${used}`).toEqual([...want.ids]);
      for (let i = 0; i < want.weights.length; i++) expect(Math.abs(got.weights[i]! - want.weights[i]!), `weight ${i}`).toBeLessThan(1e-6);
      if (norm) expect(got.weights.subarray(0, used).reduce((a, b) => a + b, 0)).toBeCloseTo(1, 5);
    }
  };
  it('picks the reference experts and weights (f32; softmax, top-k, renormalised or not, ties to the lower id)', () => check('f32'));
  it('picks the reference experts and weights from f16 logits (f16)', async (ctx) => {
    if (!(await testGPU()).info.f16) ctx.skip();
    await check('f16');
  });
});

interface Stack {
  file: Uint8Array; // ggml bytes
  gpu: Uint8Array;
  ref: Float32Array; // [E][N][KD] dequantised
}
const stacks = new Map<DType, Stack>();
function stack(dtype: DType): Stack {
  let s = stacks.get(dtype);
  if (!s) {
    const bytes = quantize(dtype, random(E * N * KD, 5 + dtype.length));
    stacks.set(dtype, (s = { file: bytes, gpu: repackForGPU(dtype, bytes, KD), ref: dequantize(dtype, bytes, E * N * KD) }));
  }
  return s;
}

// Each token's two experts distinct, every expert used somewhere; weights in (0, 1).
const ids = Uint32Array.from({ length: T * USED }, (_, s) => shuffled(E, 11 + Math.floor(s / USED))[s % USED]!);
const weights = random(T * USED, 12).map((v) => 0.5 + 0.4 * v);

/**
 * Tolerance as the matvec test's: 1e-5 · √k · max|x| · max|w| per dot product (f32 sums in
 * another order, dequantised weights rounded in f32), times the K slots combined; plus 2⁻¹⁰
 * relative for f16 outputs, 2⁻²¹ for f32 ones (a few roundings of sums past 1e5). A wrong expert
 * or row is off by about |x||w| ≈ 0.25 (×30 with the f32 branch's x).
 */
function expectClose(got: Float32Array, want: Float32Array, w: Float32Array, out: Precision, slots: number, what: string, maxX = 1) {
  expect(got.length).toBe(want.length);
  const maxW = w.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  const base = 1e-5 * Math.sqrt(KD) * maxW * slots * maxX;
  for (let i = 0; i < want.length; i++) {
    const tol = base + (out === 'f16' ? Math.abs(want[i]!) * 2 ** -10 + 2e-3 : Math.abs(want[i]!) * 2 ** -21);
    const d = Math.abs(got[i]! - want[i]!);
    if (!(d <= tol)) throw new Error(`${what}: y[${Math.floor(i / N)}, ${i % N}] = ${got[i]}, reference ${want[i]} (off by ${d})`);
  }
}

/**
 * The inputs of a moe_matvec test: x, the shared expert, and y before the dispatch (zero, or the
 * stream it adds into); `branch` is the precision of x, y and the shared output.
 */
function matvecInputs(mode: 'gather' | 'combine', precision: Precision, withShared: boolean, stream: boolean) {
  const xRows = mode === 'gather' ? T : T * USED;
  const branch: Precision = stream ? 'f32' : precision;
  const x = stream ? random(xRows * KD, 7, 30) : actRound(random(xRows * KD, 7), precision);
  const shared = withShared ? { y: stream ? random(T * N, 8, 1e5) : actRound(random(T * N, 8), precision), gate: actRound(random(T, 9, 3), precision) } : undefined;
  const items = mode === 'gather' ? T * USED : T;
  const y0 = stream ? random(items * N, 10, 1e5) : new Float32Array(items * N);
  return { branch, x, shared, items, y0 };
}

/**
 * One moe_matvec dispatch against moeMatvecRef. `stream` (combine): the engine's combine in the
 * f16 path: x (the experts' act(gate)·up) f32 at ×30, past f16's range as products are; the
 * shared expert's output f32 at ×1e5; the sum added into y, an f32 residual stream at ×1e5.
 */
async function runMatvec(mode: 'gather' | 'combine', dtype: DType, spec: MoeMatvecSpec, precision: Precision, withShared: boolean, stream = false) {
  const gpu = await testGPU();
  const { gpu: bytes, ref: w } = stack(dtype);
  const { branch, x, shared, items, y0 } = matvecInputs(mode, precision, withShared, stream);
  const f32 = stream ? ['x_t', 'y_t', ...(withShared ? ['sy_t'] : [])] : [];
  const [out] = await runKernel(
    gpu,
    moeMatvecKernel,
    { precision, f32, constants: moeMatvecConstants(spec, dtype, USED, mode, withShared) },
    [
      { input: bytes },
      { input: toAct(x, branch) },
      { inout: toAct(y0, branch) },
      { input: ids },
      { input: weights },
      { input: shared ? toAct(shared.y, branch) : new Float32Array(1) },
      { input: shared ? toAct(shared.gate, precision) : new Float32Array(1) },
      { uniform: moeMatvecParams(dtype, N, KD, { first: 0, count: E, add: stream }) },
      { uniform: counts(T) },
    ],
    moeMatvecGrid(N, items, spec),
  );
  const want = moeMatvecRef(mode, x, w, ids, weights, { T, K: USED, n: N, k: KD }, shared).map((v, i) => v + y0[i]!);
  if (stream) expect(Math.max(...want.map(Math.abs))).toBeGreaterThan(65504);
  expectClose(fromAct(out!, branch), want, w, branch, mode === 'combine' ? USED : 1, `${mode} ${dtype}`, stream ? 30 : 1);
}

const spec = (s: MoeMatvecSpec) => `WG=${s.WG} ROWS_PER_WG=${s.ROWS_PER_WG}`;

describe('moe_matvec kernel', () => {
  // Every weight type at the spec SwiftShader runs, the others' and both modes on a few.
  it.each(KERNEL_TYPES)('gathers the routed experts\' rows of a %s stack (f32, emulated spec)', (dtype) => runMatvec('gather', dtype, EMULATED_MOE_SPEC, 'f32', false));
  it.each(['F32', 'Q8_0', 'Q4_K', 'Q6_K'] as DType[])(`gathers a %s stack at ${spec(MOE_SPEC)} (f32)`, (dtype) => runMatvec('gather', dtype, MOE_SPEC, 'f32', false));
  for (const s of MOE_SPECS) {
    it.each(['F16', 'Q4_K', 'Q5_0'] as DType[])(`combines the weighted experts of a %s stack at ${spec(s)} (f32)`, (dtype) => runMatvec('combine', dtype, s, 'f32', false));
    it(`adds the sigmoid-gated shared expert in combine mode at ${spec(s)} (f32)`, () => runMatvec('combine', 'Q8_0', s, 'f32', true));
  }
});

describe('moe_matvec kernel (f16)', () => {
  // The combine as the f16 engine runs it: f32 products in, the sum added into the f32 stream.
  for (const s of MOE_SPECS) {
    for (const dtype of ['F32', 'Q4_K', 'Q8_0'] as DType[]) {
      it(`gathers and combines a ${dtype} stack into an f32 stream beyond f16 range at ${spec(s)} (f16)`, async (ctx) => {
        if (!(await testGPU()).info.f16) ctx.skip();
        await runMatvec('gather', dtype, s, 'f16', false);
        await runMatvec('combine', dtype, s, 'f16', true, true);
      });
    }
  }
});

/**
 * A stack split into parts of one expert each (a binding limit of one expert, as gpu-weights.ts
 * uploads a stack larger than the device's): one dispatch per part through createMoeMatvecOp, the
 * gather writing each slot from the part that holds its expert, the combine storing the first
 * part's share (with the shared expert) and adding the others'. Same reference, same tolerance.
 * `stream` (combine): as runMatvec's, the op adding every part's share into the f32 stream (and
 * the shared expert with expert 0's part).
 */
async function runSplitMatvec(mode: 'gather' | 'combine', dtype: DType, spec: MoeMatvecSpec, precision: Precision, withShared: boolean, stream = false) {
  const { device } = await testGPU();
  const { file, ref: w } = stack(dtype);
  const parts = uploadExpertParts(device, dtype, file, { experts: E, n: N, k: KD }, N * gpuBytesPerRow(dtype, KD));
  expect(parts.map((p) => [p.row0, p.rows])).toEqual([0, 1, 2, 3].map((e) => [e * N, N]));
  const { branch, x, shared, items, y0 } = matvecInputs(mode, precision, withShared, stream);
  const y = uploadAct(device, y0, branch);
  const owned = [y, ...parts.map((p) => p.buffer)];
  const upload = (v: ArrayBufferView, usage = STORAGE) => {
    const b = uploadBuffer(device, v, usage);
    owned.push(b);
    return b;
  };
  const act = (v: Float32Array, p = precision) => {
    const b = uploadAct(device, v, p);
    owned.push(b);
    return b;
  };
  try {
    const op = await createMoeMatvecOp(
      opContext(device, precision),
      {
        weight: parts,
        dtype,
        experts: E,
        n: N,
        k: KD,
        used: USED,
        mode,
        x: act(x, branch),
        y,
        ids: upload(ids),
        weights: upload(weights),
        shared: shared && { y: act(shared.y, branch), gate: act(shared.gate), yF32: stream },
        counts: upload(new Uint8Array(counts(T)), UNIFORM),
        maxTokens: T,
        xF32: stream,
        yF32: stream,
        residual: stream,
      },
      spec,
    );
    await runPass(device, (pass) => op.encode(pass, T));
    op.destroy();
    const want = moeMatvecRef(mode, x, w, ids, weights, { T, K: USED, n: N, k: KD }, shared).map((v, i) => v + y0[i]!);
    expectClose(await readAct(device, y, items * N, branch), want, w, branch, mode === 'combine' ? USED : 1, `split ${mode} ${dtype}`, stream ? 30 : 1);
  } finally {
    for (const b of owned) b.destroy();
  }
}

describe('moe_matvec kernel on a stack split by experts', () => {
  for (const s of MOE_SPECS) {
    it(`gathers and combines (with the shared expert) a Q4_K stack in 4 parts at ${spec(s)} (f32)`, async () => {
      await runSplitMatvec('gather', 'Q4_K', s, 'f32', false);
      await runSplitMatvec('combine', 'Q4_K', s, 'f32', true);
    });
    it(`gathers and combines a Q8_0 stack in 4 parts, into an f32 stream, at ${spec(s)} (f16)`, async (ctx) => {
      if (!(await testGPU()).info.f16) ctx.skip();
      await runSplitMatvec('gather', 'Q8_0', s, 'f16', false);
      await runSplitMatvec('combine', 'Q8_0', s, 'f16', true, true);
    });
  }

  it('refuses parts that are not whole experts in order, and one expert over the limit', async () => {
    const { device } = await testGPU();
    const { file } = stack('Q8_0');
    const rowBytes = gpuBytesPerRow('Q8_0', KD);
    expect(() => uploadExpertParts(device, 'Q8_0', file, { experts: E, n: N, k: KD }, N * rowBytes - 1)).toThrow(/one expert is/);
    const parts = uploadExpertParts(device, 'Q8_0', file, { experts: E, n: N, k: KD }, 2 * N * rowBytes);
    expect(parts.map((p) => p.rows)).toEqual([2 * N, 2 * N]);
    const buf = (bytes: number) => createBuffer(device, bytes, STORAGE);
    const base = { dtype: 'Q8_0' as const, experts: E, n: N, k: KD, used: USED, mode: 'gather' as const, x: buf(T * KD * 4), y: buf(T * USED * N * 4), ids: buf(T * USED * 4), weights: buf(T * USED * 4), counts: buf(16), maxTokens: T };
    const ctx = opContext(device, 'f32');
    await expect(createMoeMatvecOp(ctx, { ...base, weight: parts.slice(0, 1) })).rejects.toThrow(/parts hold 2 experts/);
    await expect(createMoeMatvecOp(ctx, { ...base, weight: [parts[1]!, parts[0]!] })).rejects.toThrow(/not the whole experts/);
    for (const p of parts) p.buffer.destroy();
  });
});

/**
 * A prefill's grouped gather: moe_sort orders the slots by expert (against moeSortRef, stable),
 * then moe_grouped computes every slot's row from its expert's rows, 4 slots per pass over them,
 * equal to moe_matvec's gather (moeMatvecRef), on the whole stack and on a stack in 4 parts; with
 * every expert used, and with one expert routed nothing.
 */
async function runGrouped(dtype: DType, spec: MoeMatvecSpec, precision: Precision, split: boolean, slotIds: Uint32Array) {
  const { device } = await testGPU();
  const { file, gpu: whole, ref: w } = stack(dtype);
  const x = actRound(random(T * KD, 7), precision);
  const owned: GPUBuffer[] = [];
  const keep = (b: GPUBuffer) => (owned.push(b), b);
  const parts = split ? uploadExpertParts(device, dtype, file, { experts: E, n: N, k: KD }, N * gpuBytesPerRow(dtype, KD)) : null;
  if (parts) owned.push(...parts.map((p) => p.buffer));
  try {
    const ids = keep(uploadBuffer(device, slotIds));
    const order = keep(createBuffer(device, T * USED * 4, STORAGE));
    const offsets = keep(createBuffer(device, (E + 1) * 4, STORAGE));
    const y = keep(createBuffer(device, T * USED * N * (precision === 'f16' ? 2 : 4), STORAGE));
    const countsBuf = keep(uploadBuffer(device, new Uint8Array(counts(T)), UNIFORM));
    const ctx = opContext(device, precision);
    const sort = await createMoeSortOp(ctx, { ids, order, offsets, counts: countsBuf, experts: E, used: USED, maxTokens: T });
    const weight = parts ?? keep(uploadBuffer(device, whole));
    const op = await createMoeGroupedOp(ctx, { weight, dtype, experts: E, n: N, k: KD, used: USED, x: keep(uploadAct(device, x, precision)), y, order, offsets, maxTokens: T }, spec);
    await runPass(device, (pass) => {
      sort.encode(pass, T);
      op.encode(pass, T);
    });
    op.destroy();
    const sorted = moeSortRef(slotIds, T * USED, E);
    expect(new Uint32Array(await readBuffer(device, order))).toEqual(sorted.order);
    expect(new Uint32Array(await readBuffer(device, offsets))).toEqual(sorted.offsets);
    const want = moeMatvecRef('gather', x, w, slotIds, weights, { T, K: USED, n: N, k: KD });
    expectClose(await readAct(device, y, T * USED * N, precision), want, w, precision, 1, `grouped ${dtype}${split ? ' (4 parts)' : ''}`);
  } finally {
    for (const b of owned) b.destroy();
  }
}

// Expert 3 routed nothing: each token's two experts drawn from the first three.
const idsWithoutLast = Uint32Array.from({ length: T * USED }, (_, s) => shuffled(E - 1, 21 + Math.floor(s / USED))[s % USED]!);

describe('moe_sort and moe_grouped kernels (a prefill\'s grouped gather)', () => {
  for (const s of MOE_SPECS) {
    it(`gather a Q4_K stack grouped by expert, whole and in 4 parts, at ${spec(s)} (f32)`, async () => {
      await runGrouped('Q4_K', s, 'f32', false, ids);
      await runGrouped('Q4_K', s, 'f32', true, idsWithoutLast);
    });
    it(`gather a Q8_0 stack grouped by expert at ${spec(s)} (f16)`, async (ctx) => {
      if (!(await testGPU()).info.f16) ctx.skip();
      await runGrouped('Q8_0', s, 'f16', false, ids);
      await runGrouped('Q8_0', s, 'f16', true, idsWithoutLast);
    });
  }
  it.each(['F32', 'F16', 'Q6_K'] as DType[])('gathers a %s stack grouped by expert (f32, emulated spec)', (dtype) => runGrouped(dtype, EMULATED_MOE_SPEC, 'f32', false, ids));
});
