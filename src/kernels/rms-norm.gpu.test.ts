import { describe, expect, it } from 'vitest';
import { packParams } from '../gpu/buffers';
import { runKernel } from '../gpu/run-kernel';
import { maxAbsDiff, testGPU } from '../testing/gpu';
import { RMS_NORM_WG, rmsNormKernel, rmsNormRef } from './rms-norm';

function random(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (s / 2 ** 32) * 4 - 2;
  }
  return out;
}

describe('rms_norm kernel', () => {
  // f32 accumulation over ≤ 1000 elements: relative error well under 1e-5; 1e-5 absolute on O(1) outputs.
  const TOLERANCE = 1e-5;

  for (const WG of RMS_NORM_WG) {
    for (const [rows, n] of [[1, 64], [3, 256], [5, 1000]] as const) {
      it(`matches the reference at WG=${WG} for ${rows}×${n}`, async () => {
        const gpu = await testGPU();
        const x = random(rows * n, rows * 7 + n);
        const w = random(n, n + 1);
        const eps = 1e-6;
        const [y] = await runKernel(
          gpu,
          rmsNormKernel,
          { constants: { WG } },
          [{ input: x }, { input: w }, { output: rows * n * 4 }, { uniform: packParams([['u32', rows], ['u32', n], ['f32', eps]]) }],
          [rows],
        );
        const { diff } = maxAbsDiff(new Float32Array(y!), rmsNormRef(x, w, rows, n, eps));
        expect(diff).toBeLessThan(TOLERANCE);
      });
    }
  }
});
