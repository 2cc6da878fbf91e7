/**
 * `GET /metrics` (issue #32 step 3): the engine's stats in Prometheus' text format, open without
 * the API key as /health is. A stand-in engine gives known stats; the real engine's counters are
 * checked on the GPU in src/engine/speculative.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EngineStats } from '../engine/engine';
import { metricsText } from './metrics';
import { METRICS_PATH, serve, type Server } from './node-server';
import type { EngineHandle } from './types';

const STATS: EngineStats = {
  pageSize: 16,
  pages: { total: 100, used: 7, cached: 3, free: 90 },
  running: 2,
  waiting: 1,
  recovering: false,
  recoveries: 0,
  steps: 345,
  preemptions: 4,
  requests: 12,
  promptTokens: 900,
  cachedPromptTokens: 64,
  generationTokens: 410,
  speculative: { proposed: 120, accepted: 95 },
  draftSteps: 30,
};

function standIn(unloaded = false): EngineHandle {
  return {
    fetch: async () => Response.json({ error: { message: 'not found', type: 'invalid_request_error', param: null, code: 'not_found' } }, { status: 404 }),
    info: { model: 'tiny "q"' } as EngineHandle['info'],
    stats: async () => {
      if (unloaded) throw Object.assign(new Error('the engine was unloaded'), { code: 'engine_unloaded' });
      return STATS;
    },
    loadLora: () => Promise.reject(new Error('unused')),
    unloadLora: () => Promise.reject(new Error('unused')),
    loras: async () => [],
    onError: () => () => {},
    injectFault: () => Promise.reject(new Error('unused')),
    unload: async () => {},
  };
}

/** The samples of a Prometheus text body: `name{labels}` → value. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

let server: Server;
beforeAll(async () => {
  server = await serve({ engine: standIn(), port: 0, apiKey: 'k' });
});
afterAll(() => server?.close());

describe('/metrics', () => {
  it('gives every stat as a Prometheus sample, typed and described, without the API key', async () => {
    const res = await fetch(server.url + METRICS_PATH);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    const m = 'model="tiny \\"q\\""';
    const s = samples(text);
    expect(Object.fromEntries(s)).toEqual({
      [`webgpu_llm_requests_running{${m}}`]: 2,
      [`webgpu_llm_requests_waiting{${m}}`]: 1,
      [`webgpu_llm_requests_total{${m}}`]: 12,
      [`webgpu_llm_prompt_tokens_total{${m}}`]: 900,
      [`webgpu_llm_prompt_tokens_cached_total{${m}}`]: 64,
      [`webgpu_llm_generation_tokens_total{${m}}`]: 410,
      [`webgpu_llm_steps_total{${m}}`]: 345,
      [`webgpu_llm_draft_steps_total{${m}}`]: 30,
      [`webgpu_llm_preemptions_total{${m}}`]: 4,
      [`webgpu_llm_kv_pages{${m},state="used"}`]: 7,
      [`webgpu_llm_kv_pages{${m},state="cached"}`]: 3,
      [`webgpu_llm_kv_pages{${m},state="free"}`]: 90,
      [`webgpu_llm_spec_decode_proposed_tokens_total{${m}}`]: 120,
      [`webgpu_llm_spec_decode_accepted_tokens_total{${m}}`]: 95,
    });
    // Each metric: HELP, then TYPE, then its samples; counters end in _total.
    for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
      expect(text).toContain(`# HELP ${name} `);
      expect(type === 'counter').toBe(name!.endsWith('_total'));
    }
    // The API itself still wants the key.
    expect((await fetch(server.url + '/v1/models')).status).toBe(401);
  });

  it('refuses other methods, and answers 503 once the engine is unloaded', async () => {
    const post = await fetch(server.url + METRICS_PATH, { method: 'POST' });
    expect(post.status).toBe(405);
    expect((await post.json()).error.code).toBe('method_not_allowed');
    const gone = await serve({ engine: standIn(true), port: 0 });
    try {
      const res = await fetch(gone.url + METRICS_PATH);
      expect(res.status).toBe(503);
    } finally {
      await gone.close();
    }
  });

  it('writes one line per sample', () => {
    expect(metricsText(STATS, 'm').split('\n').filter((l) => l && !l.startsWith('#'))).toHaveLength(14);
  });
});
