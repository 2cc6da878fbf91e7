/**
 * Granite 4.0-H's Mamba-2 mixer between its projections on the GPU, as the block runs it:
 * causal_conv_silu with its bias, mamba2_scan, and rms_norm's grouped norm, over two ragged steps
 * on the same slots (a prefill row longer than the conv, a one-token decode row, a two-token row),
 * each slot starting from a nonzero state in the engine's layout (the conv's window, then S), the
 * second step continuing from the first's with the rows in another order. Each kernel against its
 * reference fed the kernel before it's output; in f32 the whole chain also against mamba2Token,
 * the CPU reference forward pass's own token step; the states after both steps. The chunked (SSD)
 * cases run mamba2_chunk and mamba2_chunk_state on the steps' long rows beside mamba2_scan on the
 * short ones.
 */
import { describe, expect, it } from 'vitest';
import { createBuffer, readBuffer, STORAGE, uploadBuffer } from '../gpu/buffers';
import { mamba2ConvDim, type Mamba2Config } from '../model/config';
import { mamba2Token } from '../model/mamba2';
import { testGPU } from '../testing/gpu';
import { CHUNK_STEPS, MAX_SEQS, ROWS, STEPS, stepRows } from '../testing/recurrent-steps';
import { actRound, maxRelDiff, opContext, random, readAct, runPass, uploadAct } from '../testing/kernel-helpers';
import { KERNEL_TOLERANCE } from '../testing/tolerances';
import { causalConvSiluRef, createCausalConvSiluOp } from './delta-net';
import { createMamba2ScanOp, MAMBA2_WG, mamba2ScanRef } from './mamba2';
import { createMamba2ChunkOp, MAMBA2_CHUNK_SIZES, mamba2ScanChunkedRef } from './mamba2-chunked';
import { createRmsNormOp, rmsNormRef } from './rms-norm';

// Two groups of two heads (head h reads group h / 2); head dim and state size not multiples of the workgroup.
const M: Mamba2Config = { layers: [0], convKernel: 4, numHeads: 4, headDim: 6, stateSize: 5, numGroups: 2, aStored: 'log' };
const EPS = 1e-6;

async function run(precision: 'f32' | 'f16', wg: number, m: Mamba2Config, chunk?: { size: number; from: number }) {
  const { device } = await testGPU();
  const [steps, MAX_TOKENS] = chunk ? [CHUNK_STEPS, 24] : [STEPS, 8];
  const ctx = opContext(device, precision);
  const act = precision === 'f16' ? 2 : 4;
  const H = m.numHeads;
  const inner = H * m.headDim;
  const convDim = mamba2ConvDim(m);
  const k = m.convKernel - 1;
  // in_proj's output as the block stores it: z, xBC and dt rows in regions where a binding may start
  const region = (elements: number) => Math.ceil((elements * act) / 256) * 256;
  const [xOff, dtOff] = [region(MAX_TOKENS * inner), region(MAX_TOKENS * inner) + region(MAX_TOKENS * convDim)];
  const projElements = (dtOff + region(MAX_TOKENS * H)) / act;
  // the conv's taps then its bias (one f32 buffer); dt_bias, the decay tensor (A_log about 0, or −exp of it), D; the norm about 1
  const w = random(convDim * m.convKernel, 3, 0.5);
  const bias = random(convDim, 4, 0.5);
  const aLog = random(H, 5, 0.5);
  const vecs = Float32Array.from([...random(H, 6, 0.5), ...(m.aStored === 'log' ? aLog : aLog.map((v) => -Math.exp(v))), ...random(H, 7, 1)]);
  const norm = random(inner, 8, 0.2).map((v) => 1 + v);
  // Each slot: the conv's window, then S (the engine's layout), nonzero.
  const [sOff, stride] = [k * convDim, k * convDim + inner * m.stateSize];
  const initial = random(ROWS * stride, 9, 0.5);
  const slots = Array.from({ length: ROWS }, (_, s) => initial.slice(s * stride, (s + 1) * stride));
  // the kernels' references advance these copies; mamba2Token advances its own
  const windows = slots.map((x) => x.slice(0, sOff));
  const scans = slots.map((x) => x.slice(sOff));
  const tokenStates = slots.map((x) => ({ conv: x.slice(0, sOff), s: x.slice(sOff) }));
  const stateBuf = uploadBuffer(device, initial, STORAGE);
  const wBuf = uploadBuffer(device, Float32Array.from([...w, ...bias]), STORAGE);
  const vecBuf = uploadBuffer(device, vecs, STORAGE);
  const normBuf = uploadBuffer(device, norm, STORAGE);
  const [convBuf, yBuf, ynBuf] = [createBuffer(device, MAX_TOKENS * convDim * act, STORAGE), createBuffer(device, MAX_TOKENS * inner * act, STORAGE), createBuffer(device, MAX_TOKENS * inner * act, STORAGE)];
  const scratch = createBuffer(device, MAX_TOKENS * inner * 4, STORAGE);
  const diffs = { conv: 0, scan: 0, norm: 0, token: 0 };
  for (const [i, step] of steps.entries()) {
    const rows = await stepRows(device, step);
    const proj = actRound(random(projElements, 20 + i, 1.5), precision);
    const projBuf = uploadAct(device, proj, precision);
    const at = (off: number, n: number) => proj.slice(off / act, off / act + rows.T * n);
    const [z, xBC, dt] = [at(0, inner), at(xOff, convDim), at(dtOff, H)];
    const common = { lastToken: rows.lastToken, rowSlot: rows.rowSlot, counts: rows.counts, state: stateBuf, stateStride: stride };
    const conv = await createCausalConvSiluOp(ctx, { ...common, x: { buffer: projBuf, offset: xOff }, weight: wBuf, bias: true, ckpt: MAX_SEQS, y: convBuf, n: convDim, taps: m.convKernel });
    const scanArgs = { ...common, ckpt: MAX_SEQS, m, conv: convBuf, zdt: projBuf, dtOffset: dtOff / act, vecs: vecBuf, stateOffset: sOff, y: yBuf, wg };
    const scan = await createMamba2ScanOp(ctx, { ...scanArgs, chunkFrom: chunk?.from });
    const chunked = chunk && (await createMamba2ChunkOp(ctx, { ...scanArgs, scratch, chunk }));
    const groupNorm = await createRmsNormOp(ctx, { x: yBuf, weight: normBuf, y: ynBuf, n: inner / m.numGroups, rowsPerToken: m.numGroups, weightPerRow: true, maxTokens: MAX_TOKENS, eps: EPS });
    await runPass(device, (pass) => {
      conv.encode(pass, step.lastToken.length);
      scan.encode(pass, step.lastToken.length);
      chunked?.encode(pass, rows.T, step.lastToken.length);
      groupNorm.encode(pass, rows.T);
    });
    const [gotConv, gotY, gotYn] = [await readAct(device, convBuf, rows.T * convDim, precision), await readAct(device, yBuf, rows.T * inner, precision), await readAct(device, ynBuf, rows.T * inner, precision)];
    const max = (key: keyof typeof diffs, d: number) => (diffs[key] = Math.max(diffs[key], d));
    max('conv', maxRelDiff(gotConv, actRound(causalConvSiluRef(xBC, w, convDim, m.convKernel, step.lastToken, step.rowSlot, windows, bias, windows.slice(MAX_SEQS)), precision)));
    const wantY = chunk ? mamba2ScanChunkedRef(m, gotConv, z, dt, vecs, step.lastToken, step.rowSlot, scans, chunk, scans.slice(MAX_SEQS)) : mamba2ScanRef(m, gotConv, z, dt, vecs, step.lastToken, step.rowSlot, scans, scans.slice(MAX_SEQS));
    max('scan', maxRelDiff(gotY, actRound(wantY, precision)));
    max('norm', maxRelDiff(gotYn, actRound(rmsNormRef(gotY, norm, rows.T * m.numGroups, inner / m.numGroups, EPS, m.numGroups), precision)));
    // the chain as the CPU reference forward pass runs a token
    const want = new Float32Array(rows.T * inner);
    let t = 0;
    step.lastToken.forEach((last, s) => {
      for (; t <= last; t++) {
        const one = (x: Float32Array, n: number) => x.subarray(t * n, (t + 1) * n);
        mamba2Token(m, EPS, { conv: w, convBias: bias, dtBias: vecs.subarray(0, H), decay: vecs.subarray(H, 2 * H), d: vecs.subarray(2 * H), norm }, tokenStates[step.rowSlot[s]!]!, one(z, inner), one(xBC, convDim), one(dt, H), one(want, inner));
      }
    });
    max('token', maxRelDiff(gotYn, want));
  }
  const got = new Float32Array(await readBuffer(device, stateBuf, initial.length * 4));
  const wantState = Float32Array.from(windows.flatMap((x, s) => [...x, ...scans[s]!]));
  // The token-by-token chain keeps no checkpoints: the slots alone.
  const tokenState = Float32Array.from(tokenStates.slice(0, MAX_SEQS).flatMap((x) => [...x.conv, ...x.s]));
  return { diffs, state: maxRelDiff(got, wantState), tokenState: maxRelDiff(got.subarray(0, MAX_SEQS * stride), tokenState) };
}

describe('Mamba-2 kernels (causal_conv_silu with bias, mamba2_scan, the grouped rms_norm)', () => {
  type Case = ['f32' | 'f16', number, Mamba2Config, string, { size: number; from: number }?];
  const cases: Case[] = [
    ['f32', MAMBA2_WG[1], M, "HF's A_log"],
    ['f32', MAMBA2_WG[0], { ...M, aStored: 'neg' }, "GGUF's ssm_a"],
    ['f16', MAMBA2_WG[1], M, "HF's A_log"],
    // mamba2_chunk and mamba2_chunk_state (the SSD form) on the rows of 4 tokens or more
    ...MAMBA2_CHUNK_SIZES.map((size, i): Case => ['f32', MAMBA2_WG[i % MAMBA2_WG.length]!, i ? M : { ...M, aStored: 'neg' }, `chunked, chunks of ${size}, ${i ? "HF's A_log" : "GGUF's ssm_a"}`, { size, from: 4 }]),
    ['f16', MAMBA2_WG[1], M, "chunked, chunks of 8, HF's A_log", { size: 8, from: 4 }],
  ];
  for (const [precision, wg, m, what, chunk] of cases) {
    it(`match their references over two ragged steps at WG=${wg} in ${precision} (${what}), the states carried`, async (ctx) => {
      if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
      const { diffs, state, tokenState } = await run(precision, wg, m, chunk);
      expect(diffs.conv).toBeLessThan(KERNEL_TOLERANCE.causalConvSilu[precision]);
      expect(diffs.scan).toBeLessThan(KERNEL_TOLERANCE.mamba2Scan[precision]);
      expect(diffs.norm).toBeLessThan(KERNEL_TOLERANCE.rmsNorm[precision]);
      expect(state).toBeLessThan(1e-5);
      // the chain in f32 is the CPU reference's token step (f16 rounds between the kernels)
      if (precision === 'f32') {
        expect(diffs.token).toBeLessThan(1e-5);
        expect(tokenState).toBeLessThan(1e-5);
      }
    });
  }
});
