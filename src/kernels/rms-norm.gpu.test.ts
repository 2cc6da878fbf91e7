import { KERNEL_TOLERANCE } from '../testing/tolerances';
import { describe, expect, it } from 'vitest';
import { createBuffer, packParams, readBuffer, STORAGE, uploadBuffer } from '../gpu/buffers';
import { pipelineCache } from '../gpu/run-kernel';
import { runKernel } from '../gpu/run-kernel';
import { maxAbsDiff, testGPU } from '../testing/gpu';
import { createRmsNormOp, RMS_NORM_WG, rmsNormKernel, rmsNormRef } from './rms-norm';
import { actRound, maxRelDiff, opContext, readAct, runPass, uploadAct } from '../testing/kernel-helpers';

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
  const TOLERANCE = KERNEL_TOLERANCE.rmsNorm.f32;

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
          [{ input: x }, { input: w }, { output: rows * n * 4 }, { uniform: packParams([['u32', rows], ['u32', n], ['f32', eps], ['f32', 1], ['u32', 1]]) }],
          [rows],
        );
        const { diff } = maxAbsDiff(new Float32Array(y!), rmsNormRef(x, w, rows, n, eps));
        expect(diff).toBeLessThan(TOLERANCE);
      });
    }
  }

  // Per-head rows share one weight row (qwen3's q/k norm); a grouped norm's rows each take their
  // group's (Mamba-2's, weightPerRow).
  for (const weightPerRow of [false, true]) {
    it(`runs as an op over per-head rows for a varying token count${weightPerRow ? ', a weight row per group' : ''}`, async () => {
      const gpu = await testGPU();
      const { device } = gpu;
      const [heads, n, maxTokens] = [4, 64, 3];
      const x = random(maxTokens * heads * n, 99);
      const w = random(weightPerRow ? heads * n : n, 5);
      const xBuf = uploadBuffer(device, x, STORAGE);
      const yBuf = createBuffer(device, x.byteLength, STORAGE);
      const op = await createRmsNormOp(
        { device, cache: pipelineCache(device), precision: 'f32' },
        { x: xBuf, weight: uploadBuffer(device, w, STORAGE), y: yBuf, n, rowsPerToken: heads, weightPerRow, maxTokens, eps: 1e-6 },
      );
      for (const tokens of [2, 3]) {
        device.queue.writeBuffer(yBuf, 0, new Float32Array(x.length));
        const encoder = device.createCommandEncoder();
        const pass = encoder.beginComputePass();
        op.encode(pass, tokens);
        pass.end();
        device.queue.submit([encoder.finish()]);
        const y = new Float32Array(await readBuffer(device, yBuf));
        const rows = tokens * heads;
        expect(maxAbsDiff(y.subarray(0, rows * n), rmsNormRef(x, w, rows, n, 1e-6, weightPerRow ? heads : 1)).diff).toBeLessThan(TOLERANCE);
        // Rows past this step's tokens are untouched.
        expect(y.subarray(rows * n).every((v) => v === 0)).toBe(true);
      }
    });
  }

  // A post-norm and its residual add in one dispatch: y += scale · norm(x), summed in f32; the
  // same tolerance (O(1) values). Rows past the step's tokens keep their y.
  for (const WG of RMS_NORM_WG) {
    it(`adds the scaled normed rows into y at WG=${WG}`, async () => {
      const gpu = await testGPU();
      const { device } = gpu;
      const [rows, n, tokens, scale] = [3, 1000, 2, 0.5];
      const x = random(rows * n, 31);
      const w = random(n, 32);
      const y0 = random(rows * n, 33);
      const y = uploadBuffer(device, y0, STORAGE);
      const op = await createRmsNormOp(opContext(device, 'f32'), { x: uploadBuffer(device, x, STORAGE), weight: uploadBuffer(device, w, STORAGE), y, n, maxTokens: rows, eps: 1e-6, wg: WG, add: { scale } });
      await runPass(device, (pass) => op.encode(pass, tokens));
      const got = new Float32Array(await readBuffer(device, y));
      const normed = rmsNormRef(x, w, tokens, n, 1e-6);
      const want = y0.map((v, i) => (i < tokens * n ? v + scale * normed[i]! : v));
      expect(maxAbsDiff(got, want).diff).toBeLessThan(TOLERANCE);
    });
  }

  // f16 activations in and out (the sum of squares stays f32): the output's own rounding, 2^-11
  // relative, dominates; 2e-3 relative leaves room for one more rounding of the scaled product.
  for (const WG of RMS_NORM_WG) {
    it(`matches the reference at WG=${WG} with f16 activations`, async ({ skip }) => {
      const gpu = await testGPU();
      skip(!gpu.info.f16, 'the device has no shader-f16');
      const { device } = gpu;
      const [rows, n] = [3, 1000];
      const x = actRound(random(rows * n, 17), 'f16');
      const w = random(n, 18);
      const y = createBuffer(device, rows * n * 2, STORAGE);
      const op = await createRmsNormOp(opContext(device, 'f16'), { x: uploadAct(device, x, 'f16'), weight: uploadBuffer(device, w, STORAGE), y, n, rowsPerToken: 1, maxTokens: rows, eps: 1e-6, wg: WG });
      await runPass(device, (pass) => op.encode(pass, rows));
      const got = await readAct(device, y, rows * n, 'f16');
      expect(maxRelDiff(got, actRound(rmsNormRef(x, w, rows, n, 1e-6), 'f16'))).toBeLessThan(KERNEL_TOLERANCE.rmsNorm.f16);
    });
  }

  // The f16 path's residual stream is f32 (x_t held at f32): a row past f16's range (×1e5) is
  // normed into f16 y; error as above (the sum of squares in f32, y's own rounding).
  for (const WG of RMS_NORM_WG) {
    it(`norms an f32 stream beyond f16 range into f16 at WG=${WG} (f16)`, async ({ skip }) => {
      const gpu = await testGPU();
      skip(!gpu.info.f16, 'the device has no shader-f16');
      const { device } = gpu;
      const [rows, n] = [3, 1000];
      const x = random(rows * n, 27).map((v) => 1e5 * v);
      const w = random(n, 28);
      const y = createBuffer(device, rows * n * 2, STORAGE);
      const op = await createRmsNormOp(opContext(device, 'f16'), { x: uploadAct(device, x, 'f32'), xF32: true, weight: uploadBuffer(device, w, STORAGE), y, n, maxTokens: rows, eps: 1e-6, wg: WG });
      await runPass(device, (pass) => op.encode(pass, rows));
      const got = await readAct(device, y, rows * n, 'f16');
      expect(Math.max(...x.map(Math.abs))).toBeGreaterThan(65504);
      expect(maxRelDiff(got, actRound(rmsNormRef(x, w, rows, n, 1e-6), 'f16'))).toBeLessThan(KERNEL_TOLERANCE.rmsNorm.f16);
    });
  }

  // The f16 engine's post-norm (Gemma 2/3, OLMo 2): the f32 branch xb2 (×1e5) normed by large
  // weights (×1e5, as the fixture's streamScale draws them) and added into the f32 stream
  // (×1e5), nothing in f16. Values to about 6e5, so f32 roundings and the f32 sum of squares give
  // about 1e-6 relative: 2 absolute; a store instead of an add, or an f16 step, is off by 1e4 or more.
  it('adds a normed f32 branch beyond f16 range into an f32 stream at the engine\'s WG (f16)', async ({ skip }) => {
    const gpu = await testGPU();
    skip(!gpu.info.f16, 'the device has no shader-f16');
    const { device } = gpu;
    const [rows, n] = [3, 1000];
    const x = random(rows * n, 41).map((v) => 1e5 * v);
    const w = random(n, 42).map((v) => 1e5 * v);
    const y0 = random(rows * n, 43).map((v) => 1e5 * v);
    const y = uploadAct(device, y0, 'f32');
    const op = await createRmsNormOp(opContext(device, 'f16'), { x: uploadAct(device, x, 'f32'), xF32: true, weight: uploadBuffer(device, w, STORAGE), y, yF32: true, n, maxTokens: rows, eps: 1e-6, add: { scale: 1 } });
    await runPass(device, (pass) => op.encode(pass, rows));
    const got = await readAct(device, y, rows * n, 'f32');
    const want = rmsNormRef(x, w, rows, n, 1e-6).map((v, i) => v + y0[i]!);
    expect(Math.max(...want.map(Math.abs))).toBeGreaterThan(65504);
    expect(maxAbsDiff(got, want).diff).toBeLessThan(2);
  });
});
