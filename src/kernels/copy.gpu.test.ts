import { describe, expect, it } from 'vitest';
import { createBuffer, readBuffer, STORAGE, uploadBuffer } from '../gpu/buffers';
import { testGPU } from '../testing/gpu';
import { COPY_WG, copyRef, createCopyOp, measureCopyBandwidth } from './copy';
import { opContext, runPass } from '../testing/kernel-helpers';

describe('copy kernel', () => {
  for (const wg of COPY_WG) {
    it(`copies every word at WG=${wg}, through the grid-stride loop, and nothing past the end`, async () => {
      const { device } = await testGPU();
      const words = 4 * 1000 + 4; // 1001 vec4s: not a multiple of the grid
      const src = new Uint32Array(words).map((_, i) => (i * 2654435761) >>> 0);
      const bytes = (words - 4) * 4; // leave the last vec4 uncopied
      const dst = createBuffer(device, words * 4, STORAGE);
      // Two workgroups only: most words are reached by later trips of the loop.
      const op = await createCopyOp(opContext(device, 'f32'), { src: uploadBuffer(device, src), dst, bytes, wg, maxGroups: 2 });
      await runPass(device, (pass) => op.encode(pass));
      const got = new Uint32Array(await readBuffer(device, dst));
      expect(Array.from(got.subarray(0, words - 4))).toEqual(Array.from(copyRef(src.subarray(0, words - 4))));
      expect(Array.from(got.subarray(words - 4))).toEqual([0, 0, 0, 0]);
    });
  }

  it('refuses a size that is not a whole number of vec4 words', async () => {
    const { device } = await testGPU();
    const b = createBuffer(device, 64, STORAGE);
    await expect(createCopyOp(opContext(device, 'f32'), { src: b, dst: b, bytes: 20 })).rejects.toThrow(/multiple of 16/);
  });

  it('measures a finite, positive bandwidth', async () => {
    const gpu = await testGPU();
    const r = await measureCopyBandwidth(opContext(gpu.device, 'f32'), { bytes: 1 << 20, iterations: 2, repeats: 1 });
    expect(r.bytes).toBe(1 << 20);
    expect(r.gbPerSecond).toBeGreaterThan(0);
    expect(Number.isFinite(r.gbPerSecond)).toBe(true);
    expect(r.timestampGBps).toBeUndefined();
  });

  it('times the copies with timestamps too when asked, on a device that has them', async (ctx) => {
    const gpu = await testGPU();
    if (!gpu.info.timestamps) ctx.skip();
    const r = await measureCopyBandwidth(opContext(gpu.device, 'f32'), { bytes: 1 << 20, iterations: 2, repeats: 1, timestamps: true });
    expect(r.timestampGBps).toBeGreaterThan(0);
    expect(Number.isFinite(r.timestampGBps)).toBe(true);
    // A pass's GPU time is inside the wall time of its submission, so its rate is no lower.
    expect(r.timestampGBps!).toBeGreaterThan(r.gbPerSecond * 0.5);
  });
});
