/**
 * Structured output in Chromium: xgrammar (its embedded wasm) loads lazily in the page (an
 * engine with `worker: false`, through engine.fetch and the fetch shim) and in the engine's
 * module Worker, and constrains what the real OpenAI client gets back.
 */
import Ajv2020 from 'ajv/dist/2020';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createEngine, installFetchShim, type EngineHandle } from '../index';
import { SCHEMAS } from '../testing/schemas';

const MODEL = () => `${inject('fixturesURL')}/${inject('fixtures').qwen3!['Q8_0']}`;
const BASE = { model: 'default', messages: [{ role: 'user' as const, content: 'JSON please' }], max_tokens: 80, chat_template_kwargs: { enable_thinking: false } };
const { schema } = SCHEMAS.find((s) => s.name === 'nested_objects')!;
const REGEX = '[a-c]{2}-[0-9]{1,2}';
const ajv = new Ajv2020({ strict: false });

/**
 * What this page fetched of the xgrammar package (the dev server's pre-bundled module). An
 * observer, not getEntriesByType: the resource timing buffer (250 entries) fills up with the
 * test runner's own modules.
 */
const xgrammarFetches: string[] = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) if (/web[-_]xgrammar/.test(e.name)) xgrammarFetches.push(e.name);
}).observe({ type: 'resource', buffered: true });

const clientFor = (fetch?: typeof globalThis.fetch, baseURL = 'http://localhost/v1') =>
  new OpenAI({ baseURL, apiKey: 'unused', dangerouslyAllowBrowser: true, maxRetries: 0, ...(fetch ? { fetch } : {}) });

type Body = Record<string, unknown>;
async function chat(client: OpenAI, extra: Body): Promise<{ text: string; finish: string | null }> {
  const r = await client.chat.completions.create({ ...BASE, temperature: 0, ...extra } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
  return { text: r.choices[0]!.message.content ?? '', finish: r.choices[0]!.finish_reason };
}

async function expectSchemaAnswer(client: OpenAI, extra: Body = {}) {
  const { text, finish } = await chat(client, { response_format: { type: 'json_schema', json_schema: { name: 'nested_objects', schema } }, ...extra });
  expect(finish).toBe('stop');
  const validate = ajv.compile(schema);
  expect(validate(JSON.parse(text)), `${text} ${JSON.stringify(validate.errors)}`).toBe(true);
}

async function expectRegexAnswer(client: OpenAI, extra: Body = {}) {
  const { text, finish } = await chat(client, { regex: REGEX, ...extra });
  expect(finish).toBe('stop');
  expect(text).toMatch(new RegExp(`^${REGEX}$`));
}

describe('structured output with the engine in the page', () => {
  let engine: EngineHandle;
  beforeAll(async () => {
    engine = await createEngine({ model: MODEL(), cache: false, worker: false });
  });
  afterAll(() => engine?.unload());

  it('loads xgrammar only when the first structured request comes', async () => {
    const free = await chat(clientFor(engine.fetch), { max_tokens: 2 });
    expect(free.text.length).toBeGreaterThan(0);
    expect(xgrammarFetches).toEqual([]);
    await expectRegexAnswer(clientFor(engine.fetch));
    await expect.poll(() => xgrammarFetches.length).toBe(1);
  });

  it('answers a json_schema request with JSON valid against the schema, through engine.fetch', async () => {
    await expectSchemaAnswer(clientFor(engine.fetch));
    await expectSchemaAnswer(clientFor(engine.fetch), { temperature: 1, seed: 7 });
  });

  it('answers json_schema and regex requests through the fetch shim', async () => {
    const uninstall = installFetchShim(engine);
    try {
      const client = clientFor(undefined, `${location.origin}/v1`);
      await expectSchemaAnswer(client);
      await expectRegexAnswer(client, { temperature: 1, seed: 3 });
    } finally {
      uninstall();
    }
  });

  it('answers a grammar xgrammar rejects with a 400 carrying its reason, and keeps working', async () => {
    const e = (await chat(clientFor(engine.fetch), { ebnf: 'start ::= "a"' }).catch((x: unknown) => x)) as InstanceType<typeof OpenAI.APIError>;
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect(e.param).toBe('ebnf');
    expect(e.message).toContain('The root rule with name "root" is not found');
    // The wasm survives the failed compile.
    await expectRegexAnswer(clientFor(engine.fetch));
  });
});

describe('structured output with the engine in its Worker', () => {
  let engine: EngineHandle;
  beforeAll(async () => {
    engine = await createEngine({ model: MODEL(), cache: false });
  });
  afterAll(() => engine?.unload());

  it('answers a json_schema request with JSON valid against the schema', async () => {
    await expectSchemaAnswer(clientFor(engine.fetch), { temperature: 1, seed: 7 });
  });

  it('answers a regex request, streamed too', async () => {
    await expectRegexAnswer(clientFor(engine.fetch));
    const stream = await clientFor(engine.fetch).chat.completions.create({ ...BASE, temperature: 0, regex: REGEX, stream: true } as unknown as OpenAI.ChatCompletionCreateParamsStreaming);
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text).toMatch(new RegExp(`^${REGEX}$`));
  });

  it('answers a schema xgrammar rejects with a 400 naming the field and its reason', async () => {
    const bad = { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { type: 'integer', minimum: 5, maximum: 1 } } } } } };
    const e = (await chat(clientFor(engine.fetch), bad).catch((x: unknown) => x)) as InstanceType<typeof OpenAI.APIError>;
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect(e.param).toBe('response_format.json_schema.schema');
    // xgrammar's own words, read from its stderr (without the capture: "Aborted()").
    expect(e.message).toContain('Invalid range: minimum greater than maximum');
  });
});
