import { describe, expect, it } from 'vitest';
import { readBuffer, STORAGE, uploadBuffer } from '../gpu/buffers';
import { testGPU } from '../testing/gpu';
import { actRound, maxRelDiff, opContext, random, runPass, uploadAct } from '../testing/kernel-helpers';
import { KERNEL_TOLERANCE } from '../testing/tolerances';
import { createPoolMeanOp, POOL_MEAN_WG, poolMeanRef } from './pool-mean';

describe('pool_mean kernel', () => {
  // Three sequences of 1, 7 and 40 tokens in one step; y has a fourth row the step leaves alone.
  const lastToken = [0, 7, 47];
  for (const precision of ['f32', 'f16'] as const) {
    // f16 at the op's default WG only: lavapipe, which runs the f16 step, is slow.
    for (const wg of precision === 'f16' ? [64] : POOL_MEAN_WG) {
      it(`averages each sequence's rows at WG=${wg} in ${precision}, only this step's sequences`, async (ctx) => {
        const gpu = await testGPU();
        if (precision === 'f16' && !gpu.info.f16) ctx.skip();
        const { device } = gpu;
        const n = 300;
        const x = actRound(random(48 * n, 7 + wg, 3), precision);
        const y = uploadBuffer(device, new Float32Array(4 * n).fill(5), STORAGE);
        const op = await createPoolMeanOp(opContext(device, precision), { x: uploadAct(device, x, precision), lastToken: uploadBuffer(device, new Uint32Array(lastToken), STORAGE), y, n, wg });
        await runPass(device, (pass) => op.encode(pass, lastToken.length));
        const got = new Float32Array(await readBuffer(device, y, 4 * n * 4));
        expect(maxRelDiff(got.subarray(0, 3 * n), poolMeanRef(x, n, lastToken))).toBeLessThan(KERNEL_TOLERANCE.poolMean[precision]);
        expect(Array.from(got.subarray(3 * n))).toEqual(new Array(n).fill(5));
        // Each sequence its own: the one-token sequence's mean is its row.
        expect(Array.from(got.subarray(0, n))).toEqual(Array.from(x.subarray(0, n)));
        op.destroy();
      });
    }
  }
});
