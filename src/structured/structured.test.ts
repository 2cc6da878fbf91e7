/**
 * Structured output end to end: the `openai` client against the app on the tiny qwen3 fixture
 * (random weights, a ~460-token byte-level BPE). Unconstrained, such a model writes noise; every
 * reply here must parse and validate against its schema (ajv), or match its regex / grammar.
 */
import Ajv2020 from 'ajv/dist/2020';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appFor, clientFor, loadRig, type Rig } from '../testing/api-rig';
import { SCHEMAS } from '../testing/schemas';

let rig: Rig;
let client: OpenAI;
const ajv = new Ajv2020({ strict: false });

beforeAll(async () => {
  rig = await loadRig();
  client = clientFor(appFor([rig.qwen.backend]));
});
afterAll(() => rig?.close());

const MODEL = 'qwen3-tiny';
const MESSAGES = [{ role: 'user' as const, content: 'Answer in JSON.' }];
type Extra = Record<string, unknown>;

async function chat(extra: Extra, stream = false): Promise<{ text: string; finish: string | null }> {
  const body = { model: MODEL, messages: MESSAGES, max_tokens: 160, temperature: 1, seed: 1, chat_template_kwargs: { enable_thinking: false }, ...extra };
  if (!stream) {
    const r = await client.chat.completions.create(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    return { text: r.choices[0]!.message.content ?? '', finish: r.choices[0]!.finish_reason };
  }
  let text = '';
  let finish: string | null = null;
  for await (const c of await client.chat.completions.create({ ...(body as object), stream: true } as OpenAI.ChatCompletionCreateParamsStreaming)) {
    text += c.choices[0]?.delta.content ?? '';
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  return { text, finish };
}

async function complete(extra: Extra, stream = false): Promise<{ text: string; finish: string | null }> {
  const body = { model: MODEL, prompt: 'Output:', max_tokens: 160, temperature: 1, seed: 2, ...extra };
  if (!stream) {
    const r = await client.completions.create(body as unknown as OpenAI.CompletionCreateParamsNonStreaming);
    return { text: r.choices[0]!.text, finish: r.choices[0]!.finish_reason };
  }
  let text = '';
  let finish: string | null = null;
  for await (const c of await client.completions.create({ ...(body as object), stream: true } as OpenAI.CompletionCreateParamsStreaming)) {
    text += c.choices[0]?.text ?? '';
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  return { text, finish };
}

function expectValid(schema: object, text: string): void {
  let value: unknown;
  expect(() => (value = JSON.parse(text)), `parses: ${text}`).not.toThrow();
  const validate = ajv.compile(schema);
  expect(validate(value), `${text} ${JSON.stringify(validate.errors)}`).toBe(true);
}

describe('json_schema through response_format', () => {
  SCHEMAS.forEach(({ name, schema }, i) => {
    it(`gives JSON that validates against the ${name} schema`, async () => {
      const stream = i % 3 === 2;
      const { text, finish } = await chat({ seed: 100 + i, response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } } }, stream);
      expect(finish).toBe('stop');
      expectValid(schema, text);
    });
  });
});

describe('the other ways to ask for structure', () => {
  const point = { type: 'object', properties: { x: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['x'] };

  it('gives a JSON object for response_format json_object', async () => {
    const { text, finish } = await chat({ response_format: { type: 'json_object' } });
    expect(finish).toBe('stop');
    expect(JSON.parse(text)).toBeTypeOf('object');
    expect(text.startsWith('{')).toBe(true);
  });

  it('writes noise without a constraint, so the constraint is what makes the JSON', async () => {
    const { text } = await chat({ max_tokens: 20, ignore_eos: true });
    expect(() => JSON.parse(text)).toThrow();
  });

  it('takes a top-level json_schema as an object and as JSON text, on completions too, streamed', async () => {
    for (const json_schema of [point, JSON.stringify(point)]) {
      expectValid(point, (await chat({ json_schema })).text);
      expectValid(point, (await complete({ json_schema }, true)).text);
    }
  });

  it('takes mistral.rs grammar {type: json_schema, value} and vLLM response_format {type: json_schema, schema}', async () => {
    expectValid(point, (await complete({ grammar: { type: 'json_schema', value: point } })).text);
    expectValid(point, (await chat({ response_format: { type: 'json_schema', schema: point } }, true)).text);
  });

  it('matches a regex on both endpoints, streamed and not, and through grammar {type: regex}', async () => {
    const pattern = '(yes|no)-[0-9]{2,3}';
    const re = new RegExp(`^${pattern}$`);
    for (const [i, r] of [
      await chat({ regex: pattern }),
      await chat({ regex: pattern }, true),
      await complete({ regex: pattern }),
      await complete({ grammar: { type: 'regex', value: pattern } }, true),
    ].entries()) {
      expect(r.text, `case ${i}`).toMatch(re);
      expect(r.finish).toBe('stop');
    }
  });

  it('follows an EBNF grammar given as ebnf, as GBNF text in grammar, and as grammar {type: gbnf}', async () => {
    const ebnf = ['root ::= greeting " " name "!"', 'greeting ::= "hi" | "hello"', 'name ::= [a-z]{1,4}'].join('\n');
    const re = /^(hi|hello) [a-z]{1,4}!$/;
    expect((await chat({ ebnf })).text).toMatch(re);
    expect((await complete({ grammar: ebnf }, true)).text).toMatch(re);
    expect((await complete({ grammar: { type: 'gbnf', value: ebnf } })).text).toMatch(re);
  });

  it("ends with finish_reason 'length' and a JSON prefix when max_tokens cuts the value short", async () => {
    const schema = { type: 'object', properties: { a: { type: 'string', minLength: 30, maxLength: 40 } }, required: ['a'] };
    for (const stream of [false, true]) {
      const { text, finish } = await chat({ max_tokens: 8, response_format: { type: 'json_schema', json_schema: { name: 'long', schema } } }, stream);
      expect(finish).toBe('length');
      expect(text, text).toMatch(/^\{"a"/);
      expect(() => JSON.parse(text)).toThrow();
    }
  });

  it('gives n choices that each follow the grammar', async () => {
    const r = await client.completions.create({ model: MODEL, prompt: 'x', n: 3, max_tokens: 40, temperature: 1, seed: 5, regex: '[ab]{3}' } as unknown as OpenAI.CompletionCreateParamsNonStreaming);
    expect(r.choices).toHaveLength(3);
    for (const c of r.choices) expect(c.text).toMatch(/^[ab]{3}$/);
  });
});

describe('invalid structured-output requests', () => {
  const cases: Array<[string, Extra, string]> = [
    ['a schema xgrammar rejects', { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { type: 'integer', minimum: 5, maximum: 1 } } } } } }, 'response_format.json_schema.schema'],
    ['a schema whose type is not a JSON type', { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { type: 7 } } } } } }, 'response_format.json_schema.schema'],
    ['a json_schema string that is not JSON', { json_schema: '{nope' }, 'json_schema'],
    ['an unbalanced regex', { regex: '(a' }, 'regex'],
    ['an EBNF grammar without root', { ebnf: 'start ::= "a"' }, 'ebnf'],
    ['a GBNF grammar with a syntax error', { grammar: 'root ::= "a" |' }, 'grammar'],
    ['a lark grammar', { grammar: { type: 'lark', value: 'start: "a"' } }, 'grammar.type'],
    ['json_schema without its json_schema', { response_format: { type: 'json_schema' } }, 'response_format.json_schema'],
  ];
  for (const [what, extra, param] of cases) {
    it(`answers ${what} with a 400 naming ${param}`, async () => {
      const e = await chat(extra).catch((x: unknown) => x);
      expect((e as { status?: number }).status).toBe(400);
      expect((e as { param?: string }).param).toBe(param);
    });
  }
});

describe('forced tool calls', () => {
  const weather = {
    type: 'function' as const,
    function: {
      name: 'get_weather',
      parameters: { type: 'object', properties: { city: { enum: ['Paris', 'Oslo'] }, days: { type: 'integer', minimum: 1, maximum: 7 } }, required: ['city', 'days'] },
    },
  };
  const time = { type: 'function' as const, function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { enum: ['UTC', 'CET'] } }, required: ['tz'] } } };

  for (const stream of [false, true]) {
    it(`calls the named function with arguments valid against its schema${stream ? ', streamed' : ''}`, async () => {
      const body = {
        model: MODEL,
        messages: MESSAGES,
        tools: [weather, time],
        tool_choice: { type: 'function', function: { name: 'get_weather' } },
        max_tokens: 120,
        temperature: 1,
        seed: 8,
        chat_template_kwargs: { enable_thinking: false },
      };
      let calls: Array<{ name: string; arguments: string }>;
      let finish: string | null;
      if (!stream) {
        const r = await client.chat.completions.create(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
        const m = r.choices[0]!.message;
        calls = (m.tool_calls ?? []).map((c) => (c as OpenAI.ChatCompletionMessageFunctionToolCall).function);
        finish = r.choices[0]!.finish_reason;
      } else {
        const acc: Array<{ name: string; arguments: string }> = [];
        finish = null;
        for await (const c of await client.chat.completions.create({ ...body, stream: true } as unknown as OpenAI.ChatCompletionCreateParamsStreaming)) {
          for (const d of c.choices[0]?.delta.tool_calls ?? []) {
            const x = (acc[d.index] ??= { name: '', arguments: '' });
            x.name += d.function?.name ?? '';
            x.arguments += d.function?.arguments ?? '';
          }
          finish = c.choices[0]?.finish_reason ?? finish;
        }
        calls = acc;
      }
      expect(finish).toBe('tool_calls');
      expect(calls).toHaveLength(1);
      expect(calls[0]!.name).toBe('get_weather');
      expectValid(weather.function.parameters, calls[0]!.arguments);
    });
  }

  it("calls one of the tools for tool_choice 'required'", async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: MESSAGES,
      tools: [weather, time],
      tool_choice: 'required',
      parallel_tool_calls: false,
      max_tokens: 120,
      temperature: 1,
      seed: 9,
      chat_template_kwargs: { enable_thinking: false },
    } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const calls = (r.choices[0]!.message.tool_calls ?? []).map((c) => (c as OpenAI.ChatCompletionMessageFunctionToolCall).function);
    expect(r.choices[0]!.finish_reason).toBe('tool_calls');
    expect(calls).toHaveLength(1);
    const tool = [weather, time].find((t) => t.function.name === calls[0]!.name);
    expect(tool).toBeDefined();
    expectValid(tool!.function.parameters, calls[0]!.arguments);
  });

  it('refuses a forced call combined with response_format, naming tool_choice', async () => {
    const e = await chat({ tools: [weather], tool_choice: 'required', response_format: { type: 'json_object' } }).catch((x: unknown) => x);
    expect((e as { status?: number }).status).toBe(400);
    expect((e as { param?: string }).param).toBe('tool_choice');
  });
});

describe('strict tools with tool_choice auto', () => {
  const weather = {
    type: 'function' as const,
    function: {
      name: 'get_weather',
      strict: true,
      parameters: { type: 'object', properties: { city: { enum: ['Paris', 'Oslo'] }, days: { type: 'integer', minimum: 1, maximum: 7 } }, required: ['city', 'days'] },
    },
  };

  async function reply(extra: Extra) {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: MESSAGES,
      tools: [weather],
      tool_choice: 'auto',
      max_tokens: 80,
      temperature: 1,
      chat_template_kwargs: { enable_thinking: false },
      ...extra,
    } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const m = r.choices[0]!.message;
    return { content: m.content ?? '', calls: (m.tool_calls ?? []).map((c) => (c as OpenAI.ChatCompletionMessageFunctionToolCall).function) };
  }

  it('no longer answers a strict tool with a 400', async () => {
    const { content, calls } = await reply({ seed: 30, max_tokens: 8 });
    expect(typeof content).toBe('string');
    expect(Array.isArray(calls)).toBe(true);
  });

  it('gives arguments valid against the schema whenever the model opens a call (pushed there by logit_bias)', async () => {
    const open = rig.qwen.backend.tokenizer.tokenToId('<tool_call>');
    expect(open).toBeTypeOf('number');
    let called = 0;
    for (const seed of [31, 32, 33]) {
      const { calls } = await reply({ seed, logit_bias: { [open!]: 30 } });
      for (const c of calls) {
        expect(c.name).toBe('get_weather');
        expectValid(weather.function.parameters, c.arguments);
        called++;
      }
    }
    expect(called).toBeGreaterThan(0);
  });

  it('refuses strict tools combined with response_format, naming tools', async () => {
    const e = await chat({ tools: [weather], tool_choice: 'auto', response_format: { type: 'json_object' } }).catch((x: unknown) => x);
    expect((e as { status?: number }).status).toBe(400);
    expect((e as { param?: string }).param).toBe('tools');
  });
});
