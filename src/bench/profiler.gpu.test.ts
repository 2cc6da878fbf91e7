import { describe, expect, it } from 'vitest';
import { readBuffer, STORAGE, uploadBuffer } from '../gpu/buffers';
import { createAddOp } from '../kernels/add';
import { opContext } from '../testing/kernel-helpers';
import { testGPU } from '../testing/gpu';
import { trackBuffers } from './memory';
import { aggregateByKernel, TimestampProfiler } from './profiler';

/** x = 1s, y = 2s (n floats), an add op x += y on them, and a profiler; skips without timestamps. */
async function setup(n: number, skip: () => void) {
  const gpu = await testGPU();
  if (!gpu.info.timestamps) skip();
  const { device } = gpu;
  const x = uploadBuffer(device, new Float32Array(n).fill(1), STORAGE);
  const y = uploadBuffer(device, new Float32Array(n).fill(2), STORAGE);
  const add = await createAddOp(opContext(device, 'f32'), { x, y, n });
  return { device, x, add, profiler: new TimestampProfiler(device) };
}

describe('the timestamp profiler', () => {
  it('runs each dispatch in its own timed pass, with the same results as one pass', async (ctx) => {
    const n = 256;
    const { device, x, add, profiler } = await setup(n, ctx.skip);
    for (let step = 0; step < 2; step++) {
      const encoder = device.createCommandEncoder();
      const pass = profiler.begin(encoder);
      add.encode(pass, 1);
      add.encode(pass, 1);
      pass.end();
      profiler.end(encoder);
      device.queue.submit([encoder.finish()]);
    }
    const steps = await profiler.collect();
    profiler.destroy();
    expect(steps).toHaveLength(2);
    expect(steps[0]!.dispatches.map((d) => d.kernel.split('/')[0])).toEqual(['add', 'add']);
    expect(steps.flatMap((s) => s.dispatches).every((d) => d.ns >= 0 && Number.isFinite(d.ns))).toBe(true);
    expect(aggregateByKernel(steps)).toMatchObject([{ kernel: 'add', calls: 2 }]);
    // four adds of 2 to 1
    expect(Array.from(new Float32Array(await readBuffer(device, x)))).toEqual(new Array(n).fill(9));
  });

  it('keeps a step recorded over two command buffers as one step', async (ctx) => {
    const n = 64;
    const { device, x, add, profiler } = await setup(n, ctx.skip);
    const first = device.createCommandEncoder();
    let pass = profiler.begin(first);
    add.encode(pass, 1);
    pass.end();
    device.queue.submit([first.finish()]);
    const second = device.createCommandEncoder();
    pass = profiler.begin(second, true);
    add.encode(pass, 1);
    add.encode(pass, 1);
    pass.end();
    profiler.end(second);
    device.queue.submit([second.finish()]);
    const steps = await profiler.collect();
    profiler.destroy();
    expect(steps).toHaveLength(1);
    expect(steps[0]!.dispatches).toHaveLength(3);
    expect(steps[0]!.dispatches.every((d) => d.ns >= 0 && Number.isFinite(d.ns))).toBe(true);
    expect(Array.from(new Float32Array(await readBuffer(device, x)))).toEqual(new Array(n).fill(7));
  });
});

describe('the buffer tracker', () => {
  it('follows live bytes and their peak, and stops patching the device', async () => {
    const { device } = await testGPU();
    const t = trackBuffers(device);
    const a = device.createBuffer({ size: 1024, usage: STORAGE });
    const b = device.createBuffer({ size: 4096, usage: STORAGE });
    a.destroy();
    a.destroy(); // twice: counted once
    expect(t.live).toBe(4096);
    expect(t.peak).toBe(5120);
    t.stop();
    device.createBuffer({ size: 64, usage: STORAGE }).destroy();
    b.destroy();
    expect(t.peak).toBe(5120);
  });
});
