/**
 * /v1/embeddings on the GPU engine (Dawn, f32) against the CPU reference: the tiny
 * Qwen3-Embedding GGUF (Q8_0: `pooling_type` last, `<|endoftext|>` appended by `add_eos_token`)
 * behind the Node HTTP server, and the real `openai` client (base64 by default) asking for a batch,
 * which the engine runs in one step. Each vector is within cosine 0.999 of the reference's on the
 * same weights, and a batch gives an input the vector it gets alone. (The folder form, its
 * bare-model names and sentence-transformers files, is src/api/embeddings.test.ts's, on the reference.)
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../api/app';
import { GpuEngine } from '../engine/engine';
import { openModel } from '../model/open';
import { ReferenceModel } from '../reference/forward';
import { ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { listen, type Listener } from './node-server';

let engine: GpuEngine;
let server: Listener;
let gguf: string;

beforeAll(async () => {
  gguf = (await ensureFixture({ arch: 'qwen3', preset: 'tiny', embedding: true }, { hf: [], gguf: ['Q8_0'] })).gguf.Q8_0!;
  engine = await GpuEngine.load(gguf, { gpu: await testGPU(), precision: 'f32', maxBatch: 4, contextLength: 256 });
  server = await listen(createApp({ backends: [engine] }).handle, { port: 0 });
});
afterAll(async () => {
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
