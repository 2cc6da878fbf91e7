/**
 * createEngine in Chromium: the engine in its dedicated Worker over comlink, reached with the real
 * OpenAI client through `engine.fetch` and through the fetch shim; aborts, API errors, load errors
 * and GPU device loss crossing the worker boundary as structured objects.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createEngine, installFetchShim, type EngineHandle, type StructuredError } from '../index';
import { simulateDeviceLoss } from './internals';

const fixture = (variant: string) => `${inject('fixturesURL')}/${inject('fixtures').llama![variant]}`;
const GREEDY = { model: 'default', temperature: 0, max_tokens: 4 } as const;
const messages = [{ role: 'user' as const, content: 'Say hi' }];

let engine: EngineHandle;
const phases = new Set<string>();
/** The OPFS folder this file's engines keep KV pages in (persistKv). */
const KV_DIR = `test-kv-${crypto.randomUUID()}`;

beforeAll(async () => {
  // memoryBytes far below the model: its memory warning must cross the worker in info.warnings.
  engine = await createEngine({ model: fixture('Q8_0'), cache: false, memoryBytes: 2 ** 20, onProgress: (p) => phases.add(p.phase), persistKv: { dir: KV_DIR } });
});
afterAll(async () => {
  await engine?.unload();
  await (await navigator.storage.getDirectory()).removeEntry(KV_DIR, { recursive: true }).catch(() => {});
});

const clientFor = (fetch?: typeof globalThis.fetch, baseURL = 'http://localhost/v1') =>
  new OpenAI({ baseURL, apiKey: 'unused', dangerouslyAllowBrowser: true, maxRetries: 0, ...(fetch ? { fetch } : {}) });

describe('createEngine in a worker', () => {
  it('reports the model, the GPU and the load phases', () => {
    expect(engine.info).toMatchObject({ model: 'llama', precision: 'f32', contextLength: 2048 });
    expect(engine.info.gpu.maxStorageBufferBindingSize).toBeGreaterThan(0);
    expect([...phases]).toEqual(expect.arrayContaining(['upload', 'compile']));
  });

  it('says in info.warnings that the model takes more GPU memory than memoryBytes, with the figures', () => {
    const memory = engine.info.warnings.filter((w) => /GPU memory/.test(w));
    expect(memory).toHaveLength(1);
    expect(memory[0]).toMatch(/^This model takes about \d+ MiB of GPU memory \(weights \d+ MiB, KV cache \d+ MiB, other \d+ MiB\), more than the 1 MiB the GPU may use/);
  });

  it('reports the page pool and the scheduler over the worker (engine.stats)', async () => {
    await clientFor(engine.fetch).completions.create({ ...GREEDY, prompt: 'Hi' });
    const s = await engine.stats();
    expect(s.pages.total * s.pageSize).toBe(engine.info.kvCacheTokens);
    expect(s.pages.used).toBe(0);
    expect(s.pages.free + s.pages.cached).toBe(s.pages.total);
    expect(s.steps).toBeGreaterThan(0);
    expect(s.running + s.waiting).toBe(0);
  });

  // Loads a second engine in a new Worker (23-42 s under load): 3 min rather than the project's 60 s.
  it('keeps prompt pages in OPFS from its Worker: a new engine reads them back as cached tokens, with the same text', { timeout: 180_000 }, async () => {
    const prompt = 'one two three four five six seven eight nine ten '.repeat(5);
    const cold = await clientFor(engine.fetch).completions.create({ ...GREEDY, prompt });
    expect(cold.usage?.prompt_tokens_details?.cached_tokens ?? 0).toBe(0);
    // A new engine (as after a reload) reads the folder's pages when it loads: the first one's few pages were written long before.
    const next = await createEngine({ model: fixture('Q8_0'), cache: false, persistKv: { dir: KV_DIR } });
    try {
      const warm = await clientFor(next.fetch).completions.create({ ...GREEDY, prompt });
      expect(warm.choices[0]!.text).toBe(cold.choices[0]!.text);
      const ps = (await next.stats()).pageSize;
      expect(warm.usage!.prompt_tokens_details!.cached_tokens).toBe(Math.floor((cold.usage!.prompt_tokens - 1) / ps) * ps);
    } finally {
      await next.unload();
    }
  });

  it('answers the OpenAI client through engine.fetch, streamed and not, with the same greedy text', async () => {
    const client = clientFor(engine.fetch);
    const whole = await client.chat.completions.create({ ...GREEDY, messages });
    expect(whole.object).toBe('chat.completion');
    const stream = await client.chat.completions.create({ ...GREEDY, messages, stream: true });
    let text = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(text).toBe(whole.choices[0].message.content);
    expect(finish).toBe(whole.choices[0].finish_reason);
  });

  it('gives the greedy text a prediction of it gives without, in fewer steps (speculative decoding in the page)', async () => {
    const client = clientFor(engine.fetch);
    const body = { ...GREEDY, max_tokens: 12, messages, ignore_eos: true };
    const off = await client.chat.completions.create(body);
    const text = off.choices[0].message.content ?? '';
    const before = (await engine.stats()).steps;
    const on = await client.chat.completions.create({ ...body, prediction: { type: 'content', content: text } });
    const steps = (await engine.stats()).steps - before;
    expect(on.choices[0].message.content).toBe(text);
    expect(on.usage?.completion_tokens_details?.accepted_prediction_tokens).toBeGreaterThan(0);
    expect(steps).toBeLessThan(on.usage!.completion_tokens);
  });

  it('answers the Responses API through engine.fetch (create and the stream helper) with the chat endpoint\'s greedy text', async () => {
    const client = clientFor(engine.fetch);
    const chat = await client.chat.completions.create({ ...GREEDY, messages });
    const r = await client.responses.create({ model: 'default', input: 'Say hi', temperature: 0, max_output_tokens: 4 });
    expect(r.output_text).toBe(chat.choices[0].message.content);
    const stream = client.responses.stream({ model: 'default', input: 'Say hi', temperature: 0, max_output_tokens: 4 });
    let text = '';
    for await (const e of stream) if (e.type === 'response.output_text.delta') text += e.delta;
    expect(text).toBe(r.output_text);
    expect((await stream.finalResponse()).output_text).toBe(r.output_text);
  });

  it('answers the Vercel AI SDK\'s default provider (POST /v1/responses) through engine.fetch, generated and streamed', async () => {
    const { createOpenAI } = await import('@ai-sdk/openai');
    const { generateText, streamText } = await import('ai');
    const model = createOpenAI({ baseURL: 'http://localhost/v1', apiKey: 'unused', fetch: engine.fetch })('default');
    const chat = await clientFor(engine.fetch).chat.completions.create({ ...GREEDY, messages });
    const a = await generateText({ model, prompt: 'Say hi', temperature: 0, maxOutputTokens: 4 });
    expect(a.text).toBe(chat.choices[0].message.content);
    let text = '';
    for await (const part of streamText({ model, prompt: 'Say hi', temperature: 0, maxOutputTokens: 4 }).textStream) text += part;
    expect(text).toBe(a.text);
  });

  it('turns a bad request into an APIError with status 400 naming the field', async () => {
    const err = await clientFor(engine.fetch)
      .chat.completions.create({ ...GREEDY, messages, temperature: 7 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
    expect((err as InstanceType<typeof OpenAI.APIError>).param).toBe('temperature');
  });

  it('stops generation when the request is aborted mid-stream', async () => {
    const controller = new AbortController();
    const stream = await clientFor(engine.fetch).completions.create(
      { ...GREEDY, prompt: 'Once upon a time', max_tokens: 400, ignore_eos: true, stream: true } as OpenAI.CompletionCreateParamsStreaming,
      { signal: controller.signal },
    );
    let chunks = 0;
    for await (const _ of stream) if (++chunks === 2) controller.abort();
    expect(chunks).toBe(2);
    // The worker's engine runs one request at a time: a lost abort would hold it for ~400 steps.
    const t = performance.now();
    await clientFor(engine.fetch).completions.create({ ...GREEDY, prompt: 'Hi', max_tokens: 1 });
    expect(performance.now() - t).toBeLessThan(15_000);
  });

  it('serves /v1 through the fetch shim to clients created after it, passing other URLs through, until uninstalled', async () => {
    const original = globalThis.fetch;
    const uninstall = installFetchShim(engine);
    try {
      expect(globalThis.fetch).not.toBe(original);
      const models = await clientFor(undefined, `${location.origin}/v1`).models.list();
      expect(models.data.map((m) => m.id)).toEqual(['llama']);
      const reply = await clientFor(undefined, `${location.origin}/v1`).completions.create({ ...GREEDY, prompt: 'Hello', max_tokens: 1 });
      expect(reply.choices[0].text.length).toBeGreaterThan(0);
      // Another origin, and a same-origin path that only looks like the prefix, go to the network.
      const config = await fetch(`${inject('fixturesURL')}/${inject('fixtures').llama!['hf-F32']}/config.json`);
      expect((await config.json()).architectures).toEqual(['LlamaForCausalLM']);
      const lookalike = await fetch(`${location.origin}/v1x/models`);
      expect(lookalike.headers.get('content-type') ?? '').not.toContain('application/json');
    } finally {
      uninstall();
    }
    expect(globalThis.fetch).toBe(original);
  });

  it('rejects a failed load with the loader error, structured across the worker', async () => {
    const err = (await createEngine({ model: `${inject('fixturesURL')}/no-such-model.gguf`, cache: false }).catch((e: unknown) => e)) as Error & { code?: string };
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe('LoadError');
    expect(err.code).toBe('http');
    expect(err.message).toContain('no-such-model.gguf');
  });

  // Last: it loses the shared engine's device. Recovery re-creates the device and its pipelines, then a second
  // engine loads in a new Worker: past the project's 60 s on a loaded machine, hence 3 min.
  it('recovers from a lost GPU device (reported, answers as before); without recovery a loss answers 500 with the cause', { timeout: 180_000 }, async () => {
    const errors: StructuredError[] = [];
    engine.onError((e) => errors.push(e));
    const client = clientFor(engine.fetch);
    const before = await client.completions.create({ ...GREEDY, prompt: 'Hi' });
    await simulateDeviceLoss(engine);
    await expect.poll(() => errors.length).toBeGreaterThan(0);
    expect(errors[0]).toMatchObject({ name: 'WebGPUError', code: 'device_lost' });
    const after = await client.completions.create({ ...GREEDY, prompt: 'Hi' });
    expect(after.choices[0]!.text).toBe(before.choices[0]!.text);
    expect((await engine.stats()).recoveries).toBe(1);
    await engine.unload();
    await expect(engine.stats()).rejects.toMatchObject({ code: 'engine_unloaded' });
    const unloaded = await engine.fetch('http://localhost/v1/models');
    expect(unloaded.status).toBe(503);
    expect((await unloaded.json()).error.code).toBe('engine_unloaded');
    const again = await createEngine({ model: fixture('Q4_0'), cache: false, deviceRecovery: false });
    try {
      const reply = await clientFor(again.fetch).completions.create({ ...GREEDY, prompt: 'Hi', max_tokens: 1 });
      expect(reply.choices).toHaveLength(1);
      await simulateDeviceLoss(again);
      const err = await clientFor(again.fetch)
        .completions.create({ ...GREEDY, prompt: 'Hi' })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.InternalServerError);
      expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe('device_lost');
    } finally {
      await again.unload();
    }
  });
});
