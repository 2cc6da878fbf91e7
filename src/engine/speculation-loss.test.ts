/**
 * Speculation across a lost GPU device (issue #32 with #33's recovery): the engine's rebuild makes
 * its draft model and its MTP head again on the new device, so a request resumed after the loss
 * keeps its greedy output and the guesses go on (the speculative counters move after the
 * recovery), and nothing of the old draft is left on the lost device. The device is destroyed as
 * a driver reset would (the raw device's destroy(), not the context's), as
 * src/transport/device-loss.test.ts does through the whole stack; buffers are counted at each
 * device as there.
 *
 * The engine loads twice (the device it loses, then the new one), and SwiftShader compiles every
 * pipeline again for each new device: one engine with both proposers, two short requests before,
 * across and after the loss.
 */
import { describe, expect, it } from 'vitest';
import { acquireGPU, type GPUContext } from '../gpu/device';
import { nodeGPU } from '../gpu/node-gpu';
import { openModel } from '../model/open';
import { ensureFixture } from '../testing/fixtures/shared';
import { drainGeneration, greedyRequest } from '../testing/sampling';
import { GpuEngine } from './engine';
import type { GenerateRequest } from './types';

/** A new device with the buffers made on it and not destroyed (`live`). */
async function trackedDevice(devices: Array<{ gpu: GPUContext; live: Set<GPUBuffer> }>): Promise<GPUContext> {
  const gpu = await acquireGPU({ gpu: await nodeGPU() });
  const live = new Set<GPUBuffer>();
  const { device } = gpu;
  const create = device.createBuffer.bind(device);
  device.createBuffer = (d: GPUBufferDescriptor): GPUBuffer => {
    const buffer = create(d);
    const destroy = buffer.destroy.bind(buffer);
    live.add(buffer);
    buffer.destroy = () => {
      live.delete(buffer);
      destroy();
    };
    return buffer;
  };
  devices.push({ gpu, live });
  return gpu;
}

const PROMPT = [5, 17, 42, 8, 99, 23, 17, 42];

describe('speculation across a lost device', () => {
  it("a draft model (the model's own Q8_0) and the MTP head (Qwen3.5's) are rebuilt on the new device: the same greedy output, guesses proposed (and the draft's taken) after the recovery, nothing of either left on the lost device", async () => {
    const paths = await ensureFixture({ arch: 'qwen35', preset: 'tiny', mtp: true }, { hf: [], gguf: ['Q8_0'] });
    const devices: Array<{ gpu: GPUContext; live: Set<GPUBuffer> }> = [];
    // maxBatch 8: a slot per sequence; their guesses (the draft's 3, the head's 1) take verify rows (engine.ts VERIFY_ROWS and the slots left).
    const opts = { precision: 'f32', contextLength: 64, pageSize: 4, prefillChunk: 16, maxBatch: 8, mtp: true, draft: { model: paths.gguf.Q8_0!, tokens: 3 } } as const;
    const engine = await GpuEngine.load(await openModel(paths.gguf.Q8_0!), { ...opts, gpu: await trackedDevice(devices), recovery: { acquire: () => trackedDevice(devices) } });
    // The draft (the engine's speculation for requests naming none), and the MTP head (k 1) asked for.
    const requests: Array<GenerateRequest['speculation']> = [undefined, { mtp: { k: 1 } }];
    const both = (onToken?: (n: number) => void) =>
      Promise.all(requests.map((speculation, i) => drainGeneration(engine.generate(greedyRequest(PROMPT, 6, {}, speculation ? { speculation } : {})), i === 0 ? onToken : undefined)));
    try {
      const clean = await both();
      const liveBefore = devices[0]!.live.size;
      const lost = await both((n) => n === 2 && devices[0]!.gpu.device.destroy());
      const draftSteps = engine.kvStats.draftSteps!;
      const after = await both();
      expect(engine.recoveries).toBe(1);
      expect(lost.map((r) => r.ids)).toEqual(clean.map((r) => r.ids));
      expect(after.map((r) => r.ids)).toEqual(clean.map((r) => r.ids));
      // The draft is the model itself: its guesses are taken, on the new device as before the loss.
      const [drafted, mtp] = after.map((r) => r.result.speculation!);
      expect(drafted!.accepted).toBeGreaterThan(0);
      expect(drafted).toEqual(clean[0]!.result.speculation);
      expect(engine.kvStats.draftSteps).toBeGreaterThan(draftSteps);
      expect(engine.kvStats.draftFailed).toBe(false);
      expect(engine.draftModel!.pages.used).toBe(0);
      // The random head's guesses are not taken (reference/mtp.test.ts), but the new head guesses a token per step, as before the loss.
      expect(mtp!.proposed).toBeGreaterThan(0);
      expect(mtp).toEqual(clean[1]!.result.speculation);
      // The new device holds what the lost one held, the draft's and the head's included; the lost one nothing but what a device keeps for its lifetime.
      expect(devices).toHaveLength(2);
      expect(devices[1]!.live.size).toBe(liveBefore);
      expect(devices[0]!.live.size).toBeLessThan(5);
    } finally {
      await engine.dispose();
    }
  }, 600_000);
});
