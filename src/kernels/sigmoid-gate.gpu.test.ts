import { describe, expect, it } from 'vitest';
import { testGPU } from '../testing/gpu';
import { actRound, maxRelDiff, opContext, random, readAct, runPass, uploadAct } from '../testing/kernel-helpers';
import { createSigmoidGateOp, sigmoidGateRef } from './sigmoid-gate';

describe('sigmoid_gate kernel', () => {
  for (const precision of ['f32', 'f16'] as const) {
    it(`multiplies 3 rows of 100 by sigmoid of the gate in place (${precision})`, async (ctx) => {
      const gpu = await testGPU();
      if (precision === 'f16' && !gpu.info.f16) ctx.skip();
      const [n, rows] = [100, 3];
      const x = actRound(random(n * rows, 1, 3), precision);
      const g = actRound(random(n * rows, 2, 4), precision);
      const xBuf = uploadAct(gpu.device, x, precision);
      const op = await createSigmoidGateOp(opContext(gpu.device, precision), { x: xBuf, g: uploadAct(gpu.device, g, precision), n });
      await runPass(gpu.device, (pass) => op.encode(pass, rows));
      expect(maxRelDiff(await readAct(gpu.device, xBuf, n * rows, precision), actRound(sigmoidGateRef(x, g), precision))).toBeLessThan(precision === 'f32' ? 1e-6 : 2e-3);
    });
  }
});
