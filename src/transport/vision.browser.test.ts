/**
 * An image chat in Chromium: the tiny SmolVLM's HF folder (text model and vision tower fetched
 * over HTTP) in the engine's Worker, asked through the fetch shim by the real `openai` client with
 * a base64 PNG; the answer and its first token's logprobs equal the CPU reference's (the same
 * folder, the same API, in the page). Both decode the image with the browser's decoder.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createApp } from '../api/app';
import { createEngine, installFetchShim, type EngineHandle } from '../index';
import { openModel } from '../model/open';
import { ReferenceBackend } from '../reference/backend';

const url = `${inject('fixturesURL')}/${inject('fixtures').smolvlm!['hf-F32']}`;
let engine: EngineHandle;

beforeAll(async () => {
  engine = await createEngine({ model: url, cache: false, maxBatch: 2 });
});
afterAll(() => engine?.unload());

/** A 40 x 30 PNG (3 x 4 tiles and the global image at the fixture's 32-px tiles) as a data: URL. */
async function png(): Promise<string> {
  const canvas = new OffscreenCanvas(40, 30);
  const g = canvas.getContext('2d')!;
  const img = g.createImageData(40, 30);
  img.data.forEach((_, i) => (img.data[i] = i % 4 === 3 ? 255 : (i * 37 + ((i * i) % 251)) % 256));
  g.putImageData(img, 0, 0);
  const bytes = new Uint8Array(await (await canvas.convertToBlob({ type: 'image/png' })).arrayBuffer());
  return `data:image/png;base64,${btoa(String.fromCharCode(...bytes))}`;
}

describe('an image chat in the page', () => {
  it('answers the openai client through the fetch shim as the reference does', async () => {
    const reference = await ReferenceBackend.create(await openModel(url));
    const refApp = createApp({ backends: [reference] });
    const refClient = new OpenAI({ baseURL: 'http://reference/v1', apiKey: 'unused', dangerouslyAllowBrowser: true, maxRetries: 0, fetch: (input, init) => refApp.handle(new Request(input, init)) });
    const uninstall = installFetchShim(engine);
    try {
      const client = new OpenAI({ baseURL: `${location.origin}/v1`, apiKey: 'unused', dangerouslyAllowBrowser: true, maxRetries: 0 });
      const image = await png();
      const ask = (c: OpenAI) =>
        c.chat.completions.create({
          model: 'default',
          messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: image } }, { type: 'text', text: 'What is this?' }] }],
          max_tokens: 4,
          temperature: 0,
          logprobs: true,
          top_logprobs: 2,
        });
      const [gpu, ref] = [await ask(client), await ask(refClient)];
      expect(gpu.usage!.prompt_tokens).toBe(ref.usage!.prompt_tokens);
      expect(gpu.usage!.prompt_tokens).toBeGreaterThan(52); // the 13 tiles' image tokens are in the prompt
      expect(gpu.choices[0]!.message.content).toBe(ref.choices[0]!.message.content);
      const first = (r: typeof gpu) => r.choices[0]!.logprobs!.content![0]!.top_logprobs.map((t) => t.logprob);
      first(gpu).forEach((v, i) => expect(v).toBeCloseTo(first(ref)[i]!, 3));
    } finally {
      uninstall();
    }
  });
});
