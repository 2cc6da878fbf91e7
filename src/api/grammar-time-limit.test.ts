/**
 * The grammar time limit through the app (issue #19, point 2): a structured-output request whose
 * grammar compiles longer than `limits.grammarCompileMs` gets a 400 naming the limit and the
 * field, `/health` keeps answering while it compiles, and the next structured request is served.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appFor, loadRig, type Rig } from '../testing/api-rig';
import { slowestHealth } from '../testing/event-loop';
import type { App } from './app';

let rig: Rig;
let app: App;

beforeAll(async () => {
  rig = await loadRig();
  app = appFor([rig.qwen.backend], { limits: { grammarCompileMs: 300 } });
});
afterAll(() => rig?.close());

const post = (body: object) =>
  app.handle(new Request('http://localhost/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) }));
const chat = (extra: object) =>
  post({ model: 'qwen3-tiny', messages: [{ role: 'user', content: 'Answer.' }], max_tokens: 40, temperature: 0, chat_template_kwargs: { enable_thinking: false }, ...extra });


describe('the grammar time limit', () => {
  it('answers 400 naming the limit while /health keeps answering, then serves a structured request', async () => {
    // Warm the grammar engine (both threads) so that only the slow grammar is timed below.
    expect((await chat({ regex: '[0-9]{1,3}' })).status).toBe(200);

    // Within every size and nesting limit, yet seconds of compiling.
    const slow = chat({ regex: '(.{0,500}x){0,500}' });
    const slowestMs = await slowestHealth(app.handle, slow);
    const r = await slow;
    expect(r.status).toBe(400);
    const body = (await r.json()) as { error: { message: string; param: string; code: string } };
    expect(body.error).toMatchObject({ param: 'regex', code: 'invalid_structured_output' });
    expect(body.error.message).toMatch(/time limit of 300 ms/);
    expect(slowestMs).toBeLessThan(1000);

    const schema = { type: 'object', properties: { n: { type: 'boolean' } }, required: ['n'], additionalProperties: false };
    const ok = await chat({ response_format: { type: 'json_schema', json_schema: { name: 'n', schema } } });
    expect(ok.status).toBe(200);
    const content = ((await ok.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content;
    expect(JSON.parse(content)).toEqual({ n: expect.any(Boolean) });
  }, 60_000);
});
