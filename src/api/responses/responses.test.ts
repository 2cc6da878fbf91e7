/**
 * `/v1/responses` with the real `openai` client against the app (reference backend, tiny qwen3):
 * text in and out, streamed events in OpenAI's order, function calls and their outputs, JSON
 * schema output, stored responses continued by `previous_response_id` with their KV reused, GET
 * and DELETE, and 400s naming the Responses field.
 */
import Ajv from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientFor, loadRig, type Rig } from '../../testing/api-rig';
import { createApp, type App } from '../app';

let rig: Rig;
let app: App;
const MODEL = 'qwen3-tiny';
const quiet = { chat_template_kwargs: { enable_thinking: false } } as Record<string, unknown>;

beforeAll(async () => {
  rig = await loadRig();
  app = createApp({ backends: [rig.qwen.backend] });
});
afterAll(() => rig?.close());

describe('POST /v1/responses', () => {
  it('answers a string input with a message item, usage and output_text, as chat completions would', async () => {
    const client = clientFor(app);
    const r = await client.responses.create({ model: MODEL, input: 'Hello there', max_output_tokens: 6, temperature: 0, ...quiet });
    expect(r.object).toBe('response');
    expect(r.id).toMatch(/^resp_/);
    const msg = r.output.find((o) => o.type === 'message');
    expect(msg?.type === 'message' && msg.content[0]?.type === 'output_text').toBe(true);
    const chat = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 6, temperature: 0, ...quiet });
    expect(r.output_text).toBe(chat.choices[0]!.message.content);
    expect(r.usage!.input_tokens).toBe(chat.usage!.prompt_tokens);
    expect(r.usage!.output_tokens).toBe(6);
    expect(r.status).toBe('incomplete');
    expect(r.incomplete_details?.reason).toBe('max_output_tokens');
  });

  it('streams the events in OpenAI order with increasing sequence numbers, and the deltas make the final text', async () => {
    const client = clientFor(app);
    const stream = await client.responses.create({ model: MODEL, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Tell me' }] }], instructions: 'Be brief.', max_output_tokens: 5, temperature: 0, stream: true, ...quiet });
    const types: string[] = [];
    let text = '';
    let last = -1;
    let final: { output_text?: string; output: unknown[] } | undefined;
    for await (const e of stream) {
      types.push(e.type);
      expect(e.sequence_number).toBe(last + 1);
      last = e.sequence_number;
      if (e.type === 'response.output_text.delta') text += e.delta;
      if (e.type === 'response.incomplete' || e.type === 'response.completed') final = e.response as never;
    }
    expect(types.slice(0, 4)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
    expect(types).toContain('response.output_text.delta');
    const tail = types.slice(-4);
    expect(tail).toEqual(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.incomplete']);
    const msg = final!.output[0] as { content: { text: string }[] };
    expect(msg.content[0]!.text).toBe(text);
  });

  it('follows a JSON schema in text.format', async () => {
    const client = clientFor(app);
    const schema = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'], additionalProperties: false };
    const r = await client.responses.create({
      model: MODEL,
      input: 'A number',
      max_output_tokens: 24,
      temperature: 0,
      text: { format: { type: 'json_schema', name: 'n', schema, strict: true } },
      ...quiet,
    });
    if (r.status === 'completed') expect(new Ajv().compile(schema)(JSON.parse(r.output_text))).toBe(true);
    else expect(r.output_text.startsWith('{')).toBe(true);
  });

  it('calls a function when tool_choice requires it, then takes its output as a function_call_output item', async () => {
    const client = clientFor(app);
    const tools = [{ type: 'function' as const, name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 8 } }, required: ['city'], additionalProperties: false }, strict: true }];
    const r = await client.responses.create({ model: MODEL, input: 'Weather in Paris?', tools, tool_choice: 'required', max_output_tokens: 60, temperature: 0, ...quiet });
    const call = r.output.find((o) => o.type === 'function_call');
    expect(call?.type).toBe('function_call');
    if (call?.type !== 'function_call') return;
    expect(call.name).toBe('get_weather');
    expect(typeof JSON.parse(call.arguments).city).toBe('string');
    const next = await client.responses.create({
      model: MODEL,
      input: [{ role: 'user', content: 'Weather in Paris?' }, call, { type: 'function_call_output', call_id: call.call_id, output: '{"sky":"clear"}' }],
      tools,
      max_output_tokens: 4,
      temperature: 0,
      ...quiet,
    });
    expect(next.output.some((o) => o.type === 'message')).toBe(true);
  });

  it('continues a stored response by previous_response_id, reusing its prompt KV, and GETs and DELETEs it', async () => {
    const client = clientFor(app);
    const first = await client.responses.create({ model: MODEL, input: 'Remember the word apple.', max_output_tokens: 4, temperature: 0, ...quiet });
    const got = await client.responses.retrieve(first.id);
    expect(got.id).toBe(first.id);
    expect(got.output_text).toBe(first.output_text);
    const second = await client.responses.create({ model: MODEL, previous_response_id: first.id, input: 'What was it?', max_output_tokens: 4, temperature: 0, ...quiet });
    expect(second.previous_response_id).toBe(first.id);
    expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens);
    expect(second.usage!.input_tokens_details.cached_tokens).toBeGreaterThan(0);
    await client.responses.delete(first.id);
    await expect(client.responses.retrieve(first.id)).rejects.toMatchObject({ status: 404 });
    const unstored = await client.responses.create({ model: MODEL, input: 'hi', max_output_tokens: 1, store: false, ...quiet });
    await expect(client.responses.retrieve(unstored.id)).rejects.toMatchObject({ status: 404 });
  });

  it('passes the shared sampling and stopping fields through to chat under their own names', async () => {
    const client = clientFor(app);
    const body = { model: MODEL, input: 'Hello there', max_output_tokens: 8, temperature: 0, ...quiet };
    const plain = await client.responses.create(body);
    // A ban on the first greedy token changes the text: logit_bias reached the sampler.
    const first = rig.qwen.backend.tokenizer.encode(plain.output_text)[0]!;
    const biased = await client.responses.create({ ...body, logit_bias: { [first]: -100 } } as never);
    expect(biased.output_text).not.toBe(plain.output_text);
    const chat = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 8, temperature: 0, logit_bias: { [first]: -100 }, ...quiet });
    expect(biased.output_text).toBe(chat.choices[0]!.message.content);
    const bad = await app.handle(new Request('http://localhost/v1/responses', { method: 'POST', body: JSON.stringify({ ...body, repetition_penalty: -1 }) }));
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.param).toBe('repetition_penalty');
  });

  it('answers bad input with a 400 naming the Responses field', async () => {
    const post = (body: unknown) => app.handle(new Request('http://localhost/v1/responses', { method: 'POST', body: JSON.stringify(body) }));
    const cases: [unknown, string][] = [
      [{ model: MODEL }, 'input'],
      [{ model: MODEL, input: 5 }, 'input'],
      [{ model: MODEL, input: [{ type: 'message', role: 'wizard', content: 'x' }] }, 'input[0].role'],
      [{ model: MODEL, input: 'x', max_output_tokens: -3 }, 'max_output_tokens'],
      [{ model: MODEL, input: 'x', text: { format: { type: 'xml' } } }, 'text.format.type'],
      [{ model: MODEL, input: 'x', tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      [{ model: MODEL, input: 'x', previous_response_id: 'resp_nothing' }, 'previous_response_id'],
      [{ model: MODEL, input: 'x', temperature: 'hot' }, 'temperature'],
    ];
    for (const [body, param] of cases) {
      const r = await post(body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect((await r.json()).error.param, JSON.stringify(body)).toBe(param);
    }
  });
});

describe('the Vercel AI SDK default provider (POST /v1/responses)', () => {
  it('generates and streams text through openai(id), as its docs show', async () => {
    const { createOpenAI } = await import('@ai-sdk/openai');
    const { generateText, streamText } = await import('ai');
    const provider = createOpenAI({
      baseURL: 'http://localhost/v1',
      apiKey: 'x',
      fetch: (url, init) => app.handle(new Request(url as string, init as RequestInit)),
    });
    const seen: string[] = [];
    const model = provider(MODEL);
    const spy = createOpenAI({
      baseURL: 'http://localhost/v1',
      apiKey: 'x',
      fetch: (url, init) => {
        seen.push(new URL(url as string).pathname);
        return app.handle(new Request(url as string, init as RequestInit));
      },
    })(MODEL);
    const a = await generateText({ model: spy, prompt: 'Hello there', maxOutputTokens: 6, temperature: 0 });
    expect(seen).toEqual(['/v1/responses']);
    expect(a.text.length).toBeGreaterThan(0);
    expect(a.usage.outputTokens).toBe(6);
    const s = streamText({ model, prompt: 'Hello there', maxOutputTokens: 6, temperature: 0 });
    let text = '';
    for await (const part of s.textStream) text += part;
    expect(text).toBe(a.text);
  });
});
