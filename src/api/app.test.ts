/**
 * The app as a `fetch` handler: bad requests (table-driven) each get their status and the field
 * at fault, helpers (/tokenize, /detokenize, /apply-template, /v1/models, /health) answer in
 * their documented shapes, CORS and API keys work, and a bad request never breaks the next.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type App } from './app';
import { clientFor, loadRig, type Rig } from '../testing/api-rig';

let rig: Rig;
let app: App;

beforeAll(async () => {
  rig = await loadRig();
  app = createApp({ backends: [rig.qwen.backend, rig.llama.backend] });
});
afterAll(() => rig?.close());

const post = (a: App, path: string, body: unknown, headers: Record<string, string> = {}) =>
  a.handle(
    new Request(`http://localhost${path}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    }),
  );

const C = '/v1/completions';
const CHAT = '/v1/chat/completions';
const ok = { model: 'qwen3-tiny', prompt: 'hi', max_tokens: 2 };
const okChat = { model: 'qwen3-tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 };

interface Bad {
  name: string;
  path: string;
  body: unknown;
  status: number;
  param: string | null;
}

const BAD: Bad[] = [
  { name: 'broken JSON', path: C, body: '{"model": "qwen3-tiny", ', status: 400, param: null },
  { name: 'a body that is not an object', path: C, body: '[1, 2]', status: 400, param: null },
  { name: 'missing model', path: C, body: { prompt: 'hi' }, status: 400, param: 'model' },
  { name: 'missing prompt', path: C, body: { model: 'qwen3-tiny' }, status: 400, param: 'prompt' },
  { name: 'prompt of the wrong type', path: C, body: { ...ok, prompt: { text: 'hi' } }, status: 400, param: 'prompt' },
  { name: 'token id outside the vocabulary', path: C, body: { ...ok, prompt: [1, 99999] }, status: 400, param: 'prompt' },
  { name: 'missing messages', path: CHAT, body: { model: 'qwen3-tiny' }, status: 400, param: 'messages' },
  { name: 'a message with an unknown role', path: CHAT, body: { ...okChat, messages: [{ role: 'wizard', content: 'x' }] }, status: 400, param: 'messages[0].role' },
  { name: 'temperature above 2', path: C, body: { ...ok, temperature: 3 }, status: 400, param: 'temperature' },
  { name: 'temperature as a string', path: C, body: { ...ok, temperature: 'hot' }, status: 400, param: 'temperature' },
  { name: 'top_p of 0', path: C, body: { ...ok, top_p: 0 }, status: 400, param: 'top_p' },
  { name: 'top_k below -1', path: C, body: { ...ok, top_k: -2 }, status: 400, param: 'top_k' },
  { name: 'n of 0', path: C, body: { ...ok, n: 0 }, status: 400, param: 'n' },
  { name: 'best_of below n', path: C, body: { ...ok, n: 3, best_of: 2 }, status: 400, param: 'best_of' },
  { name: 'logprobs above 20', path: C, body: { ...ok, logprobs: 21 }, status: 400, param: 'logprobs' },
  { name: 'top_logprobs without logprobs', path: CHAT, body: { ...okChat, top_logprobs: 2 }, status: 400, param: 'top_logprobs' },
  { name: 'presence_penalty out of range', path: CHAT, body: { ...okChat, presence_penalty: 2.5 }, status: 400, param: 'presence_penalty' },
  { name: 'logit_bias with a non-id key', path: C, body: { ...ok, logit_bias: { hello: 1 } }, status: 400, param: 'logit_bias' },
  { name: 'logit_bias beyond 100', path: C, body: { ...ok, logit_bias: { 5: 200 } }, status: 400, param: 'logit_bias' },
  { name: 'max_tokens of -2', path: C, body: { ...ok, max_tokens: -2 }, status: 400, param: 'max_tokens' },
  { name: 'max_tokens beyond the context', path: C, body: { ...ok, max_tokens: 5000 }, status: 400, param: 'max_tokens' },
  { name: 'stop as a number', path: C, body: { ...ok, stop: 5 }, status: 400, param: 'stop' },
  { name: 'an invalid stop_regex', path: C, body: { ...ok, stop_regex: ['('] }, status: 400, param: 'stop_regex' },
  { name: 'mirostat 3', path: C, body: { ...ok, mirostat: 3 }, status: 400, param: 'mirostat' },
  { name: 'stream_options without stream', path: C, body: { ...ok, stream_options: { include_usage: true } }, status: 400, param: 'stream_options' },
  { name: 'an unknown model', path: C, body: { ...ok, model: 'gpt-9' }, status: 404, param: 'model' },
  { name: 'a LoRA adapter', path: C, body: { ...ok, model: 'qwen3-tiny:sql' }, status: 404, param: 'model' },
  { name: 'a too-long prompt', path: C, body: { ...ok, prompt: Array(3000).fill(5), max_tokens: 1 }, status: 400, param: 'prompt' },
  { name: 'response_format of an unknown type', path: CHAT, body: { ...okChat, response_format: { type: 'xml' } }, status: 400, param: 'response_format.type' },
  { name: 'response_format json_schema whose schema is a number', path: C, body: { ...ok, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: 5 } } }, status: 400, param: 'response_format.json_schema.schema' },
  { name: 'an invalid json_schema', path: C, body: { ...ok, json_schema: { type: 5 } }, status: 400, param: 'json_schema' },
  { name: 'an invalid regex', path: CHAT, body: { ...okChat, regex: '[a-' }, status: 400, param: 'regex' },
  { name: 'an invalid ebnf', path: CHAT, body: { ...okChat, ebnf: 'root ::= (' }, status: 400, param: 'ebnf' },
  { name: 'grammar of an unknown type', path: C, body: { ...ok, grammar: { type: 'xml', value: 'a' } }, status: 400, param: 'grammar.type' },
  { name: 'two structured-output fields', path: C, body: { ...ok, regex: 'a', ebnf: 'root ::= "a"' }, status: 400, param: 'ebnf' },
  { name: 'a tool whose strict is a string', path: CHAT, body: { ...okChat, tools: [{ type: 'function', function: { name: 'f', strict: 'yes' } }] }, status: 400, param: 'tools' },
  { name: 'tool_choice naming a function not in tools', path: CHAT, body: { ...okChat, tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function', function: { name: 'g' } } }, status: 400, param: 'tool_choice' },
  { name: 'tool_choice required without tools', path: CHAT, body: { ...okChat, tool_choice: 'required' }, status: 400, param: 'tool_choice' },
  { name: 'an image part to a text-only model', path: CHAT, body: { ...okChat, messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] }] }, status: 400, param: 'messages[0].content[1]' },
  { name: 'an image part in an assistant turn', path: CHAT, body: { ...okChat, messages: [{ role: 'user', content: 'a' }, { role: 'assistant', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, status: 400, param: 'messages[1].content[0]' },
  { name: 'an image part without a url', path: CHAT, body: { ...okChat, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] }, status: 400, param: 'messages[0].content[0].image_url.url' },
  { name: 'image_url.detail "max"', path: CHAT, body: { ...okChat, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x', detail: 'max' } }] }] }, status: 400, param: 'messages[0].content[0].image_url.detail' },
  { name: 'an input_audio part', path: CHAT, body: { ...okChat, messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: '', format: 'wav' } }] }] }, status: 400, param: 'messages[0].content[0]' },
  { name: 'return_routed_experts on a model without experts', path: C, body: { ...ok, return_routed_experts: true }, status: 400, param: 'return_routed_experts' },
  { name: 'return_hidden_states as a string', path: C, body: { ...ok, return_hidden_states: 'yes' }, status: 400, param: 'return_hidden_states' },
  { name: 'suffix on a model without FIM tokens', path: C, body: { ...ok, model: 'llama-tiny', suffix: 'x' }, status: 400, param: 'suffix' },
  { name: 'continue_final_message after a user turn', path: CHAT, body: { ...okChat, continue_final_message: true }, status: 400, param: 'continue_final_message' },
];

describe('bad requests', () => {
  for (const c of BAD) {
    it(`answers ${c.name} with ${c.status} naming ${c.param ?? 'no field'}`, async () => {
      const res = await post(app, c.path, c.body);
      expect(res.status).toBe(c.status);
      const body = await res.json();
      expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
      expect(body.error.param).toBe(c.param);
      expect(body.error.type).toBe('invalid_request_error');
      expect(body.error.message.length).toBeGreaterThan(10);
    });
  }

  it('still answers a good request after all of them, and ignores unknown fields', async () => {
    const res = await post(app, C, { ...ok, some_future_field: { x: 1 } });
    expect(res.status).toBe(200);
    expect((await res.json()).choices[0].text).toBeTypeOf('string');
  });

  it('surfaces as the openai client BadRequestError with the param', async () => {
    const client = clientFor(app);
    const err = await client.completions.create({ model: 'qwen3-tiny', prompt: 'x', temperature: 9 }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.param).toBe('temperature');
    const nf = await client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
    expect(nf).toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('answers unknown routes with 404 and wrong methods with 405', async () => {
    expect((await app.handle(new Request('http://localhost/v1/audio/speech', { method: 'POST', body: '{}' }))).status).toBe(404);
    expect((await app.handle(new Request('http://localhost/v1/completions'))).status).toBe(405);
  });

  it('truncates a too-long prompt to its end with truncate_sequence', async () => {
    const res = await post(app, C, { ...ok, prompt: Array(3000).fill(5), max_tokens: 2, truncate_sequence: true });
    expect(res.status).toBe(200);
    expect((await res.json()).usage.prompt_tokens).toBe(rig.qwen.backend.contextLength - 2);
  });
});

describe('helpers and transport', () => {
  it('lists models and retrieves one', async () => {
    const client = clientFor(app);
    const list = await client.models.list();
    expect(list.data.map((m) => m.id)).toEqual(['qwen3-tiny', 'llama-tiny']);
    expect((await client.models.retrieve('llama-tiny')).object).toBe('model');
  });

  it('tokenizes and detokenizes, and renders the chat template', async () => {
    const tok = rig.qwen.backend.tokenizer;
    const t = await (await post(app, '/tokenize', { model: 'qwen3-tiny', prompt: 'hello world' })).json();
    expect(t.tokens).toEqual(tok.encode('hello world'));
    expect(t.count).toBe(t.tokens.length);
    const pieces = await (await post(app, '/tokenize', { content: 'hello', with_pieces: true })).json();
    expect(pieces.tokens.map((p: { piece: string }) => p.piece).join('')).toBe('hello');
    const d = await (await post(app, '/detokenize', { model: 'qwen3-tiny', tokens: t.tokens })).json();
    expect(d.text).toBe('hello world');
    const a = await (await post(app, '/apply-template', { model: 'qwen3-tiny', messages: [{ role: 'user', content: 'hi' }] })).json();
    expect(a.prompt).toContain('<|im_start|>user\nhi<|im_end|>');
    expect(a.prompt.endsWith('<|im_start|>assistant\n')).toBe(true);
    const bad = await post(app, '/detokenize', { tokens: [1e9] });
    expect(bad.status).toBe(400);
  });

  it('reports health: 503 while loading, 200 when ready', async () => {
    let loading = true;
    const a = createApp({ backends: () => (loading ? [] : [rig.qwen.backend]), loading: () => loading });
    expect((await a.handle(new Request('http://localhost/health'))).status).toBe(503);
    const busy = await post(a, C, { ...ok, model: 'default' });
    expect(busy.status).toBe(503);
    expect((await busy.json()).error.type).toBe('service_unavailable');
    loading = false;
    expect((await a.handle(new Request('http://localhost/health'))).status).toBe(200);
    expect((await post(a, C, { ...ok, model: 'default' })).status).toBe(200);
  });

  it('answers CORS preflights and routes under any prefix', async () => {
    const pre = await app.handle(new Request('http://localhost/v1/chat/completions', { method: 'OPTIONS' }));
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('*');
    const res = await post(app, '/some/prefix/v1/completions', ok);
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
  });

  it('needs the API key when one is set', async () => {
    const locked = createApp({ backends: [rig.qwen.backend], apiKey: 'sekrit' });
    const res = await post(locked, C, ok);
    expect(res.status).toBe(401);
    expect((await res.json()).error.code).toBe('invalid_api_key');
    expect(await clientFor(locked, 'wrong').models.list().catch((e) => e)).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((await clientFor(locked, 'sekrit').models.list()).data).toHaveLength(1);
    expect((await locked.handle(new Request('http://localhost/health'))).status).toBe(200);
  });
});
