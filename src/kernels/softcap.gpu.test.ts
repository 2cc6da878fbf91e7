import { KERNEL_TOLERANCE } from '../testing/tolerances';
import { describe, expect, it } from 'vitest';
import { testGPU } from '../testing/gpu';
import { createSoftcapOp, SOFTCAP_WG, softcapRef } from './softcap';
import { maxRelDiff, opContext, random, readAct, runPass, uploadAct } from '../testing/kernel-helpers';

describe('softcap kernel', () => {
  it('divides before capping, by hand', () => {
    expect(Array.from(softcapRef(new Float32Array([16, -8]), null, 8))).toEqual([2, -1]);
    expect(softcapRef(new Float32Array([240]), 30, 8)[0]).toBeCloseTo(30 * Math.tanh(1), 5);
  });

  it('is tanh(x / cap) * cap by hand', () => {
    const got = softcapRef(new Float32Array([0, 30, -60, 1e6]), 30);
    expect(got[0]).toBe(0);
    expect(got[1]).toBeCloseTo(30 * Math.tanh(1), 5); // 22.85
    expect(got[2]).toBeCloseTo(-30 * Math.tanh(2), 5); // -28.92
    expect(got[3]).toBe(30);
  });

  for (const wg of SOFTCAP_WG) {
    it(`caps this step's rows in place at WG=${wg}, leaving the others`, async () => {
      const { device } = await testGPU();
      const [n, rows, maxRows, cap] = [300, 2, 3, 30];
      // Spread past the cap, and huge values, whose tanh must saturate to exactly ±cap.
      const x = random(maxRows * n, 7 + wg, 80);
      x[0] = 1e30;
      x[1] = -1e30;
      const buf = uploadAct(device, x, 'f32');
      const op = await createSoftcapOp(opContext(device, 'f32'), { x: buf, n, cap, wg });
      await runPass(device, (pass) => op.encode(pass, rows));
      const got = await readAct(device, buf, maxRows * n, 'f32');
      const used = rows * n;
      expect(maxRelDiff(got.subarray(0, used), softcapRef(x.subarray(0, used), cap))).toBeLessThan(KERNEL_TOLERANCE.softcap.f32);
      expect([got[0], got[1]]).toEqual([cap, -cap]);
      expect(Array.from(got.subarray(used))).toEqual(Array.from(x.subarray(used)));
    });

    it(`divides by logits_scaling first, with or without a cap, at WG=${wg}`, async () => {
      const { device } = await testGPU();
      const [n, rows] = [300, 2];
      for (const cap of [null, 30]) {
        const x = random(rows * n, 9 + wg, 80);
        const buf = uploadAct(device, x, 'f32');
        const op = await createSoftcapOp(opContext(device, 'f32'), { x: buf, n, cap, div: 8, wg });
        await runPass(device, (pass) => op.encode(pass, rows));
        const got = await readAct(device, buf, rows * n, 'f32');
        const want = softcapRef(x, cap, 8);
        // Division is exact in f32 (both sides divide), the cap's tanh as above.
        expect(maxRelDiff(got, want), `cap ${cap}`).toBeLessThan(cap === null ? 1e-7 : KERNEL_TOLERANCE.softcap.f32);
        expect(maxRelDiff(softcapRef(x, cap), want)).toBeGreaterThan(0.1);
      }
    });
  }
});
