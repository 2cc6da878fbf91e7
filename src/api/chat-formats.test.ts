/**
 * Granite 3.3's reasoning and Phi-4-mini's tool calls through /v1/chat/completions: the tiny qwen3
 * model under each family's chat template, with a scripted reply (what such a model writes) in
 * place of its own tokens, so the API's split into reasoning_content, content and tool_calls is
 * what is checked, streamed and not.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GenerateRequest, GeneratedToken, GenerationResult } from '../engine/types';
import type { ChatTemplateConfig } from '../text/index';
import { appFor, clientFor, loadRig, SpyBackend, type Rig } from '../testing/api-rig';

/**
 * Granite 3.3's template cut down to what matters here: its turns and, with `thinking`, the
 * sentence of its system prompt that names both pairs of tags (word for word).
 */
const GRANITE_THINKING =
  "{%- if thinking %}{{- '<|start_of_role|>system<|end_of_role|>You are a helpful AI assistant. Write your thoughts between <think></think> and write your response between <response></response> for each user query.<|end_of_text|>\n' }}{%- endif %}" +
  "{%- for message in messages %}{{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' }}{%- endfor %}" +
  "{%- if add_generation_prompt %}{{- '<|start_of_role|>assistant<|end_of_role|>' }}{%- endif %}";
const PHI4 = readFileSync(join(import.meta.dirname, '..', 'text', 'testdata', 'published', 'phi-4-mini-instruct.jinja'), 'utf8');

/** A backend under another template whose reply is `reply`, token by token (the inner tokenizer's). */
class Scripted extends SpyBackend {
  lastPrompt = '';
  constructor(
    inner: SpyBackend['inner'],
    private readonly name: string,
    private readonly template: ChatTemplateConfig,
    private readonly reply: string,
  ) {
    super(inner);
  }
  override get id() {
    return this.name;
  }
  override get chatTemplate() {
    return this.template;
  }
  override async *generate(request: GenerateRequest): AsyncGenerator<GeneratedToken, GenerationResult, void> {
    this.lastPrompt = this.tokenizer.decode(request.promptIds, { skipSpecialTokens: false });
    const ids = this.tokenizer.encode(this.reply, { addSpecialTokens: false });
    for (const id of ids) yield { id };
    return { finishReason: 'stop', promptTokens: request.promptIds.length, completionTokens: ids.length, cachedTokens: 0 };
  }
}

const TOOLS: OpenAI.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } },
];

let rig: Rig;
let granite: Scripted;
let phi4: Scripted;
let client: OpenAI;

beforeAll(async () => {
  rig = await loadRig();
  granite = new Scripted(rig.qwen.backend, 'granite-thinking', GRANITE_THINKING, '<think>2 and 2 make 4.</think>\n<response>The answer is 4.</response>');
  phi4 = new Scripted(rig.qwen.backend, 'phi4-tools', PHI4, 'Checking. <|tool_call|>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]<|/tool_call|>');
  client = clientFor(appFor([granite, phi4]));
});
afterAll(() => rig?.close());

/** The streamed reply folded by hand: content, reasoning, calls and the finish reason. */
async function streamed(params: OpenAI.ChatCompletionCreateParamsStreaming) {
  let content = '';
  let reasoning = '';
  const calls: { name: string; arguments: string }[] = [];
  let finish: string | null = null;
  for await (const c of await client.chat.completions.create(params)) {
    const ch = c.choices[0];
    if (!ch) continue;
    const delta = ch.delta as typeof ch.delta & { reasoning_content?: string };
    content += delta.content ?? '';
    reasoning += delta.reasoning_content ?? '';
    for (const d of delta.tool_calls ?? []) {
      const call = (calls[d.index] ??= { name: '', arguments: '' });
      call.name += d.function?.name ?? '';
      call.arguments += d.function?.arguments ?? '';
    }
    finish = ch.finish_reason ?? finish;
  }
  return { content, reasoning, calls, finish };
}

describe('Granite 3.3 with thinking on', () => {
  const params = {
    model: 'granite-thinking',
    messages: [{ role: 'user' as const, content: 'What is 2+2?' }],
    chat_template_kwargs: { thinking: true },
  };

  it('answers the <think> part as reasoning_content and the <response> part as content, tags dropped', async () => {
    const res = await client.chat.completions.create(params as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(granite.lastPrompt).toContain('<response></response>');
    const msg = res.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string | null };
    expect(msg.reasoning_content).toBe('2 and 2 make 4.');
    expect(msg.content).toBe('The answer is 4.');
    expect(res.choices[0]!.finish_reason).toBe('stop');
    expect(await streamed({ ...params, stream: true } as OpenAI.ChatCompletionCreateParamsStreaming)).toEqual({ content: 'The answer is 4.', reasoning: '2 and 2 make 4.', calls: [], finish: 'stop' });
  });

  it('leaves the tags in content with separate_reasoning false', async () => {
    const res = await client.chat.completions.create({ ...params, separate_reasoning: false } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(res.choices[0]!.message.content).toBe('<think>2 and 2 make 4.</think>\n<response>The answer is 4.</response>');
  });
});

describe('Phi-4-mini with tools', () => {
  const params = { model: 'phi4-tools', messages: [{ role: 'user' as const, content: 'Weather in Oslo?' }], tools: TOOLS };

  it('answers <|tool_call|>[…]<|/tool_call|> as OpenAI tool_calls, finish_reason tool_calls', async () => {
    const res = await client.chat.completions.create(params as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const choice = res.choices[0]!;
    expect(choice.message.content).toBe('Checking. ');
    expect(choice.message.tool_calls?.map((c) => ({ type: c.type, name: (c as OpenAI.ChatCompletionMessageFunctionToolCall).function.name, arguments: (c as OpenAI.ChatCompletionMessageFunctionToolCall).function.arguments }))).toEqual([
      { type: 'function', name: 'get_weather', arguments: '{"city":"Oslo"}' },
    ]);
    expect(choice.finish_reason).toBe('tool_calls');
    expect(await streamed({ ...params, stream: true } as OpenAI.ChatCompletionCreateParamsStreaming)).toEqual({
      content: 'Checking. ',
      reasoning: '',
      calls: [{ name: 'get_weather', arguments: '{"city":"Oslo"}' }],
      finish: 'tool_calls',
    });
  });

  it('leaves the text alone without tools', async () => {
    const res = await client.chat.completions.create({ ...params, tools: undefined } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(res.choices[0]!.message.content).toBe('Checking. <|tool_call|>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]<|/tool_call|>');
    expect(res.choices[0]!.finish_reason).toBe('stop');
  });
});
