import { KERNEL_TOLERANCE } from '../testing/tolerances';
import { describe, expect, it } from 'vitest';
import { createBuffer, STORAGE } from '../gpu/buffers';
import { testGPU } from '../testing/gpu';
import { createSwigluOp, geluTanh, SWIGLU_WG, swigluRef, type GluActivation, type SwigluLayout } from './swiglu';
import { actRound, maxRelDiff, opContext, random, readAct, runPass, uploadAct } from '../testing/kernel-helpers';

describe('swiglu kernel', () => {
  // f32: exp and one division, a few ulps. f16: the output's own rounding (2^-11) dominates.
  const TOLERANCE = KERNEL_TOLERANCE.swiglu;

  async function run(precision: 'f32' | 'f16', wg: number, tokens: number, maxTokens: number, fused: boolean, activation: GluActivation = 'silu') {
    const { device } = await testGPU();
    const n = 100; // not a multiple of any WG: the bounds check matters
    // Fused: one [maxTokens, 2n] buffer holding gate then up per token; else two [maxTokens, n].
    const layout: SwigluLayout = fused ? { n, gateStride: 2 * n, upStride: 2 * n, gateOffset: 0, upOffset: n } : { n };
    const width = fused ? 2 * n : n;
    const gate = actRound(random(maxTokens * width, 3 + wg, 8), precision);
    const up = fused ? gate : actRound(random(maxTokens * n, 4 + wg, 2), precision);
    const gateBuf = uploadAct(device, gate, precision);
    const upBuf = fused ? gateBuf : uploadAct(device, up, precision);
    const out = createBuffer(device, maxTokens * n * 4, STORAGE);
    const op = await createSwigluOp(opContext(device, precision), { ...layout, gate: gateBuf, up: upBuf, out, wg, activation });
    await runPass(device, (pass) => op.encode(pass, tokens));
    const got = await readAct(device, out, maxTokens * n, precision);
    return { got, want: actRound(swigluRef(gate, up, tokens, layout, activation), precision), n };
  }

  it('writes an f32 product past f16 range from f16 gate and up (outF32, f16)', async (ctx) => {
    const { device, info } = await testGPU();
    if (!info.f16) ctx.skip();
    // gate and up up to ±400 (f16 holds them): products up to 1.6e5, infinite in f16.
    const n = 100;
    const gate = actRound(random(2 * n, 7, 400), 'f16');
    const up = actRound(random(2 * n, 8, 400), 'f16');
    const out = createBuffer(device, 2 * n * 4, STORAGE);
    const op = await createSwigluOp(opContext(device, 'f16'), { n, gate: uploadAct(device, gate, 'f16'), up: uploadAct(device, up, 'f16'), out, outF32: true });
    await runPass(device, (pass) => op.encode(pass, 2));
    const got = await readAct(device, out, 2 * n, 'f32');
    const want = swigluRef(gate, up, 2, { n });
    expect(want.some((v) => Math.abs(v) > 65504)).toBe(true);
    expect(maxRelDiff(got, want)).toBeLessThan(TOLERANCE.f32);
  });

  for (const precision of ['f32', 'f16'] as const) {
    for (const wg of SWIGLU_WG) {
      for (const fused of [false, true]) {
        it(`matches the reference at WG=${wg} in ${precision} with ${fused ? 'a fused gate-up buffer' : 'separate gate and up'}`, async (ctx) => {
          if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
          const { got, want, n } = await run(precision, wg, 3, 4, fused);
          expect(maxRelDiff(got.subarray(0, 3 * n), want)).toBeLessThan(TOLERANCE[precision]);
          // The fourth token is beyond this step: untouched.
          expect(got.subarray(3 * n).every((v) => v === 0)).toBe(true);
        });
      }
    }
  }

  // GeGLU (Gemma): the ACT = 1 specialisation at every workgroup size, both precisions.
  for (const precision of ['f32', 'f16'] as const) {
    for (const wg of SWIGLU_WG) {
      it(`GeGLU (tanh GELU) matches the reference at WG=${wg} in ${precision}`, async (ctx) => {
        if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
        const { got, want, n } = await run(precision, wg, 3, 4, false, 'gelu_tanh');
        expect(maxRelDiff(got.subarray(0, 3 * n), want)).toBeLessThan(TOLERANCE[precision]);
        expect(got.subarray(3 * n).every((v) => v === 0)).toBe(true);
      });
    }
  }

  it('GeGLU by hand: gelu_tanh(0) = 0, (1) = 0.841192, (-1) = -0.158808, and its limits', async () => {
    // 0.5·1·(1 + tanh(sqrt(2/pi)·1.044715)) = 0.5·(1 + tanh(0.833554)) = 0.841192
    expect(geluTanh(1)).toBeCloseTo(0.841192, 6);
    expect(geluTanh(-1)).toBeCloseTo(-0.158808, 6);
    // silu(1) = 0.731059: the two activations are different functions.
    expect(swigluRef(new Float32Array([1]), new Float32Array([1]), 1, { n: 1 })[0]).toBeCloseTo(0.731059, 6);
    const { device } = await testGPU();
    const gate = new Float32Array([-200, -1, 0, 1, 200, 2]);
    const up = new Float32Array([1, 1, 1, 1, 1, 3]);
    const out = createBuffer(device, 6 * 4, STORAGE);
    const op = await createSwigluOp(opContext(device, 'f32'), { n: 6, gate: uploadAct(device, gate, 'f32'), up: uploadAct(device, up, 'f32'), out, activation: 'gelu_tanh' });
    await runPass(device, (pass) => op.encode(pass, 1));
    const got = Array.from(await readAct(device, out, 6, 'f32'));
    expect(Math.abs(got[0]!)).toBeLessThan(1e-30);
    expect(got[1]).toBeCloseTo(-0.158808, 5);
    expect(got[2]).toBe(0);
    expect(got[3]).toBeCloseTo(0.841192, 5);
    expect(got[4]).toBe(200);
    expect(got[5]).toBeCloseTo(3 * geluTanh(2), 5);
  });

  it('gives silu its limits for large |gate|', async () => {
    const { device } = await testGPU();
    const gate = new Float32Array([-200, -90, 0, 90, 200, 1]);
    const up = new Float32Array([1, 1, 1, 1, 1, 2]);
    const out = createBuffer(device, 6 * 4, STORAGE);
    const op = await createSwigluOp(opContext(device, 'f32'), { n: 6, gate: uploadAct(device, gate, 'f32'), up: uploadAct(device, up, 'f32'), out });
    await runPass(device, (pass) => op.encode(pass, 1));
    const got = Array.from(await readAct(device, out, 6, 'f32'));
    expect(got.slice(0, 5).map((v) => Math.abs(v) < 1e-30 ? 0 : v)).toEqual([0, 0, 0, 90, 200]);
    expect(got[5]).toBeCloseTo(2 / (1 + Math.exp(-1)), 6);
  });
});
