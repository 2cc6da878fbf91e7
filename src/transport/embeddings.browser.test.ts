/**
 * /v1/embeddings in Chromium: the tiny Qwen3-Embedding folder (its sentence-transformers files and
 * bare-model tensors fetched over HTTP) in the engine's Worker, asked through the fetch shim by the
 * real `openai` client (base64, decoded by the SDK); each vector within cosine 0.999 of the CPU
 * reference's run in the page. The tiny BERT's folder the same way: createEngine opens it as the
 * encoder, and the shim's answers are within cosine 0.999 of the BERT reference's; the tiny
 * EmbeddingGemma's Q8_0 GGUF the same (the GPU gemma encoder) against reference/bidirectional.ts.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createEngine, installFetchShim, type EngineHandle } from '../index';
import { openEncoder } from '../model/encoder-open';
import { openModel } from '../model/open';
import { loadBidirectionalEmbedder } from '../reference/bidirectional';
import { bertForward, loadBertWeights, meanPoolNormalized } from '../reference/bert';
import { ReferenceModel } from '../reference/forward';

const url = `${inject('fixturesURL')}/${inject('fixtures')['qwen3-embed']!['hf-F32']}`;
let engine: EngineHandle;

beforeAll(async () => {
  engine = await createEngine({ model: url, cache: false });
});
afterAll(() => engine?.unload());

describe('/v1/embeddings in the page', () => {
  it('answers the openai client through the fetch shim within cosine 0.999 of the reference', async () => {
    const uninstall = installFetchShim(engine);
    try {
      const client = new OpenAI({ baseURL: `${location.origin}/v1`, apiKey: 'unused', dangerouslyAllowBrowser: true, maxRetries: 0 });
      const texts = ['hello', 'WebGPU runs in the page'];
      const { tokens } = await client.post<{ tokens: number[][] }>('/tokenize', { body: { prompt: texts } });
      const got = await client.embeddings.create({ model: 'default', input: texts });
      const ref = await ReferenceModel.load(await openModel(url));
      got.data.forEach((d, i) => {
        ref.reset();
        tokens[i]!.forEach((id, pos) => ref.forward(id, pos));
        const n = Math.hypot(...ref.hidden);
        const cosine = d.embedding.reduce((s, x, j) => s + (x * ref.hidden[j]!) / n, 0);
        expect(cosine).toBeGreaterThanOrEqual(0.999);
      });
    } finally {
      uninstall();
    }
  });
});

/** A separate encoder engine behind the fetch shim: the openai client's token ids and vectors for `texts`. */
async function embedThroughShim(model: string, texts: string[]): Promise<{ tokens: number[][]; vectors: number[][] }> {
  const encoder = await createEngine({ model, cache: false, maxBatch: 2 });
  const uninstall = installFetchShim(encoder);
  try {
    const client = new OpenAI({ baseURL: `${location.origin}/v1`, apiKey: 'unused', dangerouslyAllowBrowser: true, maxRetries: 0 });
    const { tokens } = await client.post<{ tokens: number[][] }>('/tokenize', { body: { prompt: texts } });
    const got = await client.embeddings.create({ model: 'default', input: texts });
    return { tokens, vectors: got.data.map((d) => d.embedding) };
  } finally {
    uninstall();
    await encoder.unload();
  }
}

describe('/v1/embeddings on a BERT encoder in the page', () => {
  it('answers the openai client through the fetch shim within cosine 0.999 of the reference', async () => {
    const bertURL = `${inject('fixturesURL')}/${inject('fixtures').bert!['hf-F32']}`;
    const { tokens, vectors } = await embedThroughShim(bertURL, ['hello', 'WebGPU runs in the page']);
    const model = await openEncoder(bertURL);
    const w = await loadBertWeights(model.config, model.readTensorF32);
    vectors.forEach((v, i) => {
      const want = meanPoolNormalized(bertForward(model.config, w, tokens[i]!), tokens[i]!.length, model.config.hiddenSize);
      expect(v.reduce((s, x, j) => s + x * want[j]!, 0)).toBeGreaterThanOrEqual(0.999);
    });
  });
});

describe('/v1/embeddings on EmbeddingGemma in the page', () => {
  it('answers the openai client through the fetch shim within cosine 0.999 of the reference', async () => {
    const gemmaURL = `${inject('fixturesURL')}/${inject('fixtures')['gemma3-embed']!.Q8_0}`;
    const { tokens, vectors } = await embedThroughShim(gemmaURL, ['hello', 'the quick brown fox jumps over the lazy dog']);
    const ref = await loadBidirectionalEmbedder(await openModel(gemmaURL));
    vectors.forEach((v, i) => {
      const want = ref(tokens[i]!);
      expect(v).toHaveLength(want.length);
      expect(v.reduce((s, x, j) => s + x * want[j]!, 0)).toBeGreaterThanOrEqual(0.999);
    });
  });
});
