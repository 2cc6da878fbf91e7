import { describe, expect, it } from 'vitest';
import { GpuEngine } from '../engine/engine';
import { readBuffer, STORAGE, uploadBuffer } from '../gpu/buffers';
import { createAddOp } from '../kernels/add';
import { actBytes } from '../kernels/op';
import { gpuBytesPerRow } from '../kernels/weights';
import { openModel } from '../model/open';
import { useFixtureURLs } from '../testing/fixture-server';
import { generateGreedy } from '../testing/engine-check';
import { opContext } from '../testing/kernel-helpers';
import { testGPU } from '../testing/gpu';
import { trackBuffers } from './memory';
import { aggregateByKernel, aggregateByOp, stepTotals, TimestampProfiler, UNLABELLED } from './profiler';

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

describe('a profiled engine run', () => {
  const urls = useFixtureURLs('llama');

  it('labels every dispatch with its op, layer and bytes, and its per-op times add up to the GPU time', async (ctx) => {
    const gpu = await testGPU();
    if (!gpu.info.timestamps) ctx.skip();
    const opened = await openModel(urls()['Q8_0']!);
    const engine = await GpuEngine.load(opened, { gpu, contextLength: 64, precision: 'f32' });
    const profiler = new TimestampProfiler(gpu.device);
    engine.profiler = profiler;
    try {
      await generateGreedy(engine, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], 3);
      const steps = await profiler.collect();
      expect(steps).toHaveLength(3); // the 12-token prompt's step, then two decode steps
      const c = engine.config;
      for (const step of steps) {
        for (const d of step.dispatches) {
          expect(d.role, d.kernel).not.toBe(UNLABELLED);
          expect(d.bytes, `${d.role} ${d.kernel}`).toBeGreaterThan(0);
          expect(Number.isFinite(d.bytes)).toBe(true);
        }
        const byOp = aggregateByOp([step]);
        const t = stepTotals(step);
        // Per-op times sum to the step's dispatch time, which fits in the step's GPU span.
        expect(byOp.reduce((n, o) => n + o.ms, 0) * 1e6).toBeCloseTo(t.ns, 0);
        expect(t.ns).toBeLessThanOrEqual(t.spanNs);
        expect(byOp.reduce((n, o) => n + o.bytes, 0)).toBe(t.bytes);
      }
      const decode = steps[2]!.dispatches;
      // One q projection per layer, labelled with its layer; the head once.
      expect(decode.filter((d) => d.role === 'q').map((d) => d.layer)).toEqual([...Array(c.numLayers).keys()]);
      expect(decode.filter((d) => d.role === 'lm_head')).toHaveLength(1);
      for (const role of ['embed', 'k', 'v', 'o', 'gate', 'up', 'down', 'attention', 'kv_write', 'sample']) expect(decode.some((d) => d.role === role), role).toBe(true);
      // A decode step's q reads its weight once, plus one token's input row and output row.
      const wq = opened.tensors.get('blk.0.attn_q.weight')!.info;
      const qRows = c.numHeads * c.headDim;
      const qBytes = qRows * gpuBytesPerRow(wq.dtype, c.hiddenSize) + (c.hiddenSize + qRows) * actBytes('f32');
      expect(decode.find((d) => d.role === 'q')!.bytes).toBe(qBytes);
      // Decode attention reads the whole context's K and V: 14 keys at the last step (12 + 2).
      const attnKv = 14 * 2 * c.numKvHeads * c.headDim * 4;
      const attn = decode.filter((d) => d.role === 'attention' && d.layer === 0);
      expect(attn.reduce((n, d) => n + d.bytes!, 0)).toBeGreaterThan(attnKv);
    } finally {
      engine.profiler = null;
      profiler.destroy();
      await engine.dispose();
    }
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
