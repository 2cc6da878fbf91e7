/**
 * The HTTP server on each family with recurrent layers (issue #29), on the CPU reference backend:
 * `serve` around the API app over a ReferenceBackend of the tiny fixture's HF folder or Q8_0 GGUF, and the real OpenAI
 * client asks it for greedy completions of token ids; the text is the reference's greedy tokens
 * decoded, and a repeated request (its recurrent state recomputed, not rewound) gives it again.
 * The GPU engine equals the reference on these fixtures in the engine grid; the CLI runs them on
 * the GPU (src/cli/cli.test.ts).
 */
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { createApp } from '../api/app';
import { openModel } from '../model/open';
import { ReferenceBackend } from '../reference/backend';
import { ReferenceModel } from '../reference/forward';
import { ensureFixture, HYBRID_FIXTURES } from '../testing/fixtures/shared';
import { stableGreedy } from '../testing/stable-greedy';
import { loadTextModel } from '../text/from-model';
import { serve } from './node-server';
import type { EngineHandle } from './types';

const PROMPT = [1, 17, 42, 99, 7, 250, 3, 64];
const STEPS = 8;

describe.each(HYBRID_FIXTURES)('the HTTP server on the hybrid %s (CPU reference backend)', (name, options) => {
  it.each(['hf-F32', 'Q8_0'])('%s: answers greedy completions with the reference greedy tokens, twice', async (format) => {
    const { hf, gguf } = await ensureFixture(options, { hf: ['F32'], gguf: ['Q8_0'] });
    const opened = await openModel(format === 'Q8_0' ? gguf.Q8_0! : hf.F32!);
    const want = stableGreedy(await ReferenceModel.load(opened), PROMPT, STEPS);
    expect(want.length).toBeGreaterThan(0);
    const app = createApp({ backends: [await ReferenceBackend.create(opened, { id: name })] });
    const engine = { fetch: (input: RequestInfo | URL, init?: RequestInit) => app.handle(new Request(input, init)), info: { model: name } } as EngineHandle;
    const server = await serve({ engine, port: 0 });
    try {
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'none', maxRetries: 0 });
      const request = { model: name, prompt: PROMPT, max_tokens: want.length, temperature: 0, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming;
      // The API leaves special tokens out of the text.
      const text = loadTextModel(opened).tokenizer.decode(want, { skipSpecialTokens: true });
      for (let i = 0; i < 2; i++) {
        const reply = await client.completions.create(request);
        expect(reply.usage).toMatchObject({ prompt_tokens: PROMPT.length, completion_tokens: want.length });
        expect(reply.choices[0]!.text, `request ${i}`).toBe(text);
      }
    } finally {
      await server.close();
    }
  });
});
