import { describe, expect, it } from 'vitest';
import { ChatOutputParser, foldEvents, type ChatOutputParserOptions, type FoldedOutput } from './chat-output';
import type { OutputEvent } from './stream-text';
import { detectToolCallFormat } from './tool-calls';
import { detectReasoningFormat, promptOpensReasoning, REASONING_FORMATS } from './reasoning';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

function deterministicIds() {
  let n = 0;
  return () => `call_${String(n++).padStart(4, '0')}`;
}

function run(opts: ChatOutputParserOptions, chunks: string[]): OutputEvent[] {
  const p = new ChatOutputParser({ ...opts, newToolCallId: deterministicIds() });
  const events = chunks.flatMap((c) => p.push(c));
  return [...events, ...p.finish()];
}

/** Every split into two pieces, every split into three around a tag, and char by char. */
function splits(text: string): string[][] {
  const out: string[][] = [[text], Array.from(text)];
  for (let i = 0; i <= text.length; i++) out.push([text.slice(0, i), text.slice(i)]);
  for (let i = 0; i < text.length; i += 3) for (let j = i + 1; j < text.length; j += 5) out.push([text.slice(0, i), text.slice(i, j), text.slice(j)]);
  return out;
}

const TAG_PIECES = /<|>|\[TOOL|CALLS\]|python_tag|think|tool_call|response>/;

const GRANITE_REASONING = REASONING_FORMATS.find((f) => f.name === 'granite')!.options;

interface Case {
  name: string;
  opts: ChatOutputParserOptions;
  output: string;
  want: FoldedOutput;
}

const weather = { id: 'call_0000', type: 'function' as const, function: { name: 'get_weather', arguments: '{"city":"Zürich","days":2}' } };
const search = { id: 'call_0001', type: 'function' as const, function: { name: 'search', arguments: '{"query":"a \\"quoted\\" {brace}"}' } };

const CASES: Case[] = [
  {
    name: 'Qwen3 reasoning then an answer',
    opts: { reasoning: {} },
    output: '<think>\nLet me think: 2+2 is 4.\n</think>\n\nThe answer is 4.',
    want: { reasoning_content: 'Let me think: 2+2 is 4.', content: 'The answer is 4.', tool_calls: [] },
  },
  {
    name: 'DeepSeek-R1 generation that starts inside reasoning',
    opts: { reasoning: { startsInReasoning: true } },
    output: 'Hmm, 3*7 = 21.\n</think>\n\n21',
    want: { reasoning_content: 'Hmm, 3*7 = 21.', content: '21', tool_calls: [] },
  },
  {
    name: 'reasoning never closed',
    opts: { reasoning: {} },
    output: '<think>\nstill thinking about it',
    want: { reasoning_content: 'still thinking about it', content: '', tool_calls: [] },
  },
  {
    name: 'no reasoning block at all',
    opts: { reasoning: {} },
    output: 'Plain answer, a think of it. 1 < 2',
    want: { reasoning_content: '', content: 'Plain answer, a think of it. 1 < 2', tool_calls: [] },
  },
  {
    name: 'reasoning held until it ends when not streamed',
    opts: { reasoning: { streamReasoning: false } },
    output: '<think>a b c</think>done',
    want: { reasoning_content: 'a b c', content: 'done', tool_calls: [] },
  },
  {
    name: 'reasoning left in content when not separated',
    opts: { reasoning: { separateReasoning: false } },
    output: '<think>x</think>y',
    want: { reasoning_content: '', content: '<think>x</think>y', tool_calls: [] },
  },
  {
    name: 'Hermes/Qwen tool calls after reasoning',
    opts: { reasoning: {}, toolCallFormat: 'hermes' },
    output:
      '<think>I should call tools.</think>\n\nLet me check. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}\n</tool_call><tool_call>\n{"name": "search", "arguments": {"query": "a \\"quoted\\" {brace}"}}\n</tool_call>',
    want: { reasoning_content: 'I should call tools.', content: 'Let me check. ', tool_calls: [weather, search] },
  },
  {
    name: 'Llama 3 JSON tool call after python_tag',
    opts: { toolCallFormat: 'llama3' },
    output: '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Zürich", "days": 2}}',
    want: { reasoning_content: '', content: '', tool_calls: [weather] },
  },
  {
    name: 'Llama 3 plain JSON tool calls separated by ;',
    opts: { toolCallFormat: 'llama3' },
    output: '{"name": "get_weather", "parameters": {"city": "Zürich", "days": 2}}; {"name": "search", "parameters": {"query": "a \\"quoted\\" {brace}"}}',
    want: { reasoning_content: '', content: '', tool_calls: [weather, search] },
  },
  {
    name: 'Llama 3 plain text reply',
    opts: { toolCallFormat: 'llama3' },
    output: 'It is sunny today.',
    want: { reasoning_content: '', content: 'It is sunny today.', tool_calls: [] },
  },
  {
    name: 'Mistral tool calls',
    opts: { toolCallFormat: 'mistral' },
    output: 'Sure. [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}, {"name": "search", "arguments": {"query": "a \\"quoted\\" {brace}"}}]',
    want: { reasoning_content: '', content: 'Sure. ', tool_calls: [weather, search] },
  },
  {
    name: 'Granite tool calls',
    opts: { toolCallFormat: 'granite' },
    output: 'Sure. <|tool_call|>[{"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}, {"name": "search", "arguments": {"query": "a \\"quoted\\" {brace}"}}]',
    want: { reasoning_content: '', content: 'Sure. ', tool_calls: [weather, search] },
  },
  {
    name: 'Granite 3.3 thinking: <think> then <response>, both tags dropped',
    opts: { reasoning: GRANITE_REASONING },
    output: '<think>The user asks for 2+2.\nThat is 4.</think>\n<response>\n2+2 is 4.\n</response>',
    want: { reasoning_content: 'The user asks for 2+2.\nThat is 4.', content: '2+2 is 4.', tool_calls: [] },
  },
  {
    name: 'Granite 3.3 response tags without a think block',
    opts: { reasoning: GRANITE_REASONING },
    output: '<response>Just 4.</response>',
    want: { reasoning_content: '', content: 'Just 4.', tool_calls: [] },
  },
  {
    name: 'Granite 3.3 plain answer (thinking off): nothing dropped',
    opts: { reasoning: GRANITE_REASONING },
    output: 'It is 4, a response of sorts.',
    want: { reasoning_content: '', content: 'It is 4, a response of sorts.', tool_calls: [] },
  },
  {
    name: 'Granite 3.3 response never closed',
    opts: { reasoning: GRANITE_REASONING },
    output: '<think>hm</think><response>cut off mid',
    want: { reasoning_content: 'hm', content: 'cut off mid', tool_calls: [] },
  },
  {
    name: 'Phi-4-mini tool calls: the list between <|tool_call|> and <|/tool_call|>',
    opts: { toolCallFormat: 'phi4' },
    output: 'Sure. <|tool_call|>[{"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}, {"name": "search", "arguments": {"query": "a \\"quoted\\" {brace}"}}]<|/tool_call|>',
    want: { reasoning_content: '', content: 'Sure. ', tool_calls: [weather, search] },
  },
  {
    name: 'Phi-4-mini: one call per tag pair, twice, text after',
    opts: { toolCallFormat: 'phi4' },
    output: '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}]<|/tool_call|><|tool_call|>{"name": "search", "arguments": {"query": "a \\"quoted\\" {brace}"}}<|/tool_call|>Done.',
    want: { reasoning_content: '', content: 'Done.', tool_calls: [weather, search] },
  },
];

describe.each(CASES)('$name', ({ opts, output, want }) => {
  it('folds to the same result at every split, with no tag in any content delta', () => {
    for (const chunks of splits(output)) {
      const events = run(opts, chunks);
      expect(foldEvents(events), JSON.stringify(chunks)).toEqual(want);
      if (!TAG_PIECES.test(want.content))
        for (const e of events) if (e.type === 'content') expect(e.text, JSON.stringify(chunks)).not.toMatch(TAG_PIECES);
    }
  });

  it('streams tool calls in OpenAI shape: header delta first, then arguments', () => {
    const events = run(opts, Array.from(output)).filter((e) => e.type === 'tool_call');
    want.tool_calls.forEach((call, i) => {
      const deltas = events.map((e) => (e as Extract<OutputEvent, { type: 'tool_call' }>).delta).filter((d) => d.index === i);
      expect(deltas[0]).toMatchObject({ index: i, id: call.id, type: 'function', function: { name: call.function.name } });
      expect(deltas.slice(1).every((d) => d.id === undefined && d.function.name === undefined)).toBe(true);
    });
  });
});

describe('streaming order', () => {
  it('emits reasoning before the answer arrives, while it streams', () => {
    const p = new ChatOutputParser({ reasoning: {} });
    expect(p.push('<think>abc ')).toEqual([{ type: 'reasoning', text: 'abc' }]);
    expect(p.push('def</thi')).toEqual([{ type: 'reasoning', text: ' def' }]);
    expect(p.push('nk>\n\nok')).toEqual([{ type: 'content', text: 'ok' }]);
  });

  it('flags tool calls for finish_reason', () => {
    const p = new ChatOutputParser({ toolCallFormat: 'hermes' });
    p.push('<tool_call>{"name": "f", "arguments": {}}</tool_call>');
    expect(p.hasToolCalls).toBe(true);
  });

  it('gives random call_ ids by default and 9-character ids for Mistral', () => {
    const a = new ChatOutputParser({ toolCallFormat: 'hermes' });
    const ev = [...a.push('<tool_call>{"name": "f", "arguments": {}}</tool_call>'), ...a.finish()];
    expect(foldEvents(ev).tool_calls[0].id).toMatch(/^call_[A-Za-z0-9]{24}$/);
    const m = new ChatOutputParser({ toolCallFormat: 'mistral' });
    const mev = [...m.push('[TOOL_CALLS][{"name": "f", "arguments": {}}]'), ...m.finish()];
    expect(foldEvents(mev).tool_calls[0].id).toMatch(/^[A-Za-z0-9]{9}$/);
  });
});

describe('format detection', () => {
  it('detects tool-call formats and prompts that open reasoning', () => {
    expect(detectToolCallFormat('... <tool_call> ...')).toBe('hermes');
    expect(detectToolCallFormat('[AVAILABLE_TOOLS] [TOOL_CALLS]')).toBe('mistral');
    // Granite 3.x's default system prompt: "... <|tool_call|> followed by a JSON list of tools used."
    expect(detectToolCallFormat('with <|tool_call|> followed by a JSON list of tools used.')).toBe('granite');
    expect(detectToolCallFormat('<|start_header_id|> {"name": function name, "parameters": ...} <|python_tag|>')).toBe('llama3');
    expect(detectToolCallFormat('{{ messages }}')).toBe(null);
    // Phi-4-mini's published template declares tools between <|tool|> and <|/tool|>.
    const phi4 = readFileSync(join(import.meta.dirname, 'testdata', 'published', 'phi-4-mini-instruct.jinja'), 'utf8');
    expect(detectToolCallFormat(phi4)).toBe('phi4');
    // Granite 3.3's system prompt with thinking on names both pairs of tags; Qwen3's only <think>.
    expect(detectReasoningFormat('Write your thoughts between <think></think> and write your response between <response></response> for each user query.')?.name).toBe('granite');
    expect(detectReasoningFormat("{{- '<think>\\n' }}…{{ '</think>' }}")?.name).toBe('think');
    expect(detectReasoningFormat(phi4)).toBeNull();

    expect(promptOpensReasoning('<｜Assistant｜><think>\n')).toBe(true);
    expect(promptOpensReasoning('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(false);
    // SmolLM3: /no_think closes an empty block in the prompt (answer only); /think leaves the model to open one.
    expect(promptOpensReasoning('<|im_start|>assistant\n<think>\n\n</think>\n')).toBe(false);
    expect(promptOpensReasoning('<|im_start|>assistant\n')).toBe(false);
  });
});
