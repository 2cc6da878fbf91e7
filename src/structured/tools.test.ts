/**
 * Forced and strict tool calls end to end, in all three call formats: the `openai` client against
 * the app on the tiny fixtures (qwen3: hermes `<tool_call>`, llama: llama3 JSON, mistral:
 * `[TOOL_CALLS][...]`), reference backend, random weights. Whatever such a model writes, every
 * call in the reply must name an offered tool with arguments valid against its schema (ajv), and
 * the streamed reply, assembled, must equal the non-streamed one for the same seed.
 */
import Ajv2020 from 'ajv/dist/2020';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appFor, clientFor, loadRig, type Rig } from '../testing/api-rig';
import { openModel } from '../model/open';
import { ReferenceBackend } from '../reference/backend';
import { ensureFixture } from '../testing/fixtures/shared';

let rig: Rig;
let client: OpenAI;
let mistral: ReferenceBackend;
const ajv = new Ajv2020({ strict: false });

beforeAll(async () => {
  const [r, m] = await Promise.all([loadRig(), ensureFixture({ arch: 'mistral', preset: 'tiny' }, { hf: ['F32'], gguf: [] })]);
  rig = r;
  mistral = await ReferenceBackend.create(await openModel(m.hf.F32!), { id: 'mistral-tiny' });
  client = clientFor(appFor([rig.qwen.backend, rig.llama.backend, mistral]));
});
afterAll(() => rig?.close());

const WEATHER = { type: 'object', properties: { city: { enum: ['Paris', 'Oslo'] }, days: { type: 'integer', minimum: 1, maximum: 7 } }, required: ['city', 'days'] };
const TIME = { type: 'object', properties: { tz: { enum: ['UTC', 'CET'] } }, required: ['tz'] };
const SCHEMAS: Record<string, object> = { get_weather: WEATHER, get_time: TIME };
/**
 * Strict, so `auto` constrains them too; forced calls follow the schemas either way. One tool list
 * for every request: the prompt is the same, so each model prefills it once (the reference
 * backend reuses the cached prefix), which is most of these tests' time.
 */
const TOOLS = Object.entries(SCHEMAS).map(([name, parameters]) => ({ type: 'function' as const, function: { name, parameters, strict: true } }));

interface Model {
  id: string;
  format: string;
  /**
   * logit_bias that makes the random model call under `auto`: the control token that opens a
   * call (mistral: and the list's `]`, less, so a list closes after its first call).
   */
  push: () => Record<number, number>;
}
const MODELS: Model[] = [
  { id: 'qwen3-tiny', format: 'hermes', push: () => ({ [rig.qwen.backend.tokenizer.tokenToId('<tool_call>')!]: 30 }) },
  { id: 'llama-tiny', format: 'llama3', push: () => ({ [rig.llama.backend.tokenizer.tokenToId('<|python_tag|>')!]: 30 }) },
  { id: 'mistral-tiny', format: 'mistral', push: () => ({ [mistral.tokenizer.tokenToId('[TOOL_CALLS]')!]: 30, [mistral.tokenizer.tokenToId(']')!]: 20 }) },
];

interface Reply {
  content: string | null;
  calls: Array<{ id: string; name: string; arguments: string }>;
  finish: string | null;
}

async function reply(body: Record<string, unknown>, stream: boolean): Promise<Reply> {
  if (!stream) {
    const r = await client.chat.completions.create(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const m = r.choices[0]!.message;
    const calls = (m.tool_calls ?? []).map((c) => {
      const f = (c as OpenAI.ChatCompletionMessageFunctionToolCall).function;
      return { id: c.id, name: f.name, arguments: f.arguments };
    });
    return { content: m.content, calls, finish: r.choices[0]!.finish_reason };
  }
  let content = '';
  const calls: Reply['calls'] = [];
  let finish: string | null = null;
  for await (const c of await client.chat.completions.create({ ...body, stream: true } as unknown as OpenAI.ChatCompletionCreateParamsStreaming)) {
    const ch = c.choices[0];
    if (!ch) continue;
    content += ch.delta.content ?? '';
    for (const d of ch.delta.tool_calls ?? []) {
      const x = (calls[d.index] ??= { id: '', name: '', arguments: '' });
      x.id += d.id ?? '';
      x.name += d.function?.name ?? '';
      x.arguments += d.function?.arguments ?? '';
    }
    finish = ch.finish_reason ?? finish;
  }
  // The non-streamed message has content null when it holds only calls.
  return { content: content === '' && calls.length ? null : content, calls, finish };
}

/** Every call names one of `names` and its arguments are valid against that tool's schema. */
function expectValidCalls(r: Reply, names: string[]): void {
  for (const c of r.calls) {
    expect(names, c.name).toContain(c.name);
    let args: unknown;
    expect(() => (args = JSON.parse(c.arguments)), c.arguments).not.toThrow();
    const validate = ajv.compile(SCHEMAS[c.name]!);
    expect(validate(args), `${c.arguments} ${JSON.stringify(validate.errors)}`).toBe(true);
    expect(c.id).toMatch(/^(call_[A-Za-z0-9]{24}|[A-Za-z0-9]{9})$/);
  }
}

/** Runs the request streamed and not; both must agree (call ids aside, which are random). */
async function both(body: Record<string, unknown>): Promise<Reply> {
  const plain = await reply(body, false);
  const streamed = await reply(body, true);
  const strip = (r: Reply) => ({ ...r, calls: r.calls.map(({ name, arguments: a }) => ({ name, arguments: a })) });
  expect(strip(streamed)).toEqual(strip(plain));
  return plain;
}

const base = (m: Model, extra: Record<string, unknown>) => ({
  model: m.id,
  messages: [{ role: 'user', content: 'What is the weather in Oslo?' }],
  temperature: 1,
  chat_template_kwargs: { enable_thinking: false },
  ...extra,
});

describe.each(MODELS)('tool calls on $id ($format format)', (m) => {
  it("calls one or more offered tools for tool_choice 'required', streamed and not alike", async () => {
    const r = await both(base(m, { tools: TOOLS, tool_choice: 'required', max_tokens: 160, seed: 11 }));
    expect(r.finish).toBe('tool_calls');
    expect(r.content).toBeNull();
    expect(r.calls.length).toBeGreaterThanOrEqual(1);
    // Llama 3's template holds one call per message.
    if (m.format === 'llama3') expect(r.calls).toHaveLength(1);
    expectValidCalls(r, ['get_weather', 'get_time']);
  });

  it('calls exactly the named function, streamed and not alike', async () => {
    const r = await both(
      base(m, { tools: TOOLS, tool_choice: { type: 'function', function: { name: 'get_time' } }, max_tokens: 80, seed: 12 }),
    );
    expect(r.finish).toBe('tool_calls');
    expect(r.calls.map((c) => c.name)).toEqual(['get_time']);
    expectValidCalls(r, ['get_time']);
  });

  it('gives valid calls from a strict tool under auto when the model opens one, streamed and not alike', async () => {
    const r = await both(
      base(m, { tools: TOOLS, tool_choice: 'auto', max_tokens: 80, seed: 13, logit_bias: m.push() }),
    );
    // Pushed to the opener at every free step, hermes and mistral models open call after call
    // until max_tokens; a Llama reply that begins with a call is that call alone, so it ends.
    expect(r.finish).toBe(m.format === 'llama3' ? 'tool_calls' : 'length');
    expect(r.calls.length).toBeGreaterThanOrEqual(1);
    expectValidCalls(r, ['get_weather', 'get_time']);
  });

  it("ends with finish_reason 'length' and no call when max_tokens cuts a forced call short", async () => {
    const r = await both(base(m, { tools: TOOLS, tool_choice: 'required', max_tokens: 4, seed: 14 }));
    expect(r.finish).toBe('length');
    expect(r.calls).toEqual([]);
  });
});
