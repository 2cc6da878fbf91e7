/**
 * The GPU engine with a vision tower against the CPU reference, through the API: the image's tiles
 * encoded on the GPU tower and spliced at the <image> positions during prefill, prefill chunks that
 * cut through an image included. The tiny SmolVLM fixture in both of its forms: the engine opens
 * the HF folder, written as SmolVLM2's (`smolvlm`; its tower picked up from the folder, no mmproj),
 * the reference the text GGUF and the mmproj GGUF (vision-open.test.ts checks the towers' tensors
 * equal, and the SmolVLM2 folder's text model and tower equal the Idefics3 folder's, which
 * serve-vision.test.ts and vision.browser.test.ts run).
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { openVisionTower } from '../model/vision-open';
import { ReferenceBackend } from '../reference/backend';
import { ReferenceVisionTower } from '../reference/vision';
import { appFor, clientFor } from '../testing/api-rig';
import { ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { GpuEngine } from './engine';
import type OpenAI from 'openai';

describe('the GPU engine with a vision tower (tiny SmolVLM)', () => {
  let engine: GpuEngine;
  let gpuClient: OpenAI;
  let refClient: OpenAI;
  let url: string;
  let other: string;
  let third: string;
  let fourth: string;

  beforeAll(async () => {
    const [paths, smolvlm2] = await Promise.all([
      ensureFixture({ arch: 'llama', preset: 'tiny', vision: true }, { hf: [], gguf: ['F32'] }),
      ensureFixture({ arch: 'llama', preset: 'tiny', vision: 'smolvlm2' }, { hf: ['F32'], gguf: [] }),
    ]);
    const opened = await openModel(paths.gguf.F32!);
    const mmproj = await openVisionTower(paths.mmproj!);
    // prefillChunk 16: the image's 52 tokens span several prefill steps.
    engine = await GpuEngine.load(smolvlm2.hf.F32!, { gpu: await testGPU(), precision: 'f32', contextLength: 256, pageSize: 4, prefillChunk: 16, maxBatch: 2 });
    const reference = await ReferenceBackend.create(opened, { vision: { processor: mmproj.processor, tower: await ReferenceVisionTower.load(mmproj) } });
    gpuClient = clientFor(appFor([engine]));
    refClient = clientFor(appFor([reference]));
    const png = async (salt: number) => {
      const raw = Uint8Array.from({ length: 40 * 30 * 3 }, (_, i) => (i * 37 + salt * i + ((i * i) % 251)) % 256);
      return `data:image/png;base64,${(await sharp(raw, { raw: { width: 40, height: 30, channels: 3 } }).png().toBuffer()).toString('base64')}`;
    };
    [url, other, third, fourth] = await Promise.all([png(0), png(5), png(9), png(13)]);
  }, 300_000);
  afterAll(() => engine?.dispose());

  it('answers an image chat as the reference does (f32)', async () => {
    const ask = (client: OpenAI) =>
      client.chat.completions.create({
        model: 'default',
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text: 'What is this?' }] }],
        max_tokens: 5,
        temperature: 0,
        logprobs: true,
        top_logprobs: 2,
      });
    const [gpu, ref] = [await ask(gpuClient), await ask(refClient)];
    expect(engine.vision?.processor.tileSize).toBe(32);
    expect(gpu.usage!.prompt_tokens).toBe(ref.usage!.prompt_tokens);
    expect(gpu.choices[0]!.message.content).toBe(ref.choices[0]!.message.content);
    const first = (r: typeof gpu) => r.choices[0]!.logprobs!.content![0]!.top_logprobs.map((t) => t.logprob);
    first(gpu).forEach((v, i) => expect(v).toBeCloseTo(first(ref)[i]!, 3));
  }, 300_000);

  it('takes two images in one message, each spliced at its own <image> run, as the reference does', async () => {
    const content: OpenAI.Chat.Completions.ChatCompletionUserMessageParam['content'] = [
      // An image no other test sends first: the cache case's and the batching case's stay unseen.
      { type: 'image_url', image_url: { url: fourth } },
      { type: 'text', text: 'and' },
      { type: 'image_url', image_url: { url } },
      { type: 'text', text: 'Which differs?' },
    ];
    const ask = (client: OpenAI) => client.chat.completions.create({ model: 'default', messages: [{ role: 'user', content }], max_tokens: 3, temperature: 0, logprobs: true, top_logprobs: 2 });
    const [gpu, ref] = [await ask(gpuClient), await ask(refClient)];
    // Two images of 13 tiles' 52 tokens each.
    expect(gpu.usage!.prompt_tokens).toBeGreaterThan(104);
    expect(gpu.usage!.prompt_tokens).toBe(ref.usage!.prompt_tokens);
    expect(gpu.choices[0]!.message.content).toBe(ref.choices[0]!.message.content);
    const first = (r: typeof gpu) => r.choices[0]!.logprobs!.content![0]!.top_logprobs.map((t) => t.logprob);
    first(gpu).forEach((v, i) => expect(v).toBeCloseTo(first(ref)[i]!, 3));
  }, 300_000);

  it('keys the prefix cache by the image: a follow-up turn encodes it no more, another image with the same text never hits', async () => {
    type Messages = OpenAI.Chat.Completions.ChatCompletionMessageParam[];
    const ask = (client: OpenAI, messages: Messages) => client.chat.completions.create({ model: 'default', messages, max_tokens: 3, temperature: 0 });
    const turn = (u: string): Messages => [{ role: 'user', content: [{ type: 'image_url', image_url: { url: u } }, { type: 'text', text: 'What is this?' }] }];
    const first = await ask(gpuClient, turn(url));
    const encoded = engine.tilesEncoded;
    // The image (13 tiles, 52 tokens, from position 4) sits in pages the first turn left in the cache.
    const follow: Messages = [...turn(url), { role: 'assistant', content: first.choices[0]!.message.content! }, { role: 'user', content: 'And then?' }];
    const [gpu, ref] = [await ask(gpuClient, follow), await ask(refClient, follow)];
    expect(engine.tilesEncoded).toBe(encoded);
    expect(gpu.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(56);
    expect(gpu.choices[0]!.message.content).toBe(ref.choices[0]!.message.content);
    // The same text with another image: nothing past the text before the image is reused, and its tiles are encoded.
    const [gpu2, ref2] = [await ask(gpuClient, turn(other)), await ask(refClient, turn(other))];
    expect(gpu2.usage!.prompt_tokens_details!.cached_tokens).toBeLessThan(8);
    expect(engine.tilesEncoded).toBe(encoded + 13);
    expect(gpu2.choices[0]!.message.content).toBe(ref2.choices[0]!.message.content);
  }, 300_000);

  it('batches an image request with a text one: steps carry both, each answer as the reference gives it', async () => {
    const ask = (client: OpenAI, content: OpenAI.Chat.Completions.ChatCompletionUserMessageParam['content']) =>
      client.chat.completions.create({ model: 'default', messages: [{ role: 'user', content }], max_tokens: 4, temperature: 0 });
    // An image no earlier test sent: its tiles are encoded within these steps.
    const image: OpenAI.Chat.Completions.ChatCompletionUserMessageParam['content'] = [{ type: 'image_url', image_url: { url: third } }, { type: 'text', text: 'Describe it.' }];
    const encoded = engine.tilesEncoded;
    const text = 'Tell me a story about a cat.';
    // The scheduler's own counters (not part of EngineStats): rows over steps > 1 means steps held both sequences.
    const counters = (engine as unknown as { scheduler: { counters: { steps: number; batchedRows: number } } }).scheduler.counters;
    const before = { ...counters };
    const [gpuImage, gpuText] = await Promise.all([ask(gpuClient, image), ask(gpuClient, text)]);
    expect(counters.batchedRows - before.batchedRows).toBeGreaterThan(counters.steps - before.steps);
    expect(engine.tilesEncoded).toBe(encoded + 13);
    expect(gpuImage.choices[0]!.message.content).toBe((await ask(refClient, image)).choices[0]!.message.content);
    expect(gpuText.choices[0]!.message.content).toBe((await ask(refClient, text)).choices[0]!.message.content);
  }, 300_000);
});
