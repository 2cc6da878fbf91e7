/**
 * `POST /v1/embeddings` on the CPU reference backend: the tiny Qwen3-Embedding folder next to the
 * tiny qwen3 chat folder in one app. Each vector is the reference's final hidden state of the
 * input's last token (its tokenizer appends `<|endoftext|>`), L2-normalised; `dimensions` cuts and
 * normalises again; base64 is the little-endian float32 bytes (the `openai` client's default);
 * usage counts every token; each bad request is a 400 naming its field; a chat model answers
 * /v1/embeddings with a 400 and an embedding model answers chat with one; /v1/models marks it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type OpenAI from 'openai';
import { openModel } from '../model/open';
import { ReferenceBackend } from '../reference/backend';
import { ReferenceModel } from '../reference/forward';
import { clientFor } from '../testing/api-rig';
import { ensureFixture } from '../testing/fixtures/shared';
import { serveDirectory, type StaticServer } from '../testing/server';
import { createApp, type App } from './app';

let app: App;
let client: OpenAI;
let ref: ReferenceModel;
let embed: ReferenceBackend;
let server: StaticServer;

beforeAll(async () => {
  const [e, chat] = await Promise.all([
    ensureFixture({ arch: 'qwen3', preset: 'tiny', embedding: true }, { hf: ['F32'], gguf: [] }),
    ensureFixture({ arch: 'qwen3', preset: 'tiny' }, { hf: ['F32'], gguf: [] }),
  ]);
  // Over HTTP, as a page loads it: the sentence-transformers files are fetched from the folder.
  const root = e.root.slice(0, e.root.lastIndexOf('/'));
  server = await serveDirectory(root);
  const opened = await openModel(`${server.url}/${e.hf.F32!.slice(root.length + 1)}`);
  embed = await ReferenceBackend.create(opened, { id: 'qwen3-embed' });
  const chatBackend = await ReferenceBackend.create(await openModel(chat.hf.F32!), { id: 'qwen3-chat' });
  ref = await ReferenceModel.load(opened);
  app = createApp({ backends: [embed, chatBackend] });
  client = clientFor(app);
});
afterAll(() => server?.close());

const post = (body: unknown, path = '/v1/embeddings') =>
  app.handle(new Request(`http://localhost${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) }));

/** The reference's embedding of `ids`: the last token's final hidden state, L2-normalised over its first `d` values. */
function expected(ids: readonly number[], d = ref.config.hiddenSize): number[] {
  ref.reset();
  ids.forEach((id, pos) => ref.forward(id, pos));
  const v = Array.from(ref.hidden.subarray(0, d));
  const norm = Math.hypot(...v);
  return v.map((x) => Math.fround(x / norm));
}

const close = (got: number[], want: number[]) => {
  expect(got).toHaveLength(want.length);
  got.forEach((x, i) => expect(x).toBeCloseTo(want[i]!, 5));
};

describe('/v1/embeddings on the tiny Qwen3-Embedding (reference backend)', () => {
  it('embeds a batch of strings as the last token’s normed state, <|endoftext|> appended, with usage', async () => {
    const texts = ['The cat sat on the mat.', 'hello'];
    const ids = texts.map((t) => embed.tokenizer.encode(t));
    const eot = embed.tokenizer.tokenToId('<|endoftext|>');
    for (const x of ids) expect(x.at(-1)).toBe(eot);
    const res = await post({ model: 'qwen3-embed', input: texts });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { object: string; model: string; data: Array<{ object: string; index: number; embedding: number[] }>; usage: object };
    expect(body.object).toBe('list');
    expect(body.model).toBe('qwen3-embed');
    expect(body.data.map((d) => [d.object, d.index])).toEqual([['embedding', 0], ['embedding', 1]]);
    body.data.forEach((d, i) => close(d.embedding, expected(ids[i]!)));
    const n = ids[0]!.length + ids[1]!.length;
    expect(body.usage).toEqual({ prompt_tokens: n, total_tokens: n });
  });

  it('takes token ids as given (no <|endoftext|> added), one list or a list of lists', async () => {
    const one = (await (await post({ model: 'qwen3-embed', input: [5, 6, 7] })).json()) as { data: Array<{ embedding: number[] }>; usage: { prompt_tokens: number } };
    close(one.data[0]!.embedding, expected([5, 6, 7]));
    expect(one.usage.prompt_tokens).toBe(3);
    const many = (await (await post({ model: 'qwen3-embed', input: [[5, 6, 7], [9]] })).json()) as { data: Array<{ embedding: number[] }> };
    close(many.data[1]!.embedding, expected([9]));
  });

  it('cuts to `dimensions` and normalises again; the openai client’s base64 reads back the same floats', async () => {
    const d = 32;
    const cut = (await (await post({ model: 'qwen3-embed', input: 'semantic search', dimensions: d, encoding_format: 'float' })).json()) as { data: Array<{ embedding: number[] }> };
    close(cut.data[0]!.embedding, expected(embed.tokenizer.encode('semantic search'), d));
    // The SDK asks for base64 and decodes it into floats itself.
    const sdk = await client.embeddings.create({ model: 'qwen3-embed', input: 'semantic search', dimensions: d });
    expect(sdk.data[0]!.embedding).toEqual(cut.data[0]!.embedding);
    const raw = (await (await post({ model: 'qwen3-embed', input: 'semantic search', encoding_format: 'base64', user: 'u1' })).json()) as { data: Array<{ embedding: string }> };
    const floats = new Float32Array(Uint8Array.from(atob(raw.data[0]!.embedding), (c) => c.charCodeAt(0)).buffer);
    close(Array.from(floats), expected(embed.tokenizer.encode('semantic search')));
  });

  const BAD: Array<[string, unknown, string]> = [
    ['an empty string', { input: '' }, 'input'],
    ['an empty list', { input: [] }, 'input'],
    ['an empty string in a list', { input: ['a', ''] }, 'input'],
    ['an empty id list in a list', { input: [[1, 2], []] }, 'input'],
    ['a list mixing strings and ids', { input: ['a', 1] }, 'input'],
    ['a token id outside the vocabulary', { input: [1, 10 ** 7] }, 'input'],
    ['no input', { input: undefined }, 'input'],
    ['an unknown encoding_format', { input: 'a', encoding_format: 'int8' }, 'encoding_format'],
    ['dimensions above the model’s', { input: 'a', dimensions: 100000 }, 'dimensions'],
    ['dimensions of 0', { input: 'a', dimensions: 0 }, 'dimensions'],
    ['no model', { model: undefined, input: 'a' }, 'model'],
    ['a chat model', { model: 'qwen3-chat', input: 'a' }, 'model'],
  ];
  it.each(BAD)('%s is a 400 naming its field', async (_name, body, param) => {
    const res = await post({ model: 'qwen3-embed', ...(body as object) });
    expect(res.status).toBe(400);
    const err = ((await res.json()) as { error: { param: string; type: string } }).error;
    expect(err).toMatchObject({ param, type: 'invalid_request_error' });
  });

  it('refuses an input longer than the model takes (the engine’s context), naming input', async () => {
    const long = Array.from({ length: embed.contextLength }, (_, i) => i % 100);
    const res = await post({ model: 'qwen3-embed', input: [long] });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: object }).error).toMatchObject({ param: 'input', code: 'context_length_exceeded' });
  });

  it('a chat model says it is not an embedding model; the embedding model refuses chat; /v1/models marks it', async () => {
    const e = ((await (await post({ model: 'qwen3-chat', input: 'a' })).json()) as { error: { message: string; code: string } }).error;
    expect(e.code).toBe('model_not_embedding');
    expect(e.message).toMatch(/not an embedding model/);
    const chat = await post({ model: 'qwen3-embed', messages: [{ role: 'user', content: 'hi' }] }, '/v1/chat/completions');
    expect(chat.status).toBe(400);
    const ok = await post({ model: 'qwen3-chat', prompt: 'hi', max_tokens: 1 }, '/v1/completions');
    expect(ok.status).toBe(200);
    const models = (await (await app.handle(new Request('http://localhost/v1/models'))).json()) as { data: Array<{ id: string; type?: string; dimensions?: number }> };
    expect(models.data.find((m) => m.id === 'qwen3-embed')).toMatchObject({ type: 'embedding', dimensions: ref.config.hiddenSize });
    expect(models.data.find((m) => m.id === 'qwen3-chat')).not.toHaveProperty('type');
  });
});
