import { describe, expect, it } from 'vitest';
import { STORAGE, uploadBuffer } from '../gpu/buffers';
import { testGPU } from '../testing/gpu';
import { actRound, maxRelDiff, opContext, random, readAct, runPass, uploadAct } from '../testing/kernel-helpers';
import { KERNEL_TOLERANCE } from '../testing/tolerances';
import { createLayerNormOp, LAYER_NORM_WG, layerNormRef } from './layer-norm';

describe('layer_norm kernel', () => {
  for (const precision of ['f32', 'f16'] as const) {
    // f16 at the op's default WG only: lavapipe, which runs the f16 step, is slow.
    for (const wg of precision === 'f16' ? [64] : LAYER_NORM_WG) {
      // Rows with a large mean (+30): a one-pass E[x²] − E[x]² would lose the variance in f32.
      it(`normalises rows (mean and variance), scales by w and adds b at WG=${wg} in ${precision}, only this step's rows`, async (ctx) => {
        const gpu = await testGPU();
        if (precision === 'f16' && !gpu.info.f16) ctx.skip();
        const { device } = gpu;
        const [n, rows, maxTokens, eps] = [300, 3, 4, 1e-12];
        const x = actRound(random(maxTokens * n, 3 + wg, 2).map((v) => v + 30), precision);
        const w = random(n, 5, 1);
        const b = random(n, 6, 0.5);
        const y = uploadAct(device, new Float32Array(maxTokens * n).fill(7), precision);
        const op = await createLayerNormOp(opContext(device, precision), { x: uploadAct(device, x, precision), weight: uploadBuffer(device, w, STORAGE), bias: uploadBuffer(device, b, STORAGE), y, n, maxTokens, eps, wg });
        await runPass(device, (pass) => op.encode(pass, rows));
        const got = await readAct(device, y, maxTokens * n, precision);
        const used = rows * n;
        expect(maxRelDiff(got.subarray(0, used), layerNormRef(x, w, b, rows, n, eps))).toBeLessThan(KERNEL_TOLERANCE.layerNorm[precision]);
        // The bias is there, and rows past the step's are untouched.
        expect(maxRelDiff(layerNormRef(x, w, new Float32Array(n), rows, n, eps), layerNormRef(x, w, b, rows, n, eps))).toBeGreaterThan(0.1);
        expect(Array.from(got.subarray(used))).toEqual(new Array(n).fill(7));
      });
    }
  }
});
