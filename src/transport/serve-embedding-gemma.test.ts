/**
 * EmbeddingGemma served: the tiny fixture's Q8_0 `gemma-embedding` GGUF through serve() as
 * `webgpu-llm serve --model` runs it (createEngine's host routes the bidirectional config to the
 * encoder backend, engine/forward/gemma-encoder.ts), and the real `openai` client (base64 by
 * default) asking for a batch of two: each vector within cosine 0.999 of the CPU reference's
 * (reference/bidirectional.ts) on the same weights, with the Dense modules' size; chat refused.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { loadBidirectionalEmbedder } from '../reference/bidirectional';
import { ensureFixture } from '../testing/fixtures/shared';
import { tokenizerOf } from '../text/from-model';
import { serve, type Server } from './node-server';

let gguf: string;
let server: Server;
beforeAll(async () => {
  gguf = (await ensureFixture({ arch: 'gemma3', preset: 'tiny', embedding: true }, { hf: [], gguf: ['Q8_0'] })).gguf.Q8_0!;
  server = await serve({ model: gguf, port: 0, maxBatch: 4, precision: 'f32', id: 'tiny-egemma' });
});
afterAll(async () => {
  await server?.close();
});

const TEXTS = ['the quick brown fox jumps over the lazy dog', 'hello'];
const cosine = (a: ArrayLike<number>, b: ArrayLike<number>) => Array.from(a).reduce((s, v, i) => s + v * b[i]!, 0);

describe('EmbeddingGemma through serve() and the openai client', () => {
  it('embeds a batch as the reference does; chat is refused', async () => {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'none', maxRetries: 0 });
    const res = await client.embeddings.create({ model: 'tiny-egemma', input: TEXTS });
    const model = await openModel(gguf);
    const ref = await loadBidirectionalEmbedder(model);
    const tok = tokenizerOf(model.tokenizer);
    expect(res.data.map((d) => d.index)).toEqual([0, 1]);
    expect(res.usage.prompt_tokens).toBe(TEXTS.reduce((n, t) => n + tok.encode(t).length, 0));
    res.data.forEach((d, i) => {
      const want = ref(tok.encode(TEXTS[i]!));
      expect(d.embedding).toHaveLength(want.length);
      expect(cosine(d.embedding, want), `input ${i}`).toBeGreaterThan(0.999);
    });
    await expect(client.chat.completions.create({ model: 'tiny-egemma', messages: [{ role: 'user', content: 'hi' }] })).rejects.toMatchObject({ status: 400 });
  });
});
