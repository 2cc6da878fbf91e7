import { KERNEL_TOLERANCE } from '../testing/tolerances';
import { describe, expect, it } from 'vitest';
import { testGPU } from '../testing/gpu';
import { ADD_WG, addRef, createAddOp } from './add';
import { actRound, maxRelDiff, opContext, random, readAct, runPass, uploadAct } from '../testing/kernel-helpers';

describe('add kernel', () => {
  // One f32 addition: exact up to rounding; f16 rounds the sum once (2^-11 relative).
  const TOLERANCE = KERNEL_TOLERANCE.add;

  for (const precision of ['f32', 'f16'] as const) {
    for (const wg of ADD_WG) {
      it(`adds the residual in place at WG=${wg} in ${precision}, only for this step's tokens`, async (ctx) => {
        const gpu = await testGPU();
        if (precision === 'f16' && !gpu.info.f16) ctx.skip();
        const { device } = gpu;
        const [n, tokens, maxTokens] = [300, 3, 5];
        const x = actRound(random(maxTokens * n, 11 + wg, 4), precision);
        const y = actRound(random(maxTokens * n, 12 + wg, 4), precision);
        const xBuf = uploadAct(device, x, precision);
        const op = await createAddOp(opContext(device, precision), { x: xBuf, y: uploadAct(device, y, precision), n, wg });
        await runPass(device, (pass) => op.encode(pass, tokens));
        const got = await readAct(device, xBuf, maxTokens * n, precision);
        const used = tokens * n;
        expect(maxRelDiff(got.subarray(0, used), addRef(x.subarray(0, used), y.subarray(0, used)))).toBeLessThan(TOLERANCE[precision]);
        expect(Array.from(got.subarray(used))).toEqual(Array.from(x.subarray(used)));
      });

      it(`scales the branch before adding it (Granite's residual multiplier) at WG=${wg} in ${precision}`, async (ctx) => {
        const gpu = await testGPU();
        if (precision === 'f16' && !gpu.info.f16) ctx.skip();
        const { device } = gpu;
        const [n, tokens, scale] = [300, 2, 0.22];
        const x = actRound(random(tokens * n, 21 + wg, 4), precision);
        const y = actRound(random(tokens * n, 22 + wg, 4), precision);
        const xBuf = uploadAct(device, x, precision);
        const op = await createAddOp(opContext(device, precision), { x: xBuf, y: uploadAct(device, y, precision), n, scale, wg });
        await runPass(device, (pass) => op.encode(pass, tokens));
        const got = await readAct(device, xBuf, tokens * n, precision);
        const want = addRef(x, y, scale);
        // Three f32 roundings now (the scale as f32, the product, the sum): 3e-7 in f32.
        expect(maxRelDiff(got, want)).toBeLessThan(precision === 'f32' ? 3e-7 : TOLERANCE.f16);
        // The scale is there: the unscaled sum is far off.
        expect(maxRelDiff(addRef(x, y), want)).toBeGreaterThan(0.1);
      });
    }
  }

  // A bias (BROADCAST): one f32 row added to each token's, f32 and f16 activations (f16 once: lavapipe is slow).
  for (const [precision, wg] of [['f32', 64], ['f32', 256], ['f16', 64]] as const) {
    it(`adds an f32 bias row to each token's row at WG=${wg} in ${precision}, only this step's tokens`, async (ctx) => {
      const gpu = await testGPU();
      if (precision === 'f16' && !gpu.info.f16) ctx.skip();
      const { device } = gpu;
      const [n, tokens, maxTokens] = [300, 3, 4];
      const x = actRound(random(maxTokens * n, 31 + wg, 4), precision);
      const b = random(n, 32, 1);
      const xBuf = uploadAct(device, x, precision);
      const op = await createAddOp(opContext(device, precision), { x: xBuf, y: uploadAct(device, b, 'f32'), n, wg, broadcast: true });
      await runPass(device, (pass) => op.encode(pass, tokens));
      const got = await readAct(device, xBuf, maxTokens * n, precision);
      const used = tokens * n;
      expect(maxRelDiff(got.subarray(0, used), addRef(x.subarray(0, used), b))).toBeLessThan(TOLERANCE[precision]);
      expect(Array.from(got.subarray(used))).toEqual(Array.from(x.subarray(used)));
    });
  }

  // The f16 path's residual stream is f32 (x_t held at f32), and so is the branch the engine adds
  // here (Granite's scaled o/down output, y_t held at f32): both past f16's range (×1e5), summed
  // and stored in f32 (2⁻²³ relative: the scale of ½ is exact, one rounding of the sum).
  for (const wg of ADD_WG) {
    it(`adds an f32 branch into an f32 stream beyond f16 range at WG=${wg} (f16)`, async (ctx) => {
      const gpu = await testGPU();
      if (!gpu.info.f16) ctx.skip();
      const { device } = gpu;
      const [n, tokens, scale] = [300, 2, 0.5];
      const x = random(tokens * n, 51 + wg, 1e5);
      const y = random(tokens * n, 52 + wg, 1e5);
      const xBuf = uploadAct(device, x, 'f32');
      const op = await createAddOp(opContext(device, 'f16'), { x: xBuf, xF32: true, y: uploadAct(device, y, 'f32'), yF32: true, n, scale, wg });
      await runPass(device, (pass) => op.encode(pass, tokens));
      const got = await readAct(device, xBuf, tokens * n, 'f32');
      expect(Math.max(...x.map(Math.abs))).toBeGreaterThan(65504);
      expect(maxRelDiff(got, addRef(x, y, scale))).toBeLessThan(3e-7);
    });
  }
});
