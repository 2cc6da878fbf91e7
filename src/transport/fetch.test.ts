/**
 * fetch semantics over a handle, without a GPU: aborts before and after the reply, unload, and
 * the in-page shim's routing. A fake handle streams numbered chunks until cancelled.
 */
import { describe, expect, it } from 'vitest';
import { fetchOver } from './fetch';
import { installFetchShim } from './shim';
import type { EngineHandle } from './types';

/** A handle whose SSE-like body yields a chunk every 5 ms until cancelled; records what it saw. */
function slowHandle() {
  const seen = { cancelled: false, aborted: false, requests: [] as Request[] };
  const handle = async (request: Request) => {
    seen.requests.push(request);
    request.signal.addEventListener('abort', () => (seen.aborted = true));
    let n = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        await new Promise((ok) => setTimeout(ok, 5));
        c.enqueue(new TextEncoder().encode(`data: ${n++}\n\n`));
      },
      cancel() {
        seen.cancelled = true;
      },
    });
    return new Response(body, { headers: { 'Content-Type': 'text/event-stream' } });
  };
  return { handle, seen };
}

describe('fetchOver', () => {
  it('passes method, headers and body through, and resolves relative URLs against localhost', async () => {
    const { handle, seen } = slowHandle();
    const f = fetchOver(handle, new AbortController().signal);
    const r = await f('/v1/chat/completions', { method: 'POST', headers: { 'X-Test': '1' }, body: '{"a":1}' });
    expect(r.status).toBe(200);
    await r.body!.cancel();
    const req = seen.requests[0];
    expect(req.url).toBe('http://localhost/v1/chat/completions');
    expect(req.method).toBe('POST');
    expect(req.headers.get('x-test')).toBe('1');
    expect(await req.text()).toBe('{"a":1}');
  });

  it('rejects with AbortError when the signal fired before the call', async () => {
    const { handle, seen } = slowHandle();
    const f = fetchOver(handle, new AbortController().signal);
    const err = await f('http://x/v1/models', { signal: AbortSignal.abort() }).catch((e: unknown) => e);
    expect((err as Error).name).toBe('AbortError');
    expect(seen.requests).toHaveLength(0);
  });

  it('errors the body with AbortError mid-stream and cancels the source, whose request signal fires', async () => {
    const { handle, seen } = slowHandle();
    const controller = new AbortController();
    const r = await fetchOver(handle, new AbortController().signal)('http://x/v1/completions', { method: 'POST', body: '{}', signal: controller.signal });
    const reader = r.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('data: 0\n\n');
    controller.abort();
    const err = await reader.read().catch((e: unknown) => e);
    expect((err as Error).name).toBe('AbortError');
    expect(seen.cancelled).toBe(true);
    expect(seen.aborted).toBe(true);
  });

  it('ends in-flight requests on unload and answers later ones 503 engine_unloaded', async () => {
    const { handle, seen } = slowHandle();
    const closing = new AbortController();
    const f = fetchOver(handle, closing.signal);
    const r = await f('http://x/v1/completions', { method: 'POST', body: '{}' });
    const reader = r.body!.getReader();
    await reader.read();
    closing.abort();
    await expect(reader.read()).rejects.toMatchObject({ name: 'AbortError' });
    expect(seen.cancelled).toBe(true);
    const after = await f('http://x/v1/models');
    expect(after.status).toBe(503);
    expect((await after.json()).error.code).toBe('engine_unloaded');
  });
});

describe('installFetchShim', () => {
  const fakeEngine = (calls: string[]): EngineHandle => ({
    fetch: async (input) => {
      calls.push(String(input instanceof Request ? input.url : input));
      return Response.json({ from: 'engine' });
    },
    info: {} as EngineHandle['info'],
    stats: async () => ({ pageSize: 16, pages: { total: 0, used: 0, cached: 0, free: 0 }, running: 0, waiting: 0, steps: 0, preemptions: 0, requests: 0, promptTokens: 0, cachedPromptTokens: 0, generationTokens: 0, speculative: { proposed: 0, accepted: 0 }, recovering: false, recoveries: 0 }),
    loadLora: () => Promise.reject(new Error('no adapters here')),
    unloadLora: () => Promise.reject(new Error('no adapters here')),
    loras: async () => [],
    onError: () => () => {},
    injectFault: () => Promise.reject(new Error('no faults here')),
    unload: async () => {},
  });

  it('routes only URLs under the base to the engine, passes the rest through, and uninstalls', async () => {
    const original = globalThis.fetch;
    const passed: string[] = [];
    globalThis.fetch = (async (input: RequestInfo | URL) => {
      passed.push(String(input));
      return Response.json({ from: 'network' });
    }) as typeof fetch;
    const underlying = globalThis.fetch;
    try {
      const calls: string[] = [];
      const uninstall = installFetchShim(fakeEngine(calls), { baseURL: 'http://app.test/api/v1' });
      expect(await (await fetch('http://app.test/api/v1/chat/completions', { method: 'POST' })).json()).toEqual({ from: 'engine' });
      expect(await (await fetch(new Request('http://app.test/api/v1'))).json()).toEqual({ from: 'engine' });
      for (const other of ['http://app.test/api/v10/models', 'http://other.test/api/v1/models', 'http://app.test/v1/models'])
        expect(await (await fetch(other)).json()).toEqual({ from: 'network' });
      expect(calls).toHaveLength(2);
      expect(passed).toHaveLength(3);
      uninstall();
      expect(globalThis.fetch).toBe(underlying);
      expect(await (await fetch('http://app.test/api/v1/models')).json()).toEqual({ from: 'network' });
    } finally {
      globalThis.fetch = original;
    }
  });
});
