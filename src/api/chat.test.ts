/**
 * /v1/chat/completions through the real `openai` client: the prompt is the model's template
 * tokenized with user-typed control tokens kept as text, greedy output matches the reference,
 * streaming folds to the reply, logprobs have OpenAI's chat shape, and reasoning is split out.
 */
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { greedy } from '../reference/forward';
import { chatPromptIds, renderChat } from './template';
import { appFor, clientFor, loadRig, type Rig } from '../testing/api-rig';

let rig: Rig;
let client: OpenAI;
const MESSAGES = [
  { role: 'system' as const, content: 'You are terse.' },
  { role: 'user' as const, content: 'Say <|im_end|> hello' },
];

beforeAll(async () => {
  rig = await loadRig();
  client = clientFor(appFor([rig.qwen.backend, rig.llama.backend]));
});
afterAll(() => rig?.close());

const req = (model: string, extra: object = {}) =>
  ({ model, messages: MESSAGES, max_tokens: 10, temperature: 0, ignore_eos: true, ...extra }) as OpenAI.ChatCompletionCreateParamsNonStreaming;

describe('chat completions', () => {
  for (const which of ['qwen', 'llama'] as const) {
    it(`greedy reply of ${which} equals greedy() on the template-rendered prompt`, async () => {
      const { backend, oracle } = rig[which];
      const { prompt, literalRanges } = renderChat(backend, { messages: MESSAGES, chat_template_kwargs: { enable_thinking: false } });
      const ids = await chatPromptIds(backend, prompt, literalRanges);
      // The user's typed <|im_end|> stays text: the control token appears only where the template put it.
      const imEnd = backend.tokenizer.tokenToId('<|im_end|>');
      if (imEnd !== undefined) expect(ids.filter((x) => x === imEnd).length).toBe(prompt.split('<|im_end|>').length - 2);
      const want = greedy(await oracle(), ids, 10);
      const res = await client.chat.completions.create(req(backend.id, { chat_template_kwargs: { enable_thinking: false } }));
      const text = backend.tokenizer.decode(want, { skipSpecialTokens: true });
      const msg = res.choices[0].message as OpenAI.ChatCompletionMessage & { reasoning_content?: string | null };
      expect(msg.reasoning_content ?? null).toBeNull();
      expect(msg.content).toBe(text);
      expect(res.object).toBe('chat.completion');
      expect(res.id).toMatch(/^chatcmpl-/);
      expect(res.usage?.prompt_tokens).toBe(ids.length);
      expect(res.choices[0].finish_reason).toBe('length');
    });
  }

  it('streams deltas that fold to the unstreamed reply, role first, usage last', async () => {
    const full = await client.chat.completions.create(req('llama-tiny'));
    const stream = await client.chat.completions.create({ ...req('llama-tiny'), stream: true, stream_options: { include_usage: true } });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks[0].choices[0].delta.role).toBe('assistant');
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(full.choices[0].message.content);
    expect(chunks[chunks.length - 1].usage?.completion_tokens).toBe(10);
    expect(chunks[chunks.length - 2].choices[0].finish_reason).toBe('length');
    for (const c of chunks) expect(c.object).toBe('chat.completion.chunk');
  });

  it('returns logprobs in OpenAI chat shape with bytes and top alternatives', async () => {
    const res = await client.chat.completions.create(req('llama-tiny', { max_tokens: 4, logprobs: true, top_logprobs: 2 }));
    const content = res.choices[0].logprobs!.content!;
    expect(content).toHaveLength(4);
    for (const t of content) {
      expect(t.logprob).toBeLessThanOrEqual(0);
      expect(Array.isArray(t.bytes)).toBe(true);
      expect(t.top_logprobs).toHaveLength(2);
      expect(t.top_logprobs[0].logprob).toBeCloseTo(t.logprob, 5); // greedy
    }
    const bytes = content.flatMap((t) => t.bytes!);
    expect(new TextDecoder().decode(new Uint8Array(bytes))).toBe(res.choices[0].message.content);
  });

  it('n > 1 gives distinct indexed choices; max_completion_tokens wins over max_tokens', async () => {
    const res = await client.chat.completions.create(req('qwen3-tiny', { n: 2, temperature: 1, seed: 4, max_tokens: 50, max_completion_tokens: 3 }));
    expect(res.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(res.usage?.completion_tokens).toBe(6);
  });

  it('puts the continuation of an open <think> block in reasoning_content', async () => {
    const messages = [...MESSAGES, { role: 'assistant' as const, content: '<think>\nLet me see' }];
    const res = await client.chat.completions.create({ ...req('qwen3-tiny'), messages, continue_final_message: true, add_generation_prompt: false } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const msg = res.choices[0].message as OpenAI.ChatCompletionMessage & { reasoning_content?: string | null };
    expect(msg.reasoning_content ?? '').not.toBe('');
    const together = await client.chat.completions.create({ ...req('qwen3-tiny'), messages, continue_final_message: true, add_generation_prompt: false, separate_reasoning: false } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect((together.choices[0].message as { reasoning_content?: string | null }).reasoning_content ?? null).toBeNull();
  });

  it('ends on a stop token id with matched_stop set to it', async () => {
    const { backend, oracle } = rig.llama;
    const { prompt, literalRanges } = renderChat(backend, { messages: MESSAGES });
    const out = greedy(await oracle(), await chatPromptIds(backend, prompt, literalRanges), 3);
    expect(out.slice(0, 2)).not.toContain(out[2]);
    const third = [out[2]];
    const res = await client.chat.completions.create(req('llama-tiny', { max_tokens: 8, stop_token_ids: third } as object));
    const choice = res.choices[0] as OpenAI.ChatCompletion.Choice & { matched_stop?: unknown };
    expect(choice.finish_reason).toBe('stop');
    expect(choice.matched_stop).toBe(third[0]);
    expect(res.usage?.completion_tokens).toBe(3);
  });

  it('return_hidden_states: the choice and the stream\'s finish chunk carry the last token\'s final hidden state', async () => {
    const { backend } = rig.qwen;
    const params = { ...req(backend.id, { max_tokens: 4 }), return_hidden_states: true } as never;
    const whole = (await client.chat.completions.create(params)) as OpenAI.ChatCompletion & { choices: Array<{ hidden_states?: number[] }> };
    const hidden = whole.choices[0]!.hidden_states!;
    expect(hidden).toHaveLength(backend.config.hiddenSize);
    expect(hidden.every(Number.isFinite)).toBe(true);
    const stream = await client.chat.completions.create({ ...(params as object), stream: true } as OpenAI.ChatCompletionCreateParamsStreaming);
    let last: unknown = null;
    for await (const c of stream) for (const ch of c.choices) if (ch.finish_reason) last = (ch.delta as { hidden_states?: number[] }).hidden_states;
    expect(last).toEqual(hidden);
  });
});
