/**
 * The kernel half of `selfcheck`: each kernel the engine runs, built as the engine builds it on this
 * device (engineOpContext, engineLinearSpecs, the ops' default specialisations: subgroups where
 * the adapter has them, the decode rows and prefill tiles chosen from its limits, integer dot
 * products where asked for and offered), run on seeded data and compared with its TypeScript
 * reference within the tolerance its tests use (testing/tolerances.ts).
 */
import { createBuffer, packParams, STORAGE, UNIFORM, uploadBuffer } from '../gpu/buffers';
import type { Precision } from '../gpu/pipelines';
import { dequantize, quantize } from '../formats/quants';
import { DTYPES, type DType } from '../formats/types';
import { addRef, createAddOp } from '../kernels/add';
import { attentionRef } from '../kernels/attention-ref';
import { createAttentionOp, type AttentionMode } from '../kernels/attention';
import { createEmbedOp, embedRef } from '../kernels/embed';
import { createLinearOp, engineLinearSpecs, matmulRef, takesIntegerDot } from '../kernels/matmul';
import { matvecDotRef, quantizeActivationRef } from '../kernels/matvec-dot';
import type { Op, OpContext } from '../kernels/op';
import { createRmsNormOp, rmsNormRef } from '../kernels/rms-norm';
import { createRopeOp, ropeRef } from '../kernels/rope';
import { causalConvSiluRef, createCausalConvSiluOp, createDeltaRuleOp } from '../kernels/delta-net';
import { createDeltaChunkOp, DELTA_CHUNK, deltaChunkScratch, deltaRuleChunkedRef } from '../kernels/delta-net-chunked';
import { createShortConvOp, shortConvRef } from '../kernels/short-conv';
import { createMamba2ScanOp } from '../kernels/mamba2';
import { createMamba2ChunkOp, MAMBA2_CHUNK, mamba2ScanChunkedRef } from '../kernels/mamba2-chunked';
import { deltaNetConvDim, mamba2ConvDim, type DeltaNetConfig, type Mamba2Config } from '../model/config';
import { createSoftcapOp, softcapRef } from '../kernels/softcap';
import { createSwigluOp, swigluRef } from '../kernels/swiglu';
import { uploadWeight } from '../kernels/weights';
import { makePagedBatch, type SeqSpec } from '../testing/attention-batch';
import { actRound, maxRelDiff, random, readAct, runPass, uploadAct } from '../testing/kernel-helpers';
import { integerDotTolerance, KERNEL_TOLERANCE, linearTolerance } from '../testing/tolerances';

/** One comparison: the largest error found and what its tests allow. */
export interface Measured {
  name: string;
  maxError: number;
  tolerance: number;
  /** What else went wrong (a greedy token, a row count): the check fails whatever its error. */
  problem?: string;
}

export interface KernelCheckEnv {
  ctx: OpContext;
  precision: Precision;
  coverage: Coverage;
}

/**
 * What a run covers: everything on a GPU; on a CPU emulator, whose compiler takes seconds a
 * pipeline, one weight type per decode path (as the Chromium kernel tests' sample), head dim 64
 * alone, and the models whose `emulated` is set (model-checks.ts).
 */
export interface Coverage {
  /** Weight types the linear and embedding checks run. */
  types: readonly DType[];
  /** Head dims of the attention checks. */
  headDims: readonly number[];
  /** Whether the models marked for emulators are the only ones run. */
  emulatedModels: boolean;
}

export const COVERAGE: Record<'gpu' | 'emulated', Coverage> = {
  gpu: { types: DTYPES, headDims: [64, 128], emulatedModels: false },
  emulated: { types: ['F16', 'Q8_0', 'Q4_0', 'IQ4_NL', 'Q4_K', 'Q6_K'], headDims: [64], emulatedModels: true },
};

export interface KernelCheck {
  name: string;
  run(env: KernelCheckEnv): Promise<Measured[]>;
}


function maxAbs(a: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]!));
  return m;
}

/** Runs `op` over `tokens` in one pass, then frees it. */
async function runOp(ctx: OpContext, op: Op, tokens: number): Promise<void> {
  try {
    await runPass(ctx.device, (pass) => op.encode(pass, tokens));
  } finally {
    op.destroy();
  }
}

const free = (buffers: GPUBuffer[]) => buffers.forEach((b) => b.destroy());

/**
 * y = Wx through createLinearOp at the engine's specs: one token (the decode matvec, or matvec_dot
 * with integer dot products), 4 tokens (the few-token matvec) and 20 (the prefill matmul), each
 * weight type. Errors are beyond f16's rounding of y (linearTolerance's relative part), so one
 * figure per case compares with the f32 bound.
 */
const linear: KernelCheck = {
  name: 'linear',
  async run({ ctx, precision, coverage }) {
    const { device } = ctx;
    const [K, N] = [512, 300];
    const out: Measured[] = [];
    for (const dtype of coverage.types) {
      const bytes = quantize(dtype, random(N * K, 3 + dtype.length, 1));
      const w = dequantize(dtype, bytes, N * K);
      const weight = uploadWeight(device, dtype, bytes, K);
      // One-token steps twice where the device has integer dot products: the float matvec (the
      // engine's default) and matvec_dot (its integerDot option).
      const float = { ...ctx, integerDot: false };
      const dotToo = takesIntegerDot(ctx, dtype, K, engineLinearSpecs(ctx));
      const runs: Array<[number, OpContext]> = [[1, float], ...(dotToo ? [[1, ctx] as [number, OpContext]] : []), [4, ctx], [20, ctx]];
      for (const [T, opCtx] of runs) {
        const x = actRound(random(T * K, 11 + T), precision);
        const buffers = [uploadAct(device, x, precision), createBuffer(device, T * N * (precision === 'f16' ? 2 : 4), STORAGE), uploadBuffer(device, new Uint32Array([T, 1, 0, 0]), UNIFORM)];
        const [xb, yb, step] = buffers as [GPUBuffer, GPUBuffer, GPUBuffer];
        const op = await createLinearOp(opCtx, { weight, dtype, n: N, k: K, x: xb, y: yb, step, maxTokens: T }, engineLinearSpecs(opCtx));
        await runOp(opCtx, op, T);
        const y = await readAct(device, yb, T * N, precision);
        free(buffers);
        const dot = T === 1 && takesIntegerDot(opCtx, dtype, K, engineLinearSpecs(opCtx));
        const path = T === 1 ? (dot ? 'decode, int8 dot' : 'decode') : T <= 8 ? 'few tokens' : 'prefill';
        if (dot) {
          const ref = matvecDotRef(x, T, K, w, N);
          const tol = integerDotTolerance(K, maxAbs(x), maxAbs(w), maxAbs(quantizeActivationRef(x, T, K).d));
          out.push({ name: `${dtype} ${path}`, maxError: beyondF16(y, ref, precision), tolerance: tol });
        } else {
          const ref = matmulRef(x, T, K, w, N);
          out.push({ name: `${dtype} ${path}`, maxError: beyondF16(y, ref, precision), tolerance: linearTolerance(K, maxAbs(x), maxAbs(w), 'f32', 0) });
        }
      }
      weight.destroy();
    }
    return out;
  },
};

/** Largest |y − ref| less f16's rounding of the output (2⁻¹⁰ of |ref|) where activations are f16; NaN propagates. */
function beyondF16(y: Float32Array, ref: Float32Array, precision: Precision): number {
  let worst = 0;
  for (let i = 0; i < ref.length; i++) {
    const d = Math.abs(y[i]! - ref[i]!) - (precision === 'f16' ? Math.abs(ref[i]!) * 2 ** -10 : 0);
    if (Number.isNaN(d)) return NaN;
    worst = Math.max(worst, d);
  }
  return worst;
}

// Batches as the engine steps them: decode steps of one token per sequence (one across a page
// boundary, one long enough for several splits and their combine), and a ragged prefill step (a
// decoding sequence, a fresh 5-token prompt, an 11-token chunk across a page boundary).
const DECODE: SeqSpec[] = [
  { len: 37, fresh: 1 },
  { len: 5, fresh: 1 },
  { len: 70, fresh: 1 },
];
const LONG: SeqSpec[] = [{ len: 700, fresh: 1 }];
const MIXED: SeqSpec[] = [
  { len: 37, fresh: 1 },
  { len: 5, fresh: 5 },
  { len: 70, fresh: 11 },
];

/** Paged attention at the engine's defaults, both modes, head dims 64 and 128 (GQA 4:1), and a long decode (splits and their combine). */
const attention: KernelCheck = {
  name: 'attention',
  async run({ ctx, precision, coverage }) {
    const out: Measured[] = [];
    const cases: Array<[string, SeqSpec[], AttentionMode, number]> = [
      ['decode d64', DECODE, 'decode', 64],
      ['prefill d64', MIXED, 'prefill', 64],
      ['decode 700 keys d64', LONG, 'decode', 64],
      ['decode d128', DECODE, 'decode', 128],
      ['prefill d128', MIXED, 'prefill', 128],
    ];
    for (const [name, seqs, mode, headDim] of cases.filter((c) => coverage.headDims.includes(c[3]))) {
      out.push({ name, maxError: await attentionError(ctx, precision, seqs, mode, headDim), tolerance: KERNEL_TOLERANCE.attention[precision] });
    }
    return out;
  },
};

async function attentionError(ctx: OpContext, precision: Precision, seqs: SeqSpec[], mode: AttentionMode, headDim: number): Promise<number> {
  const { device } = ctx;
  const [nHeads, nKv, pageSize] = [8, 2, 16];
  const maxPagesPerSeq = Math.max(...seqs.map((s) => Math.ceil(s.len / pageSize)));
  const b = makePagedBatch({ seqs, nHeads, nKv, headDim, pageSize, maxPagesPerSeq, seed: headDim + seqs.length });
  const [q, kCache, vCache] = [b.q, b.kCache, b.vCache].map((a) => actRound(a, precision)) as [Float32Array, Float32Array, Float32Array];
  const n = b.T * nHeads * headDim;
  const buffers = [
    uploadAct(device, q, precision),
    uploadAct(device, kCache, precision),
    uploadAct(device, vCache, precision),
    createBuffer(device, n * (precision === 'f16' ? 2 : 4), STORAGE),
    ...[b.positions, b.tokenSeq, b.blockTable, b.lastToken].map((a) => uploadBuffer(device, a)),
    uploadBuffer(device, b.counts, UNIFORM),
  ];
  const [qb, kb, vb, ob, positions, tokenSeq, blockTable, lastToken, counts] = buffers as GPUBuffer[];
  const op = await createAttentionOp(ctx, {
    q: qb!, kCache: kb!, vCache: vb!, out: ob!, positions: positions!, tokenSeq: tokenSeq!, blockTable: blockTable!, lastToken: lastToken!, counts: counts!,
    nHeads, nKv, headDim, pageSize, maxTokens: b.T, maxSeqs: seqs.length, maxPagesPerSeq,
  });
  try {
    await runPass(device, (pass) => op.encode(pass, b.T, mode, Math.max(...seqs.map((s) => s.len))));
  } finally {
    op.destroy();
  }
  const got = await readAct(device, ob!, n, precision);
  free(buffers);
  const want = attentionRef({
    q,
    keys: b.keys.map((k) => actRound(k, precision)),
    values: b.values.map((v) => actRound(v, precision)),
    tokenSeq: b.tokenSeq,
    positions: b.positions,
    nHeads,
    nKv,
    headDim,
  });
  return maxRelDiff(got, want);
}

/** RMSNorm of 5 rows of 1000 (the engine's default workgroup). */
const rmsNorm: KernelCheck = {
  name: 'rms_norm',
  async run({ ctx, precision }) {
    const { device } = ctx;
    const [rows, n, eps] = [5, 1000, 1e-6];
    const x = actRound(random(rows * n, 21, 2), precision);
    const w = random(n, 22, 2);
    const buffers = [uploadAct(device, x, precision), uploadBuffer(device, w, STORAGE), createBuffer(device, x.length * 4, STORAGE)];
    const op = await createRmsNormOp(ctx, { x: buffers[0]!, weight: buffers[1]!, y: buffers[2]!, n, maxTokens: rows, eps });
    await runOp(ctx, op, rows);
    const got = await readAct(device, buffers[2]!, x.length, precision);
    free(buffers);
    return [{ name: `${rows}×${n}`, maxError: maxRelDiff(got, actRound(rmsNormRef(x, w, rows, n, eps), precision)), tolerance: KERNEL_TOLERANCE.rmsNorm[precision] }];
  },
};

/** RoPE of q and k in both pair layouts, positions up to 4096. */
const rope: KernelCheck = {
  name: 'rope',
  async run({ ctx, precision }) {
    const { device } = ctx;
    const [nHeads, nKv, headDim, T] = [8, 2, 64, 5];
    const positions = new Uint32Array([0, 1, 17, 1000, 4095]);
    const invFreq = Float32Array.from({ length: headDim / 2 }, (_, i) => 1 / 10000 ** ((2 * i) / headDim));
    const out: Measured[] = [];
    for (const style of ['neox', 'interleaved'] as const) {
      const q = actRound(random(T * nHeads * headDim, 31), precision);
      const k = actRound(random(T * nKv * headDim, 32), precision);
      const buffers = [uploadAct(device, q, precision), uploadAct(device, k, precision), uploadBuffer(device, positions), uploadBuffer(device, invFreq, STORAGE)];
      const op = await createRopeOp(ctx, { q: buffers[0]!, k: buffers[1]!, positions: buffers[2]!, invFreq: buffers[3]!, nHeads, nKv, headDim, style });
      await runOp(ctx, op, T);
      const [gq, gk] = [await readAct(device, buffers[0]!, q.length, precision), await readAct(device, buffers[1]!, k.length, precision)];
      free(buffers);
      const err = Math.max(
        maxRelDiff(gq, actRound(ropeRef(q.slice(), positions, nHeads, headDim, invFreq, style), precision)),
        maxRelDiff(gk, actRound(ropeRef(k.slice(), positions, nKv, headDim, invFreq, style), precision)),
      );
      out.push({ name: style, maxError: err, tolerance: KERNEL_TOLERANCE.rope[precision] });
    }
    return out;
  },
};

/** The embedding gather of each weight type (a row each of 4 tokens, one repeated). */
const embed: KernelCheck = {
  name: 'embed',
  async run({ ctx, precision, coverage }) {
    const { device } = ctx;
    const [vocab, n] = [64, 512];
    const ids = [3, 0, 63, 3];
    const out: Measured[] = [];
    for (const dtype of coverage.types) {
      const table = quantize(dtype, random(vocab * n, 41 + dtype.length));
      const buffers = [uploadBuffer(device, new Uint32Array(ids)), uploadWeight(device, dtype, table, n), createBuffer(device, ids.length * n * 4, STORAGE)];
      const op = await createEmbedOp(ctx, { tokens: buffers[0]!, table: buffers[1]!, x: buffers[2]!, dtype, n, vocab });
      await runOp(ctx, op, ids.length);
      const got = await readAct(device, buffers[2]!, ids.length * n, precision);
      free(buffers);
      out.push({ name: dtype, maxError: maxRelDiff(got, actRound(embedRef(dtype, table, vocab, n, ids), precision)), tolerance: KERNEL_TOLERANCE.embed[precision] });
    }
    return out;
  },
};

/** The elementwise kernels: act(gate)·up in both activations, the residual add, the logit soft-cap. */
const elementwise: KernelCheck = {
  name: 'elementwise',
  async run({ ctx, precision }) {
    const { device } = ctx;
    const out: Measured[] = [];
    const [T, n] = [3, 1000];
    for (const activation of ['silu', 'gelu_tanh'] as const) {
      const gate = actRound(random(T * n, 51, 4), precision);
      const up = actRound(random(T * n, 52, 4), precision);
      const buffers = [uploadAct(device, gate, precision), uploadAct(device, up, precision), createBuffer(device, T * n * 4, STORAGE)];
      const layout = { n, gateStride: n, upStride: n, gateOffset: 0, upOffset: 0 };
      const op = await createSwigluOp(ctx, { ...layout, gate: buffers[0]!, up: buffers[1]!, out: buffers[2]!, activation });
      await runOp(ctx, op, T);
      const got = await readAct(device, buffers[2]!, T * n, precision);
      free(buffers);
      out.push({ name: `glu ${activation}`, maxError: maxRelDiff(got, actRound(swigluRef(gate, up, T, layout, activation), precision)), tolerance: KERNEL_TOLERANCE.swiglu[precision] });
    }
    {
      const [x, y] = [actRound(random(T * n, 53), precision), actRound(random(T * n, 54), precision)];
      const buffers = [uploadAct(device, x, precision), uploadAct(device, y, precision)];
      const op = await createAddOp(ctx, { x: buffers[0]!, y: buffers[1]!, n, scale: 0.25 });
      await runOp(ctx, op, T);
      const got = await readAct(device, buffers[0]!, T * n, precision);
      free(buffers);
      out.push({ name: 'add', maxError: maxRelDiff(got, actRound(addRef(x, y, 0.25), precision)), tolerance: KERNEL_TOLERANCE.add[precision] });
    }
    {
      // The soft-cap runs on the f32 logits whatever the activations are (the engine's head).
      const x = random(T * n, 55, 60);
      const buffers = [uploadBuffer(device, x, STORAGE)];
      const op = await createSoftcapOp({ ...ctx, precision: 'f32' }, { x: buffers[0]!, n, cap: 30 });
      await runOp(ctx, op, T);
      const got = await readAct(device, buffers[0]!, T * n, 'f32');
      free(buffers);
      out.push({ name: 'softcap', maxError: maxRelDiff(got, softcapRef(x, 30)), tolerance: KERNEL_TOLERANCE.softcap.f32 });
    }
    return out;
  },
};

/**
 * LFM2's gated short convolution: one step of a 5-token row and a 1-token row over nonzero states
 * (3 taps), y and the advanced states against the reference.
 */
const shortConv: KernelCheck = {
  name: 'short_conv',
  async run({ ctx, precision }) {
    const { device } = ctx;
    const [n, taps, lastToken, rowSlot] = [1000, 3, [4, 5], [1, 0]];
    const bcx = actRound(random(6 * 3 * n, 61, 2), precision);
    const w = random(n * taps, 62);
    const initial = random(2 * (taps - 1) * n, 63);
    const u32 = (xs: number[]) => uploadBuffer(device, Uint32Array.from(xs), STORAGE);
    const buffers = [uploadAct(device, bcx, precision), uploadBuffer(device, w, STORAGE), uploadBuffer(device, initial, STORAGE), createBuffer(device, 6 * n * 4, STORAGE), u32(lastToken), u32(rowSlot), uploadBuffer(device, Uint32Array.from([6, 2, 0, 0]), UNIFORM)];
    const [bcxBuf, wBuf, state, y, last, slot, counts] = buffers as [GPUBuffer, GPUBuffer, GPUBuffer, GPUBuffer, GPUBuffer, GPUBuffer, GPUBuffer];
    const op = await createShortConvOp(ctx, { bcx: bcxBuf, weight: wBuf, state, ckpt: 2, y, lastToken: last, rowSlot: slot, counts, n, taps });
    try {
      await runPass(device, (pass) => op.encode(pass, 2));
    } finally {
      op.destroy();
    }
    const got = await readAct(device, y, 6 * n, precision);
    free(buffers);
    const states = [0, 1].map((s) => initial.slice(s * (taps - 1) * n, (s + 1) * (taps - 1) * n));
    const want = actRound(shortConvRef(bcx, w, n, taps, lastToken, rowSlot, states), precision);
    return [{ name: 'short_conv', maxError: maxRelDiff(got, want), tolerance: KERNEL_TOLERANCE.shortConv[precision] }];
  },
};

/**
 * Qwen3.5's DeltaNet at its head dims (128): the conv + SiLU and the delta rule over one step of a
 * 5-token row and a 1-token row from nonzero states (GGUF's tiled heads and ssm_a), y against the
 * reference. The 5-token row takes the chunked form (delta_chunk, delta_chunk_state at the engine's
 * chunk size), the 1-token row the recurrence (delta_rule).
 */
const deltaNet: KernelCheck = {
  name: 'delta_net',
  async run({ ctx, precision }) {
    const { device } = ctx;
    const d: DeltaNetConfig = { layers: [0], convKernel: 4, numKHeads: 2, numVHeads: 4, headKDim: 128, headVDim: 128, vHeadOrder: 'tiled', aStored: 'neg' };
    const [lastToken, rowSlot, T, eps] = [[4, 5], [1, 0], 6, 1e-6];
    const C = deltaNetConvDim(d);
    const [bOffset, aOffset] = [T * d.numVHeads * d.headVDim, T * (d.numVHeads * d.headVDim + d.numVHeads)];
    const x = actRound(random(T * C, 71, 2), precision);
    const w = random(C * d.convKernel, 72);
    const convInit = random(2 * (d.convKernel - 1) * C, 73);
    const zba = actRound(random(aOffset + T * d.numVHeads, 74, 2), precision);
    const vecs = Float32Array.from([...random(d.numVHeads, 75, 0.5), ...random(d.numVHeads, 76, 0.5).map((v) => -Math.exp(v)), ...random(d.headVDim, 77, 0.2).map((v) => 1 + v)]);
    const sInit = random(2 * d.numVHeads * d.headKDim * d.headVDim, 78, 0.5);
    const u32 = (xs: number[]) => uploadBuffer(device, Uint32Array.from(xs), STORAGE);
    const rows = { lastToken: u32(lastToken), rowSlot: u32(rowSlot), counts: uploadBuffer(device, Uint32Array.from([T, 2, 0, 0]), UNIFORM) };
    const convY = createBuffer(device, T * C * 4, STORAGE);
    const y = createBuffer(device, T * d.numVHeads * d.headVDim * 4, STORAGE);
    const buffers = [uploadAct(device, x, precision), uploadBuffer(device, w, STORAGE), uploadBuffer(device, convInit, STORAGE), uploadAct(device, zba, precision), uploadBuffer(device, vecs, STORAGE), uploadBuffer(device, sInit, STORAGE), convY, y, rows.lastToken, rows.rowSlot, rows.counts];
    const [xBuf, wBuf, convState, zbaBuf, vecBuf, sState] = buffers as [GPUBuffer, GPUBuffer, GPUBuffer, GPUBuffer, GPUBuffer, GPUBuffer];
    const conv = await createCausalConvSiluOp(ctx, { ...rows, x: xBuf, weight: wBuf, state: convState, ckpt: 2, y: convY, n: C, taps: d.convKernel });
    const chunk = { size: DELTA_CHUNK.size, from: 4 };
    const scratch = createBuffer(device, deltaChunkScratch(d, T, chunk.size).floats * 4, STORAGE);
    buffers.push(scratch);
    const ruleArgs = { ...rows, d, eps, conv: convY, zba: zbaBuf, bOffset, aOffset, vecs: vecBuf, state: sState, ckpt: 2, y };
    const rule = await createDeltaRuleOp(ctx, { ...ruleArgs, chunkFrom: chunk.from });
    const chunked = await createDeltaChunkOp(ctx, { ...ruleArgs, scratch, maxTokens: T, chunk });
    try {
      await runPass(device, (pass) => {
        conv.encode(pass, 2);
        rule.encode(pass, 2);
        chunked.encode(pass, T, 2);
      });
    } finally {
      conv.destroy();
      rule.destroy();
      chunked.destroy();
    }
    const gotConv = await readAct(device, convY, T * C, precision);
    const got = await readAct(device, y, T * d.numVHeads * d.headVDim, precision);
    free(buffers);
    const per = (a: Float32Array, n: number) => [0, 1].map((s) => a.slice(s * n, (s + 1) * n));
    const wantConv = actRound(causalConvSiluRef(x, w, C, d.convKernel, lastToken, rowSlot, per(convInit, (d.convKernel - 1) * C)), precision);
    const want = actRound(deltaRuleChunkedRef(d, eps, wantConv, { z: zba.subarray(0, bOffset), b: zba.subarray(bOffset, aOffset), a: zba.subarray(aOffset) }, vecs, lastToken, rowSlot, per(sInit, d.numVHeads * d.headKDim * d.headVDim), chunk), precision);
    return [
      { name: 'causal_conv_silu', maxError: maxRelDiff(gotConv, wantConv), tolerance: KERNEL_TOLERANCE.causalConvSilu[precision] },
      { name: 'delta_rule', maxError: maxRelDiff(got, want), tolerance: KERNEL_TOLERANCE.deltaRule[precision] },
    ];
  },
};

/**
 * Granite 4.0-H's Mamba-2 at its head dim and state size (64, 128): the conv with its bias + SiLU
 * and the scan over one step of a 5-token row and a 1-token row from nonzero states (GGUF's
 * ssm_a), y against the reference (the grouped norm after it is rms_norm's check). The 5-token row
 * takes the chunked (SSD) form (mamba2_chunk + mamba2_chunk_state at the engine's chunk size), the
 * 1-token row the recurrence (mamba2_scan).
 */
const mamba2: KernelCheck = {
  name: 'mamba2',
  async run({ ctx, precision }) {
    const { device } = ctx;
    const m: Mamba2Config = { layers: [0], convKernel: 4, numHeads: 4, headDim: 64, stateSize: 128, numGroups: 1, aStored: 'neg' };
    const [lastToken, rowSlot, T] = [[4, 5], [1, 0], 6];
    const [H, inner, C] = [m.numHeads, m.numHeads * m.headDim, mamba2ConvDim(m)];
    const x = actRound(random(T * C, 81, 2), precision);
    const [w, bias] = [random(C * m.convKernel, 82), random(C, 83, 0.5)];
    const convInit = random(2 * (m.convKernel - 1) * C, 84);
    // z [T, inner], then dt [T, heads]
    const zdt = actRound(random(T * (inner + H), 85, 2), precision);
    const vecs = Float32Array.from([...random(H, 86, 0.5), ...random(H, 87, 0.5).map((v) => -Math.exp(v)), ...random(H, 88)]);
    const sInit = random(2 * inner * m.stateSize, 89, 0.5);
    const u32 = (xs: number[]) => uploadBuffer(device, Uint32Array.from(xs), STORAGE);
    const rows = { lastToken: u32(lastToken), rowSlot: u32(rowSlot), counts: uploadBuffer(device, Uint32Array.from([T, 2, 0, 0]), UNIFORM) };
    const convY = createBuffer(device, T * C * 4, STORAGE);
    const y = createBuffer(device, T * inner * 4, STORAGE);
    const buffers = [uploadAct(device, x, precision), uploadBuffer(device, Float32Array.from([...w, ...bias]), STORAGE), uploadBuffer(device, convInit, STORAGE), uploadAct(device, zdt, precision), uploadBuffer(device, vecs, STORAGE), uploadBuffer(device, sInit, STORAGE), convY, y, rows.lastToken, rows.rowSlot, rows.counts];
    const [xBuf, wBuf, convState, zdtBuf, vecBuf, sState] = buffers as [GPUBuffer, GPUBuffer, GPUBuffer, GPUBuffer, GPUBuffer, GPUBuffer];
    const conv = await createCausalConvSiluOp(ctx, { ...rows, x: xBuf, weight: wBuf, bias: true, state: convState, ckpt: 2, y: convY, n: C, taps: m.convKernel });
    const chunk = { size: MAMBA2_CHUNK.size, from: 4 };
    const scratch = createBuffer(device, T * inner * 4, STORAGE);
    buffers.push(scratch);
    const scanArgs = { ...rows, m, conv: convY, zdt: zdtBuf, dtOffset: T * inner, vecs: vecBuf, state: sState, ckpt: 2, y };
    const scan = await createMamba2ScanOp(ctx, { ...scanArgs, chunkFrom: chunk.from });
    const chunked = await createMamba2ChunkOp(ctx, { ...scanArgs, scratch, chunk });
    try {
      await runPass(device, (pass) => {
        conv.encode(pass, 2);
        scan.encode(pass, 2);
        chunked.encode(pass, T, 2);
      });
    } finally {
      conv.destroy();
      scan.destroy();
      chunked.destroy();
    }
    const gotConv = await readAct(device, convY, T * C, precision);
    const got = await readAct(device, y, T * inner, precision);
    free(buffers);
    const per = (a: Float32Array, n: number) => [0, 1].map((s) => a.slice(s * n, (s + 1) * n));
    const wantConv = actRound(causalConvSiluRef(x, w, C, m.convKernel, lastToken, rowSlot, per(convInit, (m.convKernel - 1) * C), bias), precision);
    const want = actRound(mamba2ScanChunkedRef(m, wantConv, zdt.subarray(0, T * inner), zdt.subarray(T * inner), vecs, lastToken, rowSlot, per(sInit, inner * m.stateSize), chunk), precision);
    return [
      { name: 'causal_conv_silu (bias)', maxError: maxRelDiff(gotConv, wantConv), tolerance: KERNEL_TOLERANCE.causalConvSilu[precision] },
      { name: 'mamba2_scan', maxError: maxRelDiff(got, want), tolerance: KERNEL_TOLERANCE.mamba2Scan[precision] },
    ];
  },
};

/** Every kernel check, in the order selfcheck runs and prints them. */
export const KERNEL_CHECKS: readonly KernelCheck[] = [linear, attention, rmsNorm, rope, embed, elementwise, shortConv, deltaNet, mamba2];
