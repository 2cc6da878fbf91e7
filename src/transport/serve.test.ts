/**
 * The Node server end to end: `serveCommand` loads the tiny fixture on Dawn (SwiftShader here),
 * and the real OpenAI client talks to it over HTTP. Greedy replies must equal what the engine's
 * own fetch gives in process: the transport adds and loses nothing.
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureFixture } from '../testing/fixtures/shared';
import { UsageError } from '../cli/io';
import { parseServeArgs, serveCommand } from '../cli/serve';
import type { Server } from './node-server';

const KEY = 'test-key-123';
let server: Server;
let client: OpenAI;
/** --kv-cache-dir: the server keeps its prompt pages here. */
let kvDir: string;

beforeAll(async () => {
  const paths = await ensureFixture({ arch: 'llama', preset: 'tiny' });
  const lines: string[] = [];
  kvDir = await mkdtemp(join(tmpdir(), 'serve-kv-'));
  server = (await serveCommand(['--model', paths.gguf.Q8_0!, '--port', '0', '--api-key', KEY, '--no-cache', '--kv-cache-dir', kvDir], (l) => lines.push(l)))!;
  expect(lines.at(-1)).toBe(`listening on ${server.url}/v1 (API key required)`);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0, dangerouslyAllowBrowser: true });
});

afterAll(async () => {
  await server?.close();
  await rm(kvDir, { recursive: true, force: true });
});

/** The same request straight through the engine's fetch, no HTTP. */
async function inProcess(path: string, body: object): Promise<any> {
  const r = await server.engine.fetch(`http://localhost/v1/${path}`, { method: 'POST', body: JSON.stringify(body) });
  return r.json();
}

describe('webgpu-llm serve', () => {
  it('binds loopback by default and answers a non-streamed completion as the engine does in process', async () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const req = { model: 'default', prompt: 'Hello world', max_tokens: 3, temperature: 0 };
    const reply = await client.completions.create(req);
    expect(reply.object).toBe('text_completion');
    expect(reply.choices[0].text.length).toBeGreaterThan(0);
    expect(reply.usage?.completion_tokens).toBeGreaterThan(0);
    const direct = await inProcess('completions', req);
    expect(reply.choices[0].text).toBe(direct.choices[0].text);
  });

  it('writes full prompt pages to --kv-cache-dir behind the request', async () => {
    const reply = await client.completions.create({ model: 'default', prompt: 'one two three four five six seven eight nine ten '.repeat(5), max_tokens: 1, temperature: 0 });
    const pages = Math.floor(reply.usage!.prompt_tokens / (await server.engine.stats()).pageSize);
    expect(pages).toBeGreaterThan(1);
    const files = async () => (await readdir(kvDir, { recursive: true })).filter((f) => String(f).endsWith('.kv')).length;
    for (let i = 0; i < 100 && (await files()) < pages; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await files()).toBe(pages);
  });

  it('streams a chat completion as server-sent events, ending with a finish reason', async () => {
    const req = { model: 'default', messages: [{ role: 'user' as const, content: 'Say hi' }], max_tokens: 3, temperature: 0 };
    const stream = await client.chat.completions.create({ ...req, stream: true });
    let text = '';
    const finishes: Array<string | null> = [];
    for await (const chunk of stream) {
      expect(chunk.object).toBe('chat.completion.chunk');
      text += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.choices[0]?.finish_reason) finishes.push(chunk.choices[0].finish_reason);
    }
    expect(finishes).toHaveLength(1);
    expect(['stop', 'length']).toContain(finishes[0]);
    const direct = await inProcess('chat/completions', req);
    expect(text).toBe(direct.choices[0].message.content);
  });

  it('answers 401 to a request without the API key, but /health needs none', async () => {
    const anon = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
    const err = await anon.models.list().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(401);
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe('invalid_api_key');
    const health = await fetch(`${server.url}/health`);
    expect(health.status).toBe(200);
  });

  it('stops generating when the client aborts mid-stream, so the next request is answered at once', async () => {
    const controller = new AbortController();
    // ~100 ms per token on SwiftShader: 400 tokens would hold the engine for ~40 s if the abort were lost.
    const stream = await client.completions.create(
      { model: 'default', prompt: 'Once upon a time', max_tokens: 400, temperature: 0, stream: true, ignore_eos: true } as OpenAI.CompletionCreateParamsStreaming,
      { signal: controller.signal },
    );
    let chunks = 0;
    for await (const _ of stream) {
      if (++chunks === 2) controller.abort();
    }
    expect(chunks).toBe(2);
    const t = performance.now();
    const next = await client.completions.create({ model: 'default', prompt: 'Hi', max_tokens: 2, temperature: 0 });
    expect(next.choices[0].finish_reason).toBeDefined();
    expect(performance.now() - t).toBeLessThan(15_000);
  });
});

describe('the serve command line', () => {
  it('takes --flag value and --flag=value, with loopback and port 8080 by default', () => {
    expect(parseServeArgs(['--model', 'm.gguf'])).toMatchObject({ model: 'm.gguf', port: 8080, host: '127.0.0.1', cache: true, precision: 'auto' });
    expect(parseServeArgs(['--model=x', '--port=9000', '--host', '0.0.0.0', '--api-key', 'k', '--no-cache', '--integer-dot', '--allow-image-urls'])).toMatchObject({
      allowImageUrls: true,
      model: 'x',
      port: 9000,
      host: '0.0.0.0',
      apiKey: 'k',
      cache: false,
      integerDot: true,
    });
    expect(parseServeArgs(['--model', 'm.gguf'])?.integerDot).toBeUndefined();
    expect(parseServeArgs(['--model', 'm.gguf'])?.faultInjection).toBeUndefined();
    expect(parseServeArgs(['--model', 'm.gguf', '--fault-injection'])?.faultInjection).toBe(true);
    expect(parseServeArgs(['--model', 'm.gguf', '--kv-cache-dir', '/tmp/kv', '--kv-cache-budget=1000'])?.persistKv).toEqual({ dir: '/tmp/kv', budgetBytes: 1000 });
    expect(() => parseServeArgs(['--model', 'm.gguf', '--kv-cache-budget', '1000'])).toThrow(/needs --kv-cache-dir/);
    expect(parseServeArgs(['--model', 'm.gguf', '--device-recovery', '5,30'])?.deviceRecovery).toEqual({ maxLosses: 5, windowMs: 30_000 });
    expect(parseServeArgs(['--model', 'm.gguf', '--device-recovery', '0'])?.deviceRecovery).toBe(false);
    expect(() => parseServeArgs(['--model', 'm.gguf', '--device-recovery', '5'])).toThrow(/N,S/);
    expect(parseServeArgs(['--model', 'm.gguf'])?.allowImageUrls).toBeUndefined();
    expect(parseServeArgs(['--model', 'm.gguf', '--mmproj', 'mmproj.gguf'])?.mmproj).toBe('mmproj.gguf');
    expect(parseServeArgs(['--help'])).toBeNull();
    expect(parseServeArgs(['--model', 'm', '--speculative-ngram', '3,8'])?.speculative).toEqual({ type: 'ngram', n: 3, k: 8 });
    expect(parseServeArgs(['--model', 'm'])?.speculative).toBeUndefined();
    expect(parseServeArgs(['--model', 'm', '--speculative-mtp'])?.speculative).toEqual({ type: 'mtp' });
    expect(parseServeArgs(['--model', 'm', '--speculative-mtp-tokens', '3'])?.speculative).toEqual({ type: 'mtp', k: 3 });
    expect(parseServeArgs(['--model', 'm', '--speculative-mtp-tokens', '3', '--speculative-mtp'])?.speculative).toEqual({ type: 'mtp', k: 3 });
    expect(parseServeArgs(['--model', 'm', '--mtp'])?.mtp).toBe(true);
    expect(parseServeArgs(['--model', 'm'])?.mtp).toBeUndefined();
    expect(parseServeArgs(['--model', 'm', '--draft-model', 'd.gguf', '--draft-tokens', '4'])?.draft).toEqual({ model: 'd.gguf', tokens: 4 });
    expect(parseServeArgs(['--model', 'm', '--draft-tokens', '4', '--draft-model', 'd.gguf'])?.draft).toEqual({ model: 'd.gguf', tokens: 4 });
    expect(parseServeArgs(['--model', 'm', '--draft-model', 'd.gguf'])?.draft).toEqual({ model: 'd.gguf' });
  });

  it('names the flag at fault', () => {
    expect(() => parseServeArgs([])).toThrow(UsageError);
    expect(() => parseServeArgs(['--model', 'm', '--port', '70000'])).toThrow(/--port must be an integer from 0 to 65535/);
    expect(() => parseServeArgs(['--model'])).toThrow(/--model needs a value/);
    expect(() => parseServeArgs(['--model', 'm', '--bogus'])).toThrow(/unknown option --bogus/);
    expect(() => parseServeArgs(['--model', 'm', '--lora', 'adapter'])).toThrow(/--lora wants NAME=PATH/);
    expect(() => parseServeArgs(['--model', 'm', '--speculative-ngram', '3'])).toThrow(/--speculative-ngram wants N,K/);
    expect(() => parseServeArgs(['--model', 'm', '--speculative-mtp', '--speculative-ngram', '3,8'])).toThrow(/choose one/);
    expect(() => parseServeArgs(['--model', 'm', '--speculative-ngram', '3,8', '--speculative-mtp'])).toThrow(/choose one/);
    expect(() => parseServeArgs(['--model', 'm', '--speculative-ngram', '3,8', '--speculative-mtp-tokens', '2'])).toThrow(/choose one/);
    expect(() => parseServeArgs(['--model', 'm', '--speculative-mtp-tokens', '9'])).toThrow(/--speculative-mtp-tokens must be an integer from 1 to 8/);
    expect(() => parseServeArgs(['--model', 'm', '--draft-tokens', '4'])).toThrow(/--draft-tokens needs --draft-model/);
    expect(() => parseServeArgs(['--model', 'm', '--draft-model', 'd', '--draft-tokens', '0'])).toThrow(/--draft-tokens must be an integer from 1 to 32/);
    expect(() => parseServeArgs(['--model', 'm', '--lora', 'a:b=p'])).toThrow(/must not contain ":"/);
    expect(() => parseServeArgs(['--model', 'm', '--lora', 'a=p', '--lora', 'a=q'])).toThrow(/--lora a is given twice/);
  });

  it('takes --lora NAME=PATH, repeated, and --max-lora-rank', () => {
    expect(parseServeArgs(['--model', 'm', '--lora', 'sql=./sql-lora', '--lora=chat=org/chat-lora', '--max-lora-rank', '128'])).toMatchObject({
      lora: { sql: './sql-lora', chat: 'org/chat-lora' },
      maxLoraRank: 128,
    });
    expect(parseServeArgs(['--model', 'm'])).toMatchObject({ lora: {} });
  });

  it('reports the page pool and the batch live through engine.stats()', async () => {
    const { engine } = server;
    const stream = await client.completions.create({ model: 'default', prompt: 'Count with me', max_tokens: 12, temperature: 0, stream: true, ignore_eos: true } as never);
    const it = (stream as unknown as AsyncIterable<unknown>)[Symbol.asyncIterator]();
    await it.next();
    const during = await engine.stats();
    expect(during.running).toBe(1);
    expect(during.pages.used).toBeGreaterThan(0);
    while (!(await it.next()).done);
    const after = await engine.stats();
    expect(after.running + after.waiting).toBe(0);
    expect(after.pages.used).toBe(0);
    expect(after.pages.total * after.pageSize).toBe(engine.info.kvCacheTokens);
    expect(after.pages.free + after.pages.cached).toBe(after.pages.total);
    expect(after.steps).toBeGreaterThan(during.steps);
  });
});

describe('webgpu-llm serve --kv-cache-dir across a restart', () => {
  /**
   * A prompt of PROMPT tokens, then 8 greedy ones. The figure, 2,000 tokens, passes but takes
   * 134 s on SwiftShader (the cold prefill); 512 takes 25 s. KV_RESTART_TOKENS=2000 runs the former.
   */
  const PROMPT = Number(process.env.KV_RESTART_TOKENS ?? 512);

  it(`a new server on the same directory reads a ${PROMPT}-token prompt's pages back, with the cold server's output`, { timeout: 300_000 }, async () => {
    const paths = await ensureFixture({ arch: 'llama', preset: 'tiny' });
    const dir = await mkdtemp(join(tmpdir(), 'serve-kv-restart-'));
    const prompt = Array.from({ length: PROMPT }, (_, i) => 10 + ((i * 7919) % 240));
    const once = async () => {
      const s = (await serveCommand(['--model', paths.gguf.Q8_0!, '--port', '0', '--no-cache', '--kv-cache-dir', dir], () => {}))!;
      try {
        const c = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 600_000 });
        const reply = await c.completions.create({ model: 'default', prompt, max_tokens: 8, temperature: 0 });
        expect(reply.usage!.prompt_tokens).toBe(PROMPT);
        return { text: reply.choices[0]!.text, cached: reply.usage!.prompt_tokens_details!.cached_tokens!, pageSize: (await s.engine.stats()).pageSize };
      } finally {
        await s.close(); // settles the page writes
      }
    };
    try {
      const cold = await once();
      expect(cold.cached).toBe(0);
      const warm = await once();
      expect(warm.cached).toBeGreaterThanOrEqual(PROMPT - cold.pageSize);
      expect(warm.text).toBe(cold.text);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
