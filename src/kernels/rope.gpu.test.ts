import { KERNEL_TOLERANCE } from '../testing/tolerances';
import { describe, expect, it } from 'vitest';
import type { Precision } from '../gpu/pipelines';
import { createBuffer, STORAGE, uploadBuffer } from '../gpu/buffers';
import { testGPU } from '../testing/gpu';
import { applyRope } from '../model/rope';
import { createRopeOp, ROPE_WG, ropeInvFreq, ropeRef, type RopeStyle } from './rope';
import { actRound, maxRelDiff, opContext, random, readAct, runPass, shuffled, uploadAct } from '../testing/kernel-helpers';
import { kvWriteRef } from './kv-write';

const llama3 = { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 } as const;

async function runRope(
  precision: Precision,
  style: RopeStyle,
  wg: number,
  { nHeads, nKv, headDim, positions, rotaryDim, mscale }: { nHeads: number; nKv: number; headDim: number; positions: number[]; rotaryDim?: number; mscale?: number },
) {
  const { device } = await testGPU();
  const T = positions.length;
  const invFreq = ropeInvFreq({ headDim, rotaryDim, ropeTheta: 500000, ropeScaling: llama3 });
  const q = actRound(random(T * nHeads * headDim, 1 + headDim), precision);
  const k = actRound(random(T * nKv * headDim, 2 + headDim), precision);
  const qBuf = uploadAct(device, q, precision);
  const kBuf = uploadAct(device, k, precision);
  // Room for one more token than the step holds: the op must leave it alone.
  const spare = createBuffer(device, 4 * (T + 1), STORAGE);
  device.queue.writeBuffer(spare, 0, new Uint32Array([...positions, 5]));
  const op = await createRopeOp(opContext(device, precision), {
    q: qBuf,
    k: kBuf,
    positions: spare,
    invFreq: uploadBuffer(device, invFreq),
    nHeads,
    nKv,
    headDim,
    rotaryDim,
    mscale,
    style,
    wg,
  });
  await runPass(device, (pass) => op.encode(pass, T));
  return {
    gotQ: await readAct(device, qBuf, q.length, precision),
    gotK: await readAct(device, kBuf, k.length, precision),
    q,
    wantQ: ropeRef(q.slice(), positions, nHeads, headDim, invFreq, style, mscale),
    wantK: ropeRef(k.slice(), positions, nKv, headDim, invFreq, style, mscale),
  };
}

describe('rope kernel with kv_write folded in', () => {
  // The rotation as below; k's rotated rows and v's rows land in shuffled page slots (v bit-exact:
  // a copy), the other slots and k itself untouched. nKv 1, headDim 12 and a partial rotary
  // dimension (8 of 12: k's last 4 elements are copied as they are) included.
  const TOLERANCE = KERNEL_TOLERANCE.rope;
  for (const precision of ['f32', 'f16'] as const) {
    for (const style of ['neox', 'interleaved'] as const) {
      for (const [nHeads, nKv, headDim, rotaryDim, wg] of [[4, 2, 64, 64, 64], [3, 1, 12, 8, 32]] as const) {
        it(`rotates q, and writes rotated k and v into the cache (${style}, ${nHeads}/${nKv} heads of ${headDim}, rotary ${rotaryDim}, WG=${wg}, ${precision})`, async (ctx) => {
          const gpu = await testGPU();
          if (precision === 'f16' && !gpu.info.f16) ctx.skip();
          const { device } = gpu;
          const page = 4;
          const numPages = 4;
          const rowLen = nKv * headDim;
          const [a, b] = shuffled(numPages, 5) as [number, number];
          const slots = [a * page + page - 1, b * page, b * page + 1];
          const positions = [9, 300, 4097];
          const T = slots.length;
          const invFreq = ropeInvFreq({ headDim, rotaryDim, ropeTheta: 10000, ropeScaling: null });
          const q = actRound(random(T * nHeads * headDim, 11), precision);
          const k = actRound(random(T * rowLen, 12), precision);
          const v = actRound(random(T * rowLen, 13), precision);
          const kCache0 = actRound(random(numPages * page * rowLen, 14), precision);
          const vCache0 = actRound(random(numPages * page * rowLen, 15), precision);
          const [qBuf, kBuf, kCache, vCache] = [q, k, kCache0, vCache0].map((x) => uploadAct(device, x, precision)) as [GPUBuffer, GPUBuffer, GPUBuffer, GPUBuffer];
          const op = await createRopeOp(opContext(device, precision), {
            q: qBuf,
            k: kBuf,
            positions: uploadBuffer(device, new Uint32Array(positions)),
            invFreq: uploadBuffer(device, invFreq),
            nHeads,
            nKv,
            headDim,
            rotaryDim,
            style,
            wg,
            kv: { v: uploadAct(device, v, precision), slotMapping: uploadBuffer(device, new Uint32Array(slots)), kCache, vCache },
          });
          await runPass(device, (pass) => op.encode(pass, T));
          const size = numPages * page * rowLen;
          expect(maxRelDiff(await readAct(device, qBuf, q.length, precision), ropeRef(q.slice(), positions, nHeads, headDim, invFreq, style))).toBeLessThan(TOLERANCE[precision]);
          expect(await readAct(device, kBuf, k.length, precision)).toEqual(k);
          const wantK = kvWriteRef(kCache0.slice(), actRound(ropeRef(k.slice(), positions, nKv, headDim, invFreq, style), precision), slots, rowLen);
          expect(maxRelDiff(await readAct(device, kCache, size, precision), wantK)).toBeLessThan(TOLERANCE[precision]);
          expect(await readAct(device, vCache, size, precision)).toEqual(kvWriteRef(vCache0.slice(), v, slots, rowLen));
        });
      }
    }
  }
});

describe('rope kernel', () => {
  // f32 angle reduced by 2π exactly, then f32 sin/cos: ~1e-6 absolute on O(1) values.
  const TOLERANCE = KERNEL_TOLERANCE.rope;
  const positions = [0, 1, 7, 300, 4097, 131071];

  for (const precision of ['f32', 'f16'] as const) {
    for (const style of ['neox', 'interleaved'] as const) {
      for (const headDim of [64, 128]) {
        for (const wg of ROPE_WG) {
          it(`matches the reference for ${style} pairs, headDim ${headDim}, WG=${wg} in ${precision}`, async (ctx) => {
            if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
            const r = await runRope(precision, style, wg, { nHeads: 4, nKv: 2, headDim, positions });
            expect(maxRelDiff(r.gotQ, r.wantQ)).toBeLessThan(TOLERANCE[precision]);
            expect(maxRelDiff(r.gotK, r.wantK)).toBeLessThan(TOLERANCE[precision]);
          });
        }
      }
    }
  }

  // Phi-4-mini: 96 of 128 dimensions rotate, cos/sin times LongRoPE's attention factor; an odd
  // rotary width in pairs (40 of 72: 20 pairs) as well.
  for (const precision of ['f32', 'f16'] as const) {
    for (const style of ['neox', 'interleaved'] as const) {
      for (const [headDim, rotaryDim] of [[128, 96], [72, 40]]) {
        for (const wg of ROPE_WG) {
          it(`rotates only the first ${rotaryDim} of ${headDim} dimensions (${style}), scaled, WG=${wg} in ${precision}`, async (ctx) => {
            if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
            const r = await runRope(precision, style, wg, { nHeads: 3, nKv: 1, headDim, positions, rotaryDim, mscale: 1.19 });
            expect(maxRelDiff(r.gotQ, r.wantQ)).toBeLessThan(TOLERANCE[precision] * 1.2);
            expect(maxRelDiff(r.gotK, r.wantK)).toBeLessThan(TOLERANCE[precision] * 1.2);
            // The pass-through dimensions are untouched, bit for bit; the rotated ones moved.
            for (let t = 0; t < positions.length * 3; t++) {
              const head = (a: Float32Array) => a.subarray(t * headDim, (t + 1) * headDim);
              expect(Array.from(head(r.gotQ).subarray(rotaryDim))).toEqual(Array.from(head(r.q).subarray(rotaryDim)));
            }
            expect(maxRelDiff(r.gotQ.subarray(headDim, headDim + rotaryDim), r.q.subarray(headDim, headDim + rotaryDim))).toBeGreaterThan(0.1);
          });
        }
      }
    }
  }

  it('the rotary width and the scale each change the answer, and rotaryDim = headDim, mscale 1 is plain RoPE', async () => {
    const base = { nHeads: 2, nKv: 1, headDim: 64, positions: [3, 40] };
    const plain = await runRope('f32', 'neox', 64, base);
    const explicit = await runRope('f32', 'neox', 64, { ...base, rotaryDim: 64, mscale: 1 });
    expect(Array.from(explicit.gotQ)).toEqual(Array.from(plain.gotQ));
    const partial = await runRope('f32', 'neox', 64, { ...base, rotaryDim: 48 });
    const scaled = await runRope('f32', 'neox', 64, { ...base, mscale: 1.2 });
    expect(maxRelDiff(partial.gotQ, plain.gotQ)).toBeGreaterThan(0.05);
    expect(maxRelDiff(scaled.gotQ, plain.gotQ.map((v) => v * 1.2))).toBeLessThan(1e-5);
  });

  it('agrees with the reference forward pass rotation at small positions', async () => {
    const r = await runRope('f32', 'interleaved', 64, { nHeads: 2, nKv: 1, headDim: 64, positions: [3, 40] });
    const invFreq = ropeInvFreq({ headDim: 64, ropeTheta: 500000, ropeScaling: llama3 });
    const want = random(2 * 1 * 64, 2 + 64);
    applyRope(want.subarray(0, 64), 1, 64, 3, Float64Array.from(invFreq), 'interleaved');
    applyRope(want.subarray(64), 1, 64, 40, Float64Array.from(invFreq), 'interleaved');
    expect(maxRelDiff(r.gotK, want)).toBeLessThan(1e-5);
  });

  it('computes HF llama3-scaled inverse frequencies in f32', () => {
    const plain = ropeInvFreq({ headDim: 128, ropeTheta: 500000, ropeScaling: null });
    const scaled = ropeInvFreq({ headDim: 128, ropeTheta: 500000, ropeScaling: llama3 });
    expect(plain[0]).toBe(1);
    expect(plain[1]).toBe(Math.fround(500000 ** (-2 / 128)));
    expect(scaled[0]).toBe(1); // short wavelengths kept
    expect(scaled[63]).toBe(Math.fround(plain[63]! / 8)); // long ones divided by factor
  });
});
