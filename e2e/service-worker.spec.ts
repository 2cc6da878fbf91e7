/**
 * The service worker relay: page A hosts the engine and registers the service worker; page B
 * (another tab, no engine) calls /v1 with plain fetch and the OpenAI client. The service worker is
 * then stopped (CDP) and must serve again from scratch; with no host left it answers 503. Two
 * client pages streaming at once share the engine's steps rather than queue one behind the other.
 * The host's KV pages in OPFS outlive a reload of its page.
 */
import { expect, test, type BrowserContext, type Page } from '@playwright/test';
import Ajv2020 from 'ajv/dist/2020.js';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { serveDirectory, type StaticServer } from '../src/testing/server';
import type { TimedStream } from './pages/client';

const PAGES = 'http://localhost:5180';
let fixtures: StaticServer;
let modelURL: string;

test.beforeAll(async () => {
  // The fixture generator needs Vite's `?raw` imports, so it runs under vite-node (a no-op when
  // the shared fixture cache already holds the model).
  const root = fileURLToPath(new URL('..', import.meta.url));
  execFileSync('npx', ['vite-node', 'tools/make-fixtures.ts', '--arch', 'llama'], { cwd: root, stdio: 'ignore' });
  fixtures = await serveDirectory(process.env.WEBGPU_LLM_FIXTURES ?? `${root}.fixtures`);
  modelURL = `${fixtures.url}/llama-tiny-0/gguf/model-Q8_0.gguf`;
});
test.afterAll(() => fixtures?.close());

type Client = {
  plainFetch(): Promise<{ status: number; body: any }>;
  openaiStream(): Promise<{ text: string; finish: string | null }>;
  schemaAnswers(schema: object): Promise<{ status: number; whole: any; streamed: string }>;
};
const plainFetch = (page: Page) => page.evaluate(() => (window as unknown as Client).plainFetch());
const openaiStream = (page: Page) => page.evaluate(() => (window as unknown as Client).openaiStream());

/** Page `a` hosts the engine (host.html's options in `query`); page `b` has none and is controlled by the service worker. */
async function hostAndClient(context: BrowserContext, query = ''): Promise<{ a: Page; b: Page }> {
  const a = await hostPage(context, query);
  return { a, b: await clientPage(context) };
}

/** A page hosting an engine, loaded (host.html's options in `query`: `&kv=DIR`, `&fault=1`). */
async function hostPage(context: BrowserContext, query = ''): Promise<Page> {
  const a = await context.newPage();
  await a.goto(`${PAGES}/host.html?model=${encodeURIComponent(modelURL)}${query}`);
  await hostReady(a);
  return a;
}
const hostReady = (a: Page) => expect(a.locator('#status')).toHaveAttribute('data-state', 'ready', { timeout: 90_000 });

/** Another tab without an engine, controlled by the service worker (registered by the host). */
async function clientPage(context: BrowserContext): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${PAGES}/client.html`);
  await expect(page.locator('#status')).toHaveAttribute('data-state', 'ready');
  expect(await page.evaluate(() => navigator.serviceWorker.controller !== null)).toBe(true);
  return page;
}

type Timed = {
  startTimedStream(request: object): void;
  timedFirstToken(): Promise<void>;
  timedEnd(): Promise<TimedStream>;
};
const startTimedStream = (page: Page, request: object) => page.evaluate((r) => (window as unknown as Timed).startTimedStream(r), request);
const timedFirstToken = (page: Page) => page.evaluate(() => (window as unknown as Timed).timedFirstToken());
const timedEnd = (page: Page) => page.evaluate(() => (window as unknown as Timed).timedEnd());
/** A stream on its own, to compare with the same request beside another one. */
const alone = async (page: Page, request: object) => {
  await startTimedStream(page, request);
  return timedEnd(page);
};

test('a page without an engine gets answers through the service worker, also after it restarts', async ({ context }) => {
  const { a, b } = await hostAndClient(context);

  const plain = await plainFetch(b);
  expect(plain.status).toBe(200);
  expect(plain.body.object).toBe('chat.completion');
  const streamed = await openaiStream(b);
  expect(streamed.text).toBe(plain.body.choices[0].message.content);
  expect(streamed.finish).toBe(plain.body.choices[0].finish_reason);

  // Stop the service worker; the next request starts a fresh one, which must find the host again.
  const cdp = await context.newCDPSession(b);
  const stopped = new Promise<void>((ok) =>
    cdp.on('ServiceWorker.workerVersionUpdated', ({ versions }) => {
      if (versions.some((v: { runningStatus: string }) => v.runningStatus === 'stopped')) ok();
    }),
  );
  await cdp.send('ServiceWorker.enable');
  await cdp.send('ServiceWorker.stopAllWorkers');
  await stopped;
  const again = await plainFetch(b);
  expect(again.status).toBe(200);
  expect(again.body.choices[0].message.content).toBe(plain.body.choices[0].message.content);

  // No page hosts an engine any more: a clear 503.
  await a.evaluate(() => (window as unknown as { stopHosting(): void }).stopHosting());
  const none = await plainFetch(b);
  expect(none.status).toBe(503);
  expect(none.body.error.code).toBe('no_engine_host');
});

test('a json_schema request through the service worker gets JSON valid against it; xgrammar loads in the host, on first use', async ({ context }) => {
  // Every request of the context (pages, their Workers, the service worker) for the xgrammar package.
  const loads: Array<{ url: string; fromServiceWorker: boolean }> = [];
  context.on('request', (r) => {
    if (/web[-_]xgrammar/.test(r.url())) loads.push({ url: r.url(), fromServiceWorker: r.serviceWorker() !== null });
  });
  const { b } = await hostAndClient(context);
  expect((await plainFetch(b)).status).toBe(200);
  expect(loads).toEqual([]);

  const schema = { type: 'object', properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['ok', 'n'], additionalProperties: false };
  const { status, whole, streamed } = await b.evaluate((s) => (window as unknown as Client).schemaAnswers(s), schema);
  expect(status).toBe(200);
  const validate = new Ajv2020({ strict: false }).compile(schema);
  const text = whole.choices[0].message.content;
  expect(validate(JSON.parse(text)), text).toBe(true);
  expect(whole.choices[0].finish_reason).toBe('stop');
  // The relay carries the request body untouched: a random-weight model writes this JSON only
  // under the grammar, and greedy decoding gives the same text streamed.
  expect(streamed).toBe(text);
  expect(loads.length).toBeGreaterThan(0);
  expect(loads.filter((l) => l.fromServiceWorker)).toEqual([]);
});

// Greedy, and past EOS to exactly max_tokens: the long stream lasts 48 steps whatever the random
// weights draw (about 1 s on SwiftShader), and the other joins within a few, so they overlap by
// construction, not by timing luck.
const LONG = { messages: [{ role: 'user', content: 'Tell me a long story' }], max_tokens: 48, temperature: 0, ignore_eos: true };
const withMax = (max_tokens: number) => ({ messages: [{ role: 'user', content: 'Say hi' }], max_tokens, temperature: 0, ignore_eos: true });

/**
 * Streams LONG in page `b` and, once it streams, `other` in page `c` (then `meanwhile`, once both
 * stream, when given). Each must end at its max_tokens with the text it gets alone: a sequence's
 * row of a batched step does not depend on the other rows.
 */
async function besideEachOther(b: Page, c: Page, other: { max_tokens: number }, meanwhile?: () => Promise<void>): Promise<[TimedStream, TimedStream]> {
  const longAlone = await alone(b, LONG);
  const otherAlone = await alone(c, other);
  await startTimedStream(b, LONG);
  await timedFirstToken(b);
  await startTimedStream(c, other);
  if (meanwhile) {
    await timedFirstToken(c);
    await meanwhile();
  }
  const both = await Promise.all([timedEnd(b), timedEnd(c)]);
  for (const [name, got, request, solo] of [['long', both[0], LONG, longAlone], ['other', both[1], other, otherAlone]] as const) {
    expect(got.finish, name).toBe('length');
    expect(got.completionTokens, name).toBe(request.max_tokens);
    expect(got.text, name).toBe(solo.text);
  }
  return both;
}

test('two pages stream through the service worker at once: the second starts while the first streams, both get what they get alone', async ({ context }) => {
  const { b } = await hostAndClient(context);
  const [l, s] = await besideEachOther(b, await clientPage(context), withMax(6));
  // Neither waited for the other: the short stream's first text came while the long one still streamed.
  const since = (t: number) => Math.round(t - l.tokenTimes[0]!);
  expect(since(s.tokenTimes[0]!), "ms from the long stream's first text to the short one's first, and to the long one's last").toBeLessThan(since(l.tokenTimes.at(-1)!));
});

test('both pages keep streaming through the service worker across a lost GPU device, each with the text it gets without the loss', async ({ context }) => {
  // A load, four streams and a recovery (a new device, weights uploaded again: 10-15 s) take 80 s alone on SwiftShader.
  test.setTimeout(240_000);
  const { a, b } = await hostAndClient(context, '&fault=1');
  // 32 tokens: the loss lands while both stream.
  await besideEachOther(b, await clientPage(context), withMax(32), () => a.evaluate(() => (window as unknown as { loseDevice(): Promise<void> }).loseDevice()));
  expect(await a.evaluate(() => (window as unknown as { recoveries(): Promise<number> }).recoveries())).toBe(1);
});

type Completion = { choices: Array<{ text: string }>; usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } } };
const complete = (a: Page, request: object) => a.evaluate((r) => (window as unknown as { complete(r: object): Promise<Completion> }).complete(r), request);

test('KV pages in OPFS outlive a reload of the page: the same prompt and a few tokens more reads them back, with the same greedy text', async ({ context }) => {
  const dir = `e2e-kv-${Date.now()}`;
  const a = await hostPage(context, `&kv=${dir}`);
  const prompt = 'one two three four five six seven eight nine ten '.repeat(5);
  const longer = { prompt: `${prompt}eleven twelve`, max_tokens: 4, temperature: 0 };
  const first = await complete(a, { prompt, max_tokens: 4, temperature: 0 });
  expect(first.usage.prompt_tokens_details?.cached_tokens ?? 0).toBe(0);
  // The longer prompt before the reload (its prefix from GPU memory, as identical as cold: src/engine tests).
  const before = await complete(a, longer);
  const pageSize = await a.evaluate(() => (window as unknown as { pageSize(): Promise<number> }).pageSize());
  const wholePages = Math.floor(first.usage.prompt_tokens / pageSize);
  // Pages are written behind the steps: wait for the files (whole: a file shows its bytes only when closed), then reload.
  const written = (d: string) =>
    a.evaluate(async (name) => {
      const count = async (h: FileSystemDirectoryHandle): Promise<number> => {
        let n = 0;
        for await (const e of (h as unknown as { values(): AsyncIterable<FileSystemHandle> }).values()) {
          if (e.kind === 'directory') n += await count(e as FileSystemDirectoryHandle);
          else if (e.name.endsWith('.kv') && (await (e as FileSystemFileHandle).getFile()).size > 0) n++;
        }
        return n;
      };
      return count(await (await navigator.storage.getDirectory()).getDirectoryHandle(name));
    }, d);
  await expect.poll(() => written(dir), { timeout: 30_000 }).toBeGreaterThanOrEqual(wholePages);
  await a.reload();
  await hostReady(a);
  try {
    const after = await complete(a, longer);
    expect(after.usage.prompt_tokens_details?.cached_tokens ?? 0).toBeGreaterThanOrEqual(wholePages * pageSize);
    expect(after.choices[0]!.text).toBe(before.choices[0]!.text);
  } finally {
    await a.evaluate((name) => navigator.storage.getDirectory().then((r) => r.removeEntry(name, { recursive: true })), dir).catch(() => {});
  }
});
