/**
 * return_routed_experts end to end: `serveCommand` loads the tiny qwen3moe fixture on Dawn and the
 * real OpenAI client asks over HTTP. Each choice's `sglext.routed_experts` (SGLang's shape: base64
 * of int32 [tokens][layers][k]) must name, for every generated token and layer, the experts the
 * CPU reference routed that token's row to; streamed, it rides on the finish chunk.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { argmax, ReferenceModel } from '../reference/forward';
import { ensureFixture } from '../testing/fixtures/shared';
import { serveCommand } from '../cli/serve';
import type { Server } from './node-server';

let server: Server;
let client: OpenAI;
let ref: ReferenceModel;

beforeAll(async () => {
  const paths = await ensureFixture({ arch: 'qwen3moe', preset: 'tiny' }, { hf: [], gguf: ['Q8_0'] });
  server = (await serveCommand(['--model', paths.gguf.Q8_0!, '--port', '0', '--no-cache'], () => {}))!;
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'none', maxRetries: 0, dangerouslyAllowBrowser: true });
  ref = await ReferenceModel.load(await openModel(paths.gguf.Q8_0!));
});

afterAll(() => server?.close());

const decode = (b64: string) => Array.from(new Int32Array(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)).buffer));

/** Greedy on the reference: each generated token and the experts each layer routed its row to. */
function referenceRouting(prompt: number[], steps: number): { ids: number[]; routed: number[] } {
  ref.reset();
  let logits: Float32Array = new Float32Array(0);
  prompt.forEach((id, pos) => (logits = ref.forward(id, pos)));
  const ids: number[] = [];
  const routed: number[] = [];
  for (let s = 0; s < steps; s++) {
    const next = argmax(logits);
    ids.push(next);
    // the row the token was drawn from: the last one fed
    routed.push(...ref.routedExperts.flat());
    logits = ref.forward(next, prompt.length + s);
  }
  return { ids, routed };
}

describe('return_routed_experts over HTTP (tiny qwen3moe, Q8_0)', () => {
  const prompt = [11, 42, 7, 99, 5, 123];
  const STEPS = 5;
  const body = { model: 'default', prompt, max_tokens: STEPS, temperature: 0, ignore_eos: true, return_routed_experts: true, logprobs: 0 };

  it('gives every generated token, layer by layer, the experts the reference routed it to', async () => {
    const { config } = ref;
    const want = referenceRouting(prompt, STEPS);
    const reply = (await client.completions.create(body as never)) as unknown as { choices: Array<{ sglext?: { routed_experts: string } }> };
    const got = decode(reply.choices[0]!.sglext!.routed_experts);
    expect(got).toHaveLength(STEPS * config.numLayers * config.moe!.numExpertsUsed);
    expect(got).toEqual(want.routed);
    // Every id is an expert, and each token's k experts in a layer are distinct.
    const k = config.moe!.numExpertsUsed;
    expect(got.every((e) => e >= 0 && e < config.moe!.numExperts)).toBe(true);
    for (let i = 0; i < got.length; i += k) expect(new Set(got.slice(i, i + k)).size).toBe(k);
  });

  it('streams it on the finish chunk, and a chat completion carries it too', async () => {
    const plain = (await client.completions.create(body as never)) as unknown as { choices: Array<{ sglext?: { routed_experts: string } }> };
    const stream = await client.completions.create({ ...body, stream: true } as never);
    const ends: Array<{ sglext?: { routed_experts: string } }> = [];
    for await (const c of stream as unknown as AsyncIterable<{ choices: Array<{ finish_reason: string | null; sglext?: { routed_experts: string } }> }>)
      for (const ch of c.choices) if (ch.finish_reason) ends.push(ch);
    expect(ends.map((c) => c.sglext)).toEqual([plain.choices[0]!.sglext]);
    const chat = (await client.chat.completions.create({ model: 'default', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3, temperature: 0, return_routed_experts: true } as never)) as unknown as {
      choices: Array<{ sglext?: { routed_experts: string } }>;
      usage: { completion_tokens: number };
    };
    expect(decode(chat.choices[0]!.sglext!.routed_experts)).toHaveLength(chat.usage.completion_tokens * ref.config.numLayers * ref.config.moe!.numExpertsUsed);
    const without = await client.completions.create({ ...body, return_routed_experts: false } as never);
    expect((without as unknown as { choices: object[] }).choices[0]).not.toHaveProperty('sglext');
  });
});
