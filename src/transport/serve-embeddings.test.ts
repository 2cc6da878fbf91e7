/**
 * /v1/embeddings on the GPU engine (Dawn, f32) against the CPU reference: the tiny
 * Qwen3-Embedding GGUF (Q8_0: `pooling_type` last, `<|endoftext|>` appended by `add_eos_token`)
 * behind the Node HTTP server, and the real `openai` client (base64 by default) asking for a batch,
 * which the engine runs in one step. Each vector is within cosine 0.999 of the reference's on the
 * same weights, and a batch gives an input the vector it gets alone. (The folder form, its
 * bare-model names and sentence-transformers files, is src/api/embeddings.test.ts's, on the reference.)
 * Beside it, the tiny BERT's Q8_0 GGUF (WordPiece, mean pooling, max_seq_length 64 in its folder;
 * the GGUF's limit is its 128 positions) through serve() as `webgpu-llm serve --model` runs it
 * (createEngine's host opening it as an encoder): two concurrent requests (queued into the
 * encoder's steps), each within cosine 0.999 of the reference, `dimensions`, an input past the
 * limit refused, chat and adapters refused, /v1/models marking it.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../api/app';
import { GpuEngine } from '../engine/engine';
import { openEncoder } from '../model/encoder-open';
import { bertForward, loadBertWeights, meanPoolNormalized } from '../reference/bert';
import { ensureBertFixture } from '../testing/fixtures/bert-write';
import { openModel } from '../model/open';
import { ReferenceModel } from '../reference/forward';
import { ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { tokenizerOf } from '../text/from-model';
import { createEngine } from './node-engine';
import { listen, serve, type Listener, type Server } from './node-server';

let engine: GpuEngine;
let server: Listener;
let gguf: string;
let bertGGUF: string;
let bertServer: Server;

beforeAll(async () => {
  bertGGUF = (await ensureBertFixture({ hf: [], gguf: ['Q8_0'] })).gguf.Q8_0!;
  bertServer = await serve({ model: bertGGUF, port: 0, maxBatch: 4, precision: 'f32', id: 'tiny-bert' });
  gguf = (await ensureFixture({ arch: 'qwen3', preset: 'tiny', embedding: true }, { hf: [], gguf: ['Q8_0'] })).gguf.Q8_0!;
  engine = await GpuEngine.load(gguf, { gpu: await testGPU(), precision: 'f32', maxBatch: 4, contextLength: 256 });
  server = await listen(createApp({ backends: [engine] }).handle, { port: 0 });
});
afterAll(async () => {
  await bertServer?.close();
  await server?.close();
  await engine?.dispose();
});

const TEXTS = ['The quick brown fox jumps over the lazy dog, again and again.', 'hello', 'WebGPU runs in the page'];

/** The reference's last-token state of each id list, L2-normalised. */
async function referenceVectors(ids: number[][]): Promise<Float32Array[]> {
  const ref = await ReferenceModel.load(await openModel(gguf));
  return ids.map((x) => {
    ref.reset();
    x.forEach((id, pos) => ref.forward(id, pos));
    const v = ref.hidden.slice();
    const n = Math.hypot(...v);
    return v.map((a) => a / n);
  });
}

const cosine = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let dot = 0;
  for (let i = 0; i < a.length; i++) dot += a[i]! * b[i]!;
  return dot;
};

describe('/v1/embeddings on the GPU engine over HTTP (tiny Qwen3-Embedding, Q8_0)', () => {
  it('the openai client’s batch of three: each within cosine 0.999 of the reference, and as alone', async () => {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'none', maxRetries: 0 });
    const ids = TEXTS.map((t) => engine.tokenizer.encode(t));
    expect(ids.every((x) => x.at(-1) === engine.tokenizer.tokenToId('<|endoftext|>'))).toBe(true);
    const want = await referenceVectors(ids);
    const batch = await client.embeddings.create({ model: 'default', input: TEXTS });
    expect(batch.usage.prompt_tokens).toBe(ids.flat().length);
    batch.data.forEach((d, i) => expect(cosine(d.embedding, want[i]!), TEXTS[i]).toBeGreaterThanOrEqual(0.999));
    const alone = await client.embeddings.create({ model: 'default', input: TEXTS[1]!, encoding_format: 'float' });
    expect(cosine(alone.data[0]!.embedding, batch.data[1]!.embedding)).toBeGreaterThanOrEqual(0.9999);
  });
});

describe('/v1/embeddings on the BERT encoder over HTTP (tiny BERT, Q8_0)', () => {
  it('the openai client: concurrent requests each within cosine 0.999 of the reference; dimensions; the limits', async () => {
    const client = new OpenAI({ baseURL: `${bertServer.url}/v1`, apiKey: 'none', maxRetries: 0 });
    const model = await openEncoder(bertGGUF);
    const w = await loadBertWeights(model.config, model.readTensorF32);
    const tokenizer = tokenizerOf(model.tokenizer);
    const ids = TEXTS.map((t) => tokenizer.encode(t));
    const want = ids.map((x) => meanPoolNormalized(bertForward(model.config, w, x), x.length, model.config.hiddenSize));
    const [batch, one] = await Promise.all([client.embeddings.create({ model: 'tiny-bert', input: TEXTS }), client.embeddings.create({ model: 'tiny-bert', input: TEXTS[2]!, encoding_format: 'float' })]);
    expect(batch.usage.prompt_tokens).toBe(ids.flat().length);
    batch.data.forEach((d, i) => expect(cosine(d.embedding, want[i]!), TEXTS[i]).toBeGreaterThanOrEqual(0.999));
    expect(cosine(one.data[0]!.embedding, want[2]!)).toBeGreaterThanOrEqual(0.999);
    const cut = await client.embeddings.create({ model: 'tiny-bert', input: TEXTS[0]!, dimensions: 16, encoding_format: 'float' });
    const head = want[0]!.subarray(0, 16);
    const n = Math.hypot(...head);
    expect(cosine(cut.data[0]!.embedding, Array.from(head, (v) => v / n))).toBeGreaterThanOrEqual(0.999);
    // A GGUF carries no max_seq_length: the limit is its learned positions (128), [CLS] and [SEP] counted.
    await expect(client.embeddings.create({ model: 'tiny-bert', input: 'the '.repeat(126) })).resolves.toBeTruthy();
    await expect(client.embeddings.create({ model: 'tiny-bert', input: 'the '.repeat(127) })).rejects.toMatchObject({ status: 400, param: 'input' });
    await expect(client.chat.completions.create({ model: 'tiny-bert', messages: [{ role: 'user', content: 'hi' }] })).rejects.toMatchObject({ status: 400, code: 'model_is_embedding' });
    await expect(client.completions.create({ model: 'tiny-bert', prompt: 'hi' })).rejects.toMatchObject({ status: 400, code: 'model_is_embedding' });
    expect((await client.models.list()).data[0]).toMatchObject({ id: 'tiny-bert', type: 'embedding', dimensions: model.config.hiddenSize });
    await expect(bertServer.engine.loadLora('a', 'nowhere')).rejects.toMatchObject({ code: 'lora_unsupported' });
    // Options an encoder has no use for are refused naming them, not ignored.
    await expect(createEngine({ model: bertGGUF, mmproj: 'nowhere.gguf' })).rejects.toMatchObject({ code: 'invalid_field', field: 'mmproj' });
    // Four requests reached the encoder (the over-long one was refused before it).
    expect((await bertServer.engine.stats()).requests).toBe(4);
  });
});
