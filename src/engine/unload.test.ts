/**
 * Every GPU buffer the engine creates has its destroy (issue #12, defect 7): loading and unloading
 * a model 20 times on one device leaves the device's live buffers where they started. Counted at
 * the device (every createBuffer and destroy), so no buffer escapes the count.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openModel, type OpenedModel } from '../model/open';
import { generateGreedy } from '../testing/engine-check';
import { ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { serveDirectory, type StaticServer } from '../testing/server';
import { GpuEngine } from './engine';
import type { GPUContext } from '../gpu/device';
import { relative } from 'node:path';

let gpu: GPUContext;
let server: StaticServer;
let opened: OpenedModel;
const live = new Set<GPUBuffer>();
let restore: () => void;

beforeAll(async () => {
  gpu = await testGPU();
  const paths = await ensureFixture({ arch: 'qwen3', preset: 'tiny' }, { hf: ['F32'], gguf: [] });
  server = await serveDirectory(paths.root);
  opened = await openModel(`${server.url}/${relative(paths.root, paths.hf.F32!).split('\\').join('/')}`);
  const { device } = gpu;
  const create = device.createBuffer;
  device.createBuffer = function (descriptor: GPUBufferDescriptor): GPUBuffer {
    const buffer = create.call(device, descriptor);
    const destroy = buffer.destroy;
    live.add(buffer);
    buffer.destroy = function () {
      live.delete(buffer);
      return destroy.call(buffer);
    };
    return buffer;
  };
  restore = () => void (device.createBuffer = create);
});
afterAll(async () => {
  restore?.();
  await server?.close();
});

describe('unloading the engine', () => {
  it('frees every buffer it created: 20 loads and unloads leave the live count where it started', async () => {
    const cycle = async (run: boolean) => {
      const engine = await GpuEngine.load(opened, { gpu, precision: 'f32', contextLength: 256 });
      if (run) expect(await generateGreedy(engine, [1, 2, 3], 3)).toHaveLength(3);
      await engine.dispose();
    };
    // Once first: what a device keeps for its lifetime (e.g. a shared zero bias) is made here.
    await cycle(true);
    const start = live.size;
    for (let i = 0; i < 20; i++) await cycle(i === 19);
    expect([...live].map((b) => b.label)).toEqual([...live].slice(0, start).map((b) => b.label));
    expect(live.size).toBe(start);
  }, 120_000);
});
