/**
 * Recovery from a lost GPU device through the engine a page or Node gets (issue #33): the device
 * is destroyed as a driver reset would (`injectFault`, not our own destroy()), the engine rebuilds
 * on a new device from the model's cache, and every request in flight goes on. Each output must
 * equal its run without the loss: greedy, seeded sampling, a grammar and a LoRA adapter decoding
 * at once, with a fifth prompt in its prefill; a loss during the load too. Past the limit of
 * losses, requests end with `device_lost` and the engine stays down. No buffer is left behind:
 * each device's buffers are counted at the device, as unload.test.ts does.
 *
 * SwiftShader compiles every pipeline again for each new device (the slow part of a load), so
 * one file holds every case over two rebuilds: the load's and the streams'.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureLoraFixture } from '../testing/fixtures/lora-write';
import type { GpuEngine } from '../engine/engine';
import { internalsOf } from './internals';
import { createLocalEngine } from './local';
import type { StructuredError } from './errors';
import type { EngineHandle } from './types';

/** A device and the buffers created on it and not destroyed. */
interface Tracked {
  device: GPUDevice;
  live: Set<GPUBuffer>;
}

/** Dawn's GPU, with every device it hands out tracked (`devices`, in order). */
async function trackedGPU(devices: Tracked[]): Promise<GPU> {
  const gpu = await (await import('../gpu/node-gpu')).nodeGPU();
  return {
    get wgslLanguageFeatures() {
      return gpu.wgslLanguageFeatures;
    },
    async requestAdapter(options?: GPURequestAdapterOptions) {
      const adapter = await gpu.requestAdapter(options);
      if (!adapter) return adapter;
      const request = adapter.requestDevice.bind(adapter);
      adapter.requestDevice = async (descriptor?: GPUDeviceDescriptor) => {
        const device = await request(descriptor);
        const t: Tracked = { device, live: new Set() };
        const create = device.createBuffer;
        device.createBuffer = function (d: GPUBufferDescriptor): GPUBuffer {
          const buffer = create.call(device, d);
          const destroy = buffer.destroy;
          t.live.add(buffer);
          buffer.destroy = function () {
            t.live.delete(buffer);
            return destroy.call(buffer);
          };
          return buffer;
        };
        devices.push(t);
        return device;
      };
      return adapter;
    },
  } as unknown as GPU;
}

const ID = 'tiny';
const labels = (t: Tracked) => [...t.live].map((b) => b.label).sort();

const devices: Tracked[] = [];
const errors: StructuredError[] = [];
let engine: EngineHandle;
let client: OpenAI;

beforeAll(async () => {
  const { model, lora } = await ensureLoraFixture({ arch: 'llama', preset: 'tiny' });
  let lostInLoad = false;
  engine = await createLocalEngine({
    model: model.gguf.Q8_0!,
    gpu: await trackedGPU(devices),
    id: ID,
    cache: false,
    contextLength: 256,
    maxBatch: 8,
    lora: { a: lora.gguf['qv-r4']! },
    faultInjection: true,
    // Two losses recovered (the load's, the streams'), in a window longer than this file.
    deviceRecovery: { maxLosses: 2, windowMs: 3_600_000 },
    onProgress: (p) => {
      // A loss during the load: as the weights go up.
      if (p.phase === 'upload' && !lostInLoad) {
        lostInLoad = true;
        devices[0]!.device.destroy();
      }
    },
  });
  engine.onError((e) => errors.push(e));
  client = new OpenAI({ baseURL: 'http://localhost/v1', apiKey: 'x', fetch: engine.fetch, maxRetries: 0 });
}, 600_000);
afterAll(() => engine?.unload());

/** The four streams: greedy, seeded sampling, a grammar, a LoRA adapter. */
const STREAMS: Array<Record<string, unknown>> = [
  { model: ID, prompt: 'Once upon a time', temperature: 0 },
  { model: ID, prompt: 'The weather today', temperature: 1, top_p: 0.9, seed: 7 },
  { model: ID, prompt: 'Letters:', temperature: 0, ebnf: 'root ::= [a-z]+' },
  { model: `${ID}:a`, prompt: 'Once upon a time', temperature: 0 },
];
/** A fifth request: a prompt long enough for two prefill chunks (128 tokens each). */
const LONG = { model: ID, prompt: Array.from({ length: 200 }, (_, i) => (i * 37 + 11) % 200), temperature: 0, cache_prompt: false };

/** The four streams at once, and the long prompt once they have 2 chunks each (`midway` then). Returns each text. */
async function runAll(midway?: () => void): Promise<string[]> {
  const counts = STREAMS.map(() => 0);
  let long: Promise<string> | null = null;
  const streams = Promise.all(
    STREAMS.map(async (body, i) => {
      const stream = await client.completions.create({ ...body, max_tokens: 10, ignore_eos: true, stream: true } as unknown as OpenAI.CompletionCreateParamsStreaming);
      let text = '';
      for await (const chunk of stream) {
        text += chunk.choices[0]?.text ?? '';
        if (++counts[i]! >= 2 && !long && counts.every((c) => c >= 2)) {
          long = client.completions.create({ ...LONG, max_tokens: 3, ignore_eos: true } as unknown as OpenAI.CompletionCreateParamsNonStreaming).then((r) => r.choices[0]!.text);
          midway?.();
        }
      }
      return text;
    }),
  );
  const texts = await streams;
  return [...texts, await long!];
}

describe('recovery from a lost GPU device', () => {
  it('recovers from a loss during the load', async () => {
    expect(devices.length).toBeGreaterThanOrEqual(2);
    expect(engine.info.recoveries + (devices.length - 2)).toBeLessThanOrEqual(1);
    const reply = await client.completions.create({ model: ID, prompt: 'Hi', max_tokens: 2, temperature: 0 });
    expect(reply.choices[0]!.text.length).toBeGreaterThan(0);
  });

  it('resumes four streams (greedy, seeded, grammar, LoRA) and a prompt in its prefill as if nothing happened, leaving no buffer behind', async () => {
    const clean = await runAll();
    expect(clean.every((t) => t.length > 0)).toBe(true);
    const before = devices.at(-1)!;
    const liveBefore = before.live.size;
    const recoveriesBefore = engine.info.recoveries;
    const host = internalsOf(engine)!.host! as { engine: GpuEngine };
    let recovering = false;
    const lost = await runAll(() => {
      // Once the long prompt's first chunk is submitted: it is lost mid-prefill, the streams mid-decode.
      host.engine.trace = (event) => {
        if (event !== 'submit' || host.engine.kvStats.running < 5) return;
        host.engine.trace = null;
        void engine.injectFault({ kind: 'device_lost' });
        setTimeout(() => void engine.stats().then((s) => (recovering = s.recovering)), 50);
      };
    });
    expect(lost).toEqual(clean);
    expect(recovering).toBe(true);
    expect(engine.info.recoveries).toBe(recoveriesBefore + 1);
    expect((await engine.stats()).recovering).toBe(false);
    expect(errors.map((e) => e.code)).toContain('device_lost');
    // The new device holds what the lost one held; the lost one keeps only what a device keeps for its lifetime.
    const after = devices.at(-1)!;
    expect(after).not.toBe(before);
    expect(after.live.size).toBe(liveBefore);
    const lifetime = labels(before);
    expect(lifetime.length).toBeLessThan(5);
    expect(labels(after)).toEqual(expect.arrayContaining(lifetime));
    expect((await engine.loras()).map((l) => l.name)).toEqual(['a']);
  }, 600_000);

  it('past the limit of losses, ends requests in flight and later ones with device_lost, for good', async () => {
    const host = internalsOf(engine)!.host! as { engine: GpuEngine };
    host.engine.trace = (event) => {
      if (event !== 'submit') return;
      host.engine.trace = null;
      void engine.injectFault({ kind: 'device_lost' });
    };
    const err = await client.completions.create({ model: ID, prompt: 'Hello', max_tokens: 20, temperature: 0, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe('device_lost');
    expect((err as Error).message).toMatch(/lost 3 times/);
    const later = await client.completions.create({ model: ID, prompt: 'Hi', max_tokens: 2 }).catch((e: unknown) => e);
    expect((later as InstanceType<typeof OpenAI.APIError>).code).toBe('device_lost');
    expect(engine.info.recoveries).toBe(2);
  }, 120_000);
});
