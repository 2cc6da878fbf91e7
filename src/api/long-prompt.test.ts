/**
 * A long prompt through the app (issue #19, point 4): with a realistic context (32k tokens) the
 * cheap bound lets megabytes through to the tokenizer; they are tokenized off the event loop, so
 * `/health` keeps answering until the prompt's 400 (context length) comes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appFor, loadRig, type Rig } from '../testing/api-rig';
import { slowestHealth } from '../testing/event-loop';
import corpus from '../testing/fixtures/corpus.txt?raw';
import type { Backend } from '../engine/types';
import type { App } from './app';

let rig: Rig;
let app: App;
let backend: Backend;
const CONTEXT = 32 * 1024;

beforeAll(async () => {
  rig = await loadRig();
  // The tiny model with a 32k context: its bound (context × longest token × 4) passes 2 MB: megabytes reach the tokenizer.
  backend = Object.create(rig.qwen.backend, { contextLength: { value: CONTEXT } }) as Backend;
  app = appFor([backend]);
});
afterAll(() => rig?.close());


describe('a long prompt', () => {
  it('is tokenized while /health keeps answering, then refused for the context', async () => {
    // A prompt that holds the loop at least 300 ms when tokenized in place, however fast this
    // machine is (800k characters: most of a second on the 2-core CI host), within the bound.
    const promptOf = (chars: number) => corpus.repeat(Math.ceil(chars / corpus.length)).slice(0, chars);
    let prompt = promptOf(800_000);
    backend.tokenizer.encode(prompt); // warm
    let inPlaceMs: number;
    for (;;) {
      const t = performance.now();
      backend.tokenizer.encode(prompt);
      inPlaceMs = performance.now() - t;
      if (inPlaceMs >= 300 || prompt.length >= 1_600_000) break;
      prompt = promptOf(prompt.length * 2);
    }
    const send = () =>
      app.handle(new Request('http://localhost/v1/completions', { method: 'POST', body: JSON.stringify({ model: 'qwen3-tiny', prompt, max_tokens: 1 }) }));
    await send(); // the tokenizer's worker starts on the first long prompt: not what is timed

    const reply = send();
    const slowestMs = await slowestHealth(app.handle, reply);
    const r = await reply;
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe('context_length_exceeded');
    // What is left on this thread is reading and parsing the body.
    expect(inPlaceMs).toBeGreaterThanOrEqual(300);
    expect(slowestMs).toBeLessThan(inPlaceMs / 3);
  }, 120_000);
});
