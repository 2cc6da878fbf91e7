import { describe, expect, it } from 'vitest';
import { packParams } from '../gpu/buffers';
import type { Precision } from '../gpu/pipelines';
import { runKernel } from '../gpu/run-kernel';
import { f16ArrayToF32, f32ArrayToF16 } from '../formats/halfs';
import { dequantize, quantize } from '../formats/quants';
import { DTYPES, type DType } from '../formats/types';
import { testGPU } from '../testing/gpu';
import { actRound, random, shuffled } from '../testing/kernel-helpers';
import {
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
  type MoeMatvecSpec,
} from './moe';
import { repackForGPU } from './weights';

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
  gpu: Uint8Array;
  ref: Float32Array; // [E][N][KD] dequantised
}
const stacks = new Map<DType, Stack>();
function stack(dtype: DType): Stack {
  let s = stacks.get(dtype);
  if (!s) {
    const bytes = quantize(dtype, random(E * N * KD, 5 + dtype.length));
    stacks.set(dtype, (s = { gpu: repackForGPU(dtype, bytes), ref: dequantize(dtype, bytes, E * N * KD) }));
  }
  return s;
}

// Each token's two experts distinct, every expert used somewhere; weights in (0, 1).
const ids = Uint32Array.from({ length: T * USED }, (_, s) => shuffled(E, 11 + Math.floor(s / USED))[s % USED]!);
const weights = random(T * USED, 12).map((v) => 0.5 + 0.4 * v);

/**
 * Tolerance as the matvec test's: 1e-5 · √k · max|x| · max|w| per dot product (f32 sums in
 * another order, dequantised weights rounded in f32), times the K slots combined; plus 2⁻¹⁰
 * relative for f16 outputs. A wrong expert or row is off by about |x||w| ≈ 0.25.
 */
function expectClose(got: Float32Array, want: Float32Array, w: Float32Array, precision: Precision, slots: number, what: string) {
  expect(got.length).toBe(want.length);
  const maxW = w.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  const base = 1e-5 * Math.sqrt(KD) * maxW * slots;
  for (let i = 0; i < want.length; i++) {
    const tol = base + (precision === 'f16' ? Math.abs(want[i]!) * 2 ** -10 + 2e-3 : 0);
    const d = Math.abs(got[i]! - want[i]!);
    if (!(d <= tol)) throw new Error(`${what}: y[${Math.floor(i / N)}, ${i % N}] = ${got[i]}, reference ${want[i]} (off by ${d})`);
  }
}

async function runMatvec(mode: 'gather' | 'combine', dtype: DType, spec: MoeMatvecSpec, precision: Precision, withShared: boolean) {
  const gpu = await testGPU();
  const { gpu: bytes, ref: w } = stack(dtype);
  const xRows = mode === 'gather' ? T : T * USED;
  const x = actRound(random(xRows * KD, 7), precision);
  const shared = withShared ? { y: actRound(random(T * N, 8), precision), gate: actRound(random(T, 9, 3), precision) } : undefined;
  const items = mode === 'gather' ? T * USED : T;
  const [out] = await runKernel(
    gpu,
    moeMatvecKernel,
    { precision, constants: moeMatvecConstants(spec, dtype, USED, mode, withShared) },
    [
      { input: bytes },
      { input: toAct(x, precision) },
      { output: items * N * (precision === 'f16' ? 2 : 4) },
      { input: ids },
      { input: weights },
      { input: shared ? toAct(shared.y, precision) : new Float32Array(1) },
      { input: shared ? toAct(shared.gate, precision) : new Float32Array(1) },
      { uniform: moeMatvecParams(dtype, N, KD) },
      { uniform: counts(T) },
    ],
    moeMatvecGrid(N, items, spec),
  );
  const want = moeMatvecRef(mode, x, w, ids, weights, { T, K: USED, n: N, k: KD }, shared);
  expectClose(fromAct(out!, precision), want, w, precision, mode === 'combine' ? USED : 1, `${mode} ${dtype}`);
}

const spec = (s: MoeMatvecSpec) => `WG=${s.WG} ROWS_PER_WG=${s.ROWS_PER_WG}`;

describe('moe_matvec kernel', () => {
  // Every weight type at the spec SwiftShader runs, the others' and both modes on a few.
  it.each(DTYPES)('gathers the routed experts\' rows of a %s stack (f32, emulated spec)', (dtype) => runMatvec('gather', dtype, EMULATED_MOE_SPEC, 'f32', false));
  it.each(['F32', 'Q8_0', 'Q4_K', 'Q6_K'] as DType[])(`gathers a %s stack at ${spec(MOE_SPEC)} (f32)`, (dtype) => runMatvec('gather', dtype, MOE_SPEC, 'f32', false));
  for (const s of MOE_SPECS) {
    it.each(['F16', 'Q4_K', 'Q5_0'] as DType[])(`combines the weighted experts of a %s stack at ${spec(s)} (f32)`, (dtype) => runMatvec('combine', dtype, s, 'f32', false));
    it(`adds the sigmoid-gated shared expert in combine mode at ${spec(s)} (f32)`, () => runMatvec('combine', 'Q8_0', s, 'f32', true));
  }
});

describe('moe_matvec kernel (f16)', () => {
  for (const s of MOE_SPECS) {
    for (const dtype of ['F32', 'Q4_K', 'Q8_0'] as DType[]) {
      it(`gathers and combines a ${dtype} stack at ${spec(s)} (f16)`, async (ctx) => {
        if (!(await testGPU()).info.f16) ctx.skip();
        await runMatvec('gather', dtype, s, 'f16', false);
        await runMatvec('combine', dtype, s, 'f16', true);
      });
    }
  }
});
