import { describe, expect, it } from 'vitest';
import { testGPU } from '../testing/gpu';
import { actRound, maxRelDiff, opContext, random, readAct, runPass, uploadAct } from '../testing/kernel-helpers';
import { KERNEL_TOLERANCE } from '../testing/tolerances';
import { createGeluOp, erfRef, GELU_WG, geluRef, geluTanhRef } from './gelu';

describe('gelu kernel (exact, erf)', () => {
  it('has a reference erf that meets known values (Abramowitz and Stegun table 7.1) to 1e-15', () => {
    const known: Array<[number, number]> = [[0.5, 0.5204998778130465], [1, 0.8427007929497149], [2, 0.9953222650189527], [2.5, 0.999593047982555], [3, 0.9999779095030014]];
    for (const [x, v] of known) {
      expect(Math.abs(erfRef(x) - v)).toBeLessThan(1e-15);
      expect(erfRef(-x)).toBe(-erfRef(x));
    }
  });

  for (const precision of ['f32', 'f16'] as const) {
    // f16 at the op's default WG only: lavapipe, which runs the f16 step, is slow.
    for (const wg of precision === 'f16' ? [64] : GELU_WG) {
      it(`applies 0.5·x·(1 + erf(x/√2)) in place at WG=${wg} in ${precision}, only this step's rows`, async (ctx) => {
        const gpu = await testGPU();
        if (precision === 'f16' && !gpu.info.f16) ctx.skip();
        const { device } = gpu;
        const [n, tokens, maxTokens] = [300, 3, 4];
        const x = actRound(random(maxTokens * n, 17 + wg, 8), precision);
        const buf = uploadAct(device, x, precision);
        const op = await createGeluOp(opContext(device, precision), { x: buf, n, wg });
        await runPass(device, (pass) => op.encode(pass, tokens));
        const got = await readAct(device, buf, maxTokens * n, precision);
        const used = tokens * n;
        const want = geluRef(x.subarray(0, used));
        expect(maxRelDiff(got.subarray(0, used), want)).toBeLessThan(KERNEL_TOLERANCE.gelu[precision]);
        // Not the tanh approximation (Gemma's gelu_pytorch_tanh): they part by ~1e-3 around |x| ≈ 2.
        const tanh = x.subarray(0, used).map((v) => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3))));
        expect(maxRelDiff(tanh, want)).toBeGreaterThan(1e-4);
        expect(Array.from(got.subarray(used))).toEqual(Array.from(x.subarray(used)));
      });
    }
  }

  it('applies the tanh approximation with tanh (SigLIP), apart from the exact form', async () => {
    const { device } = await testGPU();
    const n = 300;
    const x = random(2 * n, 31, 8);
    const buf = uploadAct(device, x, 'f32');
    const op = await createGeluOp(opContext(device, 'f32'), { x: buf, n, tanh: true });
    await runPass(device, (pass) => op.encode(pass, 2));
    const got = await readAct(device, buf, 2 * n, 'f32');
    expect(maxRelDiff(got, geluTanhRef(x))).toBeLessThan(KERNEL_TOLERANCE.gelu.f32);
    expect(maxRelDiff(got, geluRef(x))).toBeGreaterThan(1e-4);
  });
});
