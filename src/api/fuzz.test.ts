/**
 * The project's own seeded fuzz of the API (issue #19): 520 malformed requests, half over real
 * HTTP (a loopback server) and half through `handle` (the in-page path of the fetch shim and the
 * Worker), each reply classed as a clean 4xx with an OpenAI error object, a 2xx, a 5xx or a hang.
 * Every 50 requests a fixed greedy request and a fixed structured one must still give their
 * first answers. FUZZ_SEED=<n> replays a run; the seed is printed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fuzzCases, type FuzzCase } from '../testing/api-fuzz';
import { listen, type Listener } from '../transport/node-server';
import { createApp, type App } from './app';
import { loadRig, type Rig } from '../testing/api-rig';

const SEED = Number(process.env.FUZZ_SEED ?? 20261124);
const COUNT = 520;
/** A request not answered in this long counts as a hang. */
const HANG_MS = 15_000;

let rig: Rig;
let app: App;
let server: Listener;

beforeAll(async () => {
  rig = await loadRig();
  app = createApp({ backends: [rig.qwen.backend], limits: { maxBodyBytes: 4 * 1024 * 1024 } });
  server = await listen(app.handle, { port: 0 });
});
afterAll(async () => {
  await server?.close();
  await rig?.close();
});

type Outcome = { status: number; body: string } | 'hang';

async function send(c: FuzzCase, viaHttp: boolean): Promise<Outcome> {
  const init: RequestInit = { method: c.method, headers: c.headers, body: c.body as BodyInit | null };
  const timeout = new Promise<'hang'>((ok) => setTimeout(() => ok('hang'), HANG_MS));
  const reply = (async () => {
    const r = viaHttp ? await fetch(server.url + c.path, init) : await app.handle(new Request('http://localhost' + c.path, init));
    return { status: r.status, body: await r.text() };
  })();
  return Promise.race([reply, timeout]);
}

const greedy = { model: 'qwen3-tiny', messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 6, temperature: 0 };
const structured = {
  model: 'qwen3-tiny',
  messages: [{ role: 'user', content: 'A number' }],
  max_tokens: 8,
  temperature: 0,
  response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] } } },
};
const canary = async (body: object) => {
  const r = await app.handle(new Request('http://localhost/v1/chat/completions', { method: 'POST', body: JSON.stringify(body) }));
  expect(r.status).toBe(200);
  return (await r.json()).choices[0].message.content as string;
};

describe(`the API under ${COUNT} malformed requests (FUZZ_SEED=${SEED})`, () => {
  it('answers every one with a clean 4xx or a 2xx, never a 5xx or a hang, and the canaries never change', async () => {
    console.log(`[fuzz] seed ${SEED} (set FUZZ_SEED to replay)`);
    const greedyFirst = await canary(greedy);
    const structuredFirst = await canary(structured);
    const counts = { '2xx': 0, '4xx': 0 };
    const failures: string[] = [];
    const cases = fuzzCases(SEED, COUNT);
    for (const [i, c] of cases.entries()) {
      const viaHttp = i % 2 === 0;
      const out = await send(c, viaHttp);
      const where = `#${i} ${viaHttp ? 'HTTP' : 'handle'} ${c.method} ${c.path.slice(0, 40)} (${c.what})`;
      if (out === 'hang') failures.push(`${where}: no answer in ${HANG_MS} ms`);
      else if (out.status >= 500) failures.push(`${where}: ${out.status} ${out.body.slice(0, 200)}`);
      else if (out.status >= 400) {
        counts['4xx']++;
        if (c.method === 'HEAD') continue;
        let error: { message?: unknown; type?: unknown } | undefined;
        try {
          error = JSON.parse(out.body).error;
        } catch {
          // judged below
        }
        if (typeof error?.message !== 'string' || typeof error.type !== 'string') failures.push(`${where}: ${out.status} without an OpenAI error object: ${out.body.slice(0, 120)}`);
      } else counts['2xx']++;
      if (i % 50 === 49) {
        expect(await canary(greedy), `greedy canary after #${i}`).toBe(greedyFirst);
        expect(await canary(structured), `structured canary after #${i}`).toBe(structuredFirst);
      }
    }
    console.log(`[fuzz] ${counts['4xx']} clean 4xx, ${counts['2xx']} 2xx, ${failures.length} failures`);
    expect(failures).toEqual([]);
    expect(counts['4xx']).toBeGreaterThan(COUNT / 2);
  }, 300_000);
});
