/**
 * serve()'s fault switch (issue #33): `POST /debug/fault` reaches the engine's `injectFault` only
 * when the server enables it, only from loopback, only with the API key when one is set, and
 * answers each refusal as an OpenAI error object. A stand-in engine: no GPU needed here (the
 * recovery tests lose a real device).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { faultError } from './errors';
import { FAULT_PATH, serve, type Server } from './node-server';
import type { EngineHandle, FaultSpec } from './types';

const KEY = 'fault-key';
const injected: FaultSpec[] = [];

function standIn(faultInjection: boolean): EngineHandle {
  return {
    fetch: async () => Response.json({ error: { message: 'not found', type: 'invalid_request_error', param: null, code: 'not_found' } }, { status: 404 }),
    info: {} as EngineHandle['info'],
    stats: () => Promise.reject(new Error('unused')),
    loadLora: () => Promise.reject(new Error('unused')),
    unloadLora: () => Promise.reject(new Error('unused')),
    loras: async () => [],
    onError: () => () => {},
    async injectFault(fault) {
      const refused = faultError(fault, faultInjection);
      if (refused) throw refused;
      injected.push(fault);
    },
    unload: async () => {},
  };
}

let on: Server;
let off: Server;
let engineOff: Server;
beforeAll(async () => {
  on = await serve({ engine: standIn(true), port: 0, apiKey: KEY, faultInjection: true });
  off = await serve({ engine: standIn(true), port: 0 });
  engineOff = await serve({ engine: standIn(false), port: 0, faultInjection: true });
});
afterAll(async () => {
  await Promise.all([on, off, engineOff].map((s) => s?.close()));
});

const post = (server: Server, body: unknown, key: string | null = KEY) =>
  fetch(server.url + FAULT_PATH, { method: 'POST', headers: key ? { authorization: `Bearer ${key}` } : {}, body: typeof body === 'string' ? body : JSON.stringify(body) });

describe('POST /debug/fault', () => {
  it('injects a device loss when enabled, behind the API key', async () => {
    const anon = await post(on, { kind: 'device_lost' }, null);
    expect(anon.status).toBe(401);
    expect((await anon.json()).error.code).toBe('invalid_api_key');
    expect(injected).toEqual([]);
    const ok = await post(on, { kind: 'device_lost' });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ injected: 'device_lost' });
    expect(injected).toEqual([{ kind: 'device_lost' }]);
  });

  it('refuses unknown kinds, bad JSON and other methods as OpenAI error objects', async () => {
    const unknown = await post(on, { kind: 'oom' });
    expect(unknown.status).toBe(400);
    expect((await unknown.json()).error).toMatchObject({ type: 'invalid_request_error', code: 'unknown_fault' });
    const bad = await post(on, '{');
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.code).toBe('invalid_json');
    const get = await fetch(on.url + FAULT_PATH, { headers: { authorization: `Bearer ${KEY}` } });
    expect(get.status).toBe(405);
    expect(injected).toHaveLength(1);
  });

  it('is not there unless the server enables it, and says so when the engine has it off', async () => {
    expect((await post(off, { kind: 'device_lost' })).status).toBe(404);
    const refused = await post(engineOff, { kind: 'device_lost' });
    expect(refused.status).toBe(400);
    expect((await refused.json()).error.code).toBe('fault_injection_disabled');
    expect(injected).toHaveLength(1);
  });

  it('answers only loopback clients', async () => {
    const lan = await serve({ engine: standIn(true), port: 0, host: '0.0.0.0', faultInjection: true });
    try {
      const { networkInterfaces } = await import('node:os');
      const address = Object.values(networkInterfaces())
        .flat()
        .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;
      if (!address) return; // no other interface on this machine: loopback is all there is
      const r = await fetch(`http://${address}:${new URL(lan.url).port}${FAULT_PATH}`, { method: 'POST', body: '{"kind":"device_lost"}' });
      expect(r.status).toBe(403);
      expect((await r.json()).error.code).toBe('forbidden');
      expect(injected).toHaveLength(1);
    } finally {
      await lan.close();
    }
  });
});
