/**
 * Qwen3.5's DeltaNet kernels (causal_conv_silu, delta_rule) against their references
 * (src/model/delta-net.ts's functions, which the CPU reference forward pass runs): two ragged steps
 * over the same slots (a prefill row longer than the conv, a one-token decode row, a two-token
 * row), each slot starting from a nonzero state, the second step continuing from the first's
 * states with the rows in another order; y of both steps and the states after them.
 */
import { describe, expect, it } from 'vitest';
import { readBuffer, STORAGE, uploadBuffer, createBuffer } from '../gpu/buffers';
import { deltaNetConvDim, type DeltaNetConfig } from '../model/config';
import { testGPU } from '../testing/gpu';
import { CHUNK_STEPS, MAX_SEQS, ROWS, STEPS, stepRows } from '../testing/recurrent-steps';
import { actRound, maxRelDiff, opContext, random, readAct, runPass, uploadAct } from '../testing/kernel-helpers';
import { KERNEL_TOLERANCE } from '../testing/tolerances';
import { causalConvSiluRef, createCausalConvSiluOp, createDeltaRuleOp, DELTA_NET_WG, deltaRuleRef } from './delta-net';
import { createDeltaChunkOp, DELTA_CHUNK_SIZES, deltaChunkScratch, deltaRuleChunkedRef } from './delta-net-chunked';

const MAX_TOKENS = 8;
// Two value heads per key head; head dims not multiples of the workgroup (the column loops' bounds matter).
const D: DeltaNetConfig = { layers: [0], convKernel: 4, numKHeads: 2, numVHeads: 4, headKDim: 8, headVDim: 12, vHeadOrder: 'grouped', aStored: 'log' };
const EPS = 1e-6;

describe('causal_conv_silu kernel', () => {
  const n = 80; // Qwen3.5's q, k, v channels at D's sizes
  async function run(precision: 'f32' | 'f16', wg: number) {
    const { device } = await testGPU();
    const taps = D.convKernel;
    const w = random(n * taps, 3, 1);
    // Each slot's window followed by 3 floats of something else (the engine's slot state holds S after it).
    const stride = (taps - 1) * n + 3;
    const initial = random(ROWS * stride, 4, 2);
    const states = Array.from({ length: ROWS }, (_, s) => initial.slice(s * stride, (s + 1) * stride));
    const stateBuf = uploadBuffer(device, initial, STORAGE);
    const wBuf = uploadBuffer(device, w, STORAGE);
    const yBuf = createBuffer(device, MAX_TOKENS * n * 4, STORAGE);
    const results: { got: Float32Array; want: Float32Array }[] = [];
    for (const [i, step] of STEPS.entries()) {
      const rows = await stepRows(device, step);
      const x = actRound(random(MAX_TOKENS * n, 10 + i, 2), precision);
      const op = await createCausalConvSiluOp(opContext(device, precision), { ...rows, x: uploadAct(device, x, precision), weight: wBuf, state: stateBuf, ckpt: MAX_SEQS, stateStride: stride, y: yBuf, n, taps, wg });
      await runPass(device, (pass) => op.encode(pass, step.lastToken.length));
      results.push({ got: await readAct(device, yBuf, rows.T * n, precision), want: actRound(causalConvSiluRef(x, w, n, taps, step.lastToken, step.rowSlot, states, undefined, states.slice(MAX_SEQS)), precision) });
    }
    const gotState = new Float32Array(await readBuffer(device, stateBuf, initial.length * 4));
    return { results, gotState, wantState: Float32Array.from(states.flatMap((s) => [...s])) };
  }

  for (const [precision, wg] of [['f32', 64], ['f16', 64]] as const) {
    it(`matches the reference over two ragged steps in ${precision}, its states carried`, async (ctx) => {
      if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
      const { results, gotState, wantState } = await run(precision, wg);
      for (const { got, want } of results) expect(maxRelDiff(got, want)).toBeLessThan(KERNEL_TOLERANCE.causalConvSilu[precision]);
      expect(maxRelDiff(gotState, wantState)).toBeLessThan(1e-6);
    });
  }
});

describe('delta_rule kernel', () => {
  async function run(precision: 'f32' | 'f16', wg: number, d: DeltaNetConfig, chunk?: { size: number; from: number }) {
    const { device } = await testGPU();
    const [steps, MAX_TOKENS] = chunk ? [CHUNK_STEPS, 24] : [STEPS, 8];
    const { numVHeads: nv, headKDim: dk, headVDim: dv } = d;
    const C = deltaNetConvDim(d);
    // z, b and a in regions of one buffer, as three projections write them
    const [bOffset, aOffset] = [MAX_TOKENS * nv * dv, MAX_TOKENS * (nv * dv + nv)];
    // dt_bias, the decay tensor (A_log about 0, or −exp of it), the norm about 1
    const aLog = random(nv, 5, 0.5);
    const vecs = Float32Array.from([...random(nv, 6, 0.5), ...(d.aStored === 'log' ? aLog : aLog.map((v) => -Math.exp(v))), ...random(dv, 7, 0.2).map((v) => 1 + v)]);
    // Each slot: 5 floats of something else (the engine's conv window), then S.
    const [stateOffset, stride] = [5, 5 + nv * dk * dv];
    const initial = random(ROWS * stride, 8, 0.5);
    const states = Array.from({ length: ROWS }, (_, s) => initial.slice(s * stride + stateOffset, (s + 1) * stride));
    const stateBuf = uploadBuffer(device, initial, STORAGE);
    const vecBuf = uploadBuffer(device, vecs, STORAGE);
    const yBuf = createBuffer(device, MAX_TOKENS * nv * dv * 4, STORAGE);
    const results: { got: Float32Array; want: Float32Array }[] = [];
    const scratch = chunk && createBuffer(device, deltaChunkScratch(d, MAX_TOKENS, chunk.size).floats * 4, STORAGE);
    for (const [i, step] of steps.entries()) {
      const rows = await stepRows(device, step);
      const conv = actRound(random(MAX_TOKENS * C, 20 + i, 1), precision);
      const zba = actRound(random(MAX_TOKENS * (nv * dv + 2 * nv), 30 + i, 2), precision);
      const parts = { z: zba.subarray(0, bOffset), b: zba.subarray(bOffset, aOffset), a: zba.subarray(aOffset) };
      const args = { ...rows, d, eps: EPS, conv: uploadAct(device, conv, precision), zba: uploadAct(device, zba, precision), bOffset, aOffset, vecs: vecBuf, state: stateBuf, ckpt: MAX_SEQS, stateStride: stride, stateOffset, y: yBuf, wg };
      const op = await createDeltaRuleOp(opContext(device, precision), { ...args, chunkFrom: chunk?.from });
      const chunked = chunk && (await createDeltaChunkOp(opContext(device, precision), { ...args, scratch: scratch!, maxTokens: MAX_TOKENS, chunk }));
      await runPass(device, (pass) => {
        op.encode(pass, step.lastToken.length);
        chunked?.encode(pass, rows.T, step.lastToken.length);
      });
      const checkpoints = states.slice(MAX_SEQS);
      const want = chunk ? deltaRuleChunkedRef(d, EPS, conv, parts, vecs, step.lastToken, step.rowSlot, states, chunk, checkpoints) : deltaRuleRef(d, EPS, conv, parts, vecs, step.lastToken, step.rowSlot, states, checkpoints);
      results.push({ got: await readAct(device, yBuf, rows.T * nv * dv, precision), want: actRound(want, precision) });
    }
    const all = new Float32Array(await readBuffer(device, stateBuf, initial.length * 4));
    // S of each slot; the floats before it untouched
    const gotState = Float32Array.from(Array.from({ length: ROWS }, (_, s) => [...all.subarray(s * stride + stateOffset, (s + 1) * stride)]).flat());
    for (let s = 0; s < ROWS; s++) expect(all.subarray(s * stride, s * stride + stateOffset)).toEqual(initial.subarray(s * stride, s * stride + stateOffset));
    return { results, gotState, wantState: Float32Array.from(states.flatMap((s) => [...s])) };
  }

  const cases: Array<['f32' | 'f16', number, DeltaNetConfig, string]> = [
    ...DELTA_NET_WG.map((wg): ['f32', number, DeltaNetConfig, string] => ['f32', wg, D, "HF's grouped value heads and A_log"]),
    ['f32', 64, { ...D, vHeadOrder: 'tiled', aStored: 'neg' }, "GGUF's tiled value heads and ssm_a"],
    ['f16', 64, D, "HF's grouped value heads and A_log"],
  ];
  for (const [precision, wg, d, what] of cases) {
    it(`matches the reference over two ragged steps at WG=${wg} in ${precision} (${what}), its states carried`, async (ctx) => {
      if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
      const { results, gotState, wantState } = await run(precision, wg, d);
      for (const { got, want } of results) expect(maxRelDiff(got, want)).toBeLessThan(KERNEL_TOLERANCE.deltaRule[precision]);
      expect(maxRelDiff(gotState, wantState)).toBeLessThan(1e-5);
    });
  }

  describe('with delta_chunk and delta_chunk_state (the chunked form) on the long rows', () => {
    const cases: Array<['f32' | 'f16', number, number, DeltaNetConfig, string]> = [
      ...DELTA_CHUNK_SIZES.map((size, i): ['f32', number, number, DeltaNetConfig, string] => ['f32', DELTA_NET_WG[i % DELTA_NET_WG.length]!, size, D, "HF's grouped value heads and A_log"]),
      ['f32', 64, 8, { ...D, vHeadOrder: 'tiled', aStored: 'neg' }, "GGUF's tiled value heads and ssm_a"],
      ['f16', 64, 8, D, "HF's grouped value heads and A_log"],
    ];
    for (const [precision, wg, size, d, what] of cases) {
      it(`matches the reference over two ragged steps, chunks of ${size} at WG=${wg} in ${precision} (${what}), its states carried`, async (ctx) => {
        if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
        const { results, gotState, wantState } = await run(precision, wg, d, { size, from: 4 });
        for (const { got, want } of results) expect(maxRelDiff(got, want)).toBeLessThan(KERNEL_TOLERANCE.deltaRule[precision]);
        expect(maxRelDiff(gotState, wantState)).toBeLessThan(1e-5);
      });
    }
  });
});
