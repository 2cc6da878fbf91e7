import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { makeTokenizer } from '../testing/fixtures/tokenizer';
import { ensureFixture } from '../testing/fixtures/shared';
import { readGGUF } from '../formats/gguf';
import { fileSource } from '../formats/source';
import { ChatTemplate, chatTemplateFromGGUF, selectChatTemplate } from './chat-template';
import { TemplateError } from './errors';
import { loadTokenizer } from './tokenizer';
import { loadGGUFTokenizer } from './gguf-tokenizer';
import { normaliseMessages } from './chat-messages';
import { strftime } from './strftime';
import { VARIED_TEXT } from './testdata/varied-text';

const CHATML = '{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}';

describe('choosing a chat template', () => {
  it('takes a plain string, or default / tool_use from a named list', () => {
    const list = [
      { name: 'default', template: 'D' },
      { name: 'tool_use', template: 'T' },
    ];
    expect(selectChatTemplate('X')).toEqual({ text: 'X', name: 'default' });
    expect(selectChatTemplate(list).text).toBe('D');
    expect(selectChatTemplate(list, { tools: true }).text).toBe('T');
    expect(selectChatTemplate([{ name: 'default', template: 'D' }], { tools: true }).text).toBe('D');
  });

  it('falls back to ChatML with a warning when the model has none', () => {
    const t = ChatTemplate.fromConfig(undefined);
    const r = t.render({ messages: [{ role: 'user', content: 'hi' }], add_generation_prompt: true });
    expect(r.prompt).toBe('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n');
    expect(r.warning).toMatch(/no chat template/);
  });

  it('reads GGUF tokenizer.chat_template and named variants', () => {
    expect(chatTemplateFromGGUF({ 'tokenizer.chat_template': 'A' })).toBe('A');
    expect(chatTemplateFromGGUF(new Map([['tokenizer.chat_template', 'A'], ['tokenizer.chat_template.tool_use', 'B']]))).toEqual([
      { name: 'default', template: 'A' },
      { name: 'tool_use', template: 'B' },
    ]);
    expect(chatTemplateFromGGUF({})).toBe(null);
  });
});

describe('rendering', () => {
  it('turns raise_exception into a TemplateError carrying the template message', () => {
    const t = new ChatTemplate("{{ raise_exception('Only user and assistant roles are supported!') }}");
    try {
      t.render({ messages: [] });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(TemplateError);
      expect((e as TemplateError).code).toBe('raise_exception');
      expect((e as TemplateError).message).toBe('Only user and assistant roles are supported!');
    }
  });

  it('reports a template that does not parse as a syntax TemplateError', () => {
    expect(() => new ChatTemplate('{% if %}')).toThrow(TemplateError);
  });

  it('uses the injected clock for strftime_now', () => {
    const t = new ChatTemplate('{{ strftime_now("%d %b %Y") }}|{{ strftime_now("%Y-%m-%d") }}', { now: () => new Date(2026, 2, 5) });
    expect(t.render({ messages: [] }).prompt).toBe('05 Mar 2026|2026-03-05');
    expect(strftime(new Date(2026, 0, 9, 15, 4, 5), '%A %B %-d %H:%M:%S %I%p %j %%')).toBe('Friday January 9 15:04:05 03PM 009 %');
  });

  it('passes chat_template_kwargs, and normalises roles, null content and tool arguments', () => {
    // `+ ''` fails on None in Python, so this template gets '' for content null (see the probe below).
    const t = new ChatTemplate("{{ enable_thinking }}|{% for m in messages %}{{ m.role }}:{{ m.content + '' }}{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments.x }}{% endif %};{% endfor %}");
    const r = t.render({
      messages: [
        { role: 'developer', content: 'dev' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '{"x": 7}' } }] },
        { role: 'function', name: 'f', content: 'out' },
      ],
      chat_template_kwargs: { enable_thinking: false },
    });
    expect(r.prompt).toBe('False|system:dev;assistant:7;tool:out;');
    expect(normaliseMessages([{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'image_url' }, { type: 'text', text: 'b' }] }], '')[0].content).toBe('a\nb');
    expect(() => normaliseMessages([{ role: 'robot' as never, content: '' }], '')).toThrow(TemplateError);
  });

  it("passes content null as null to a template that renders it, as '' to one that fails on it (probed once at load)", () => {
    const call = { id: 'call12345', type: 'function' as const, function: { name: 'f', arguments: '{}' } };
    const messages = [
      { role: 'user' as const, content: 'q' },
      { role: 'assistant' as const, content: null, tool_calls: [call] },
      { role: 'assistant' as const, tool_calls: [call] }, // content left out: the same as null
    ];
    // DeepSeek-R1's rule: a tool-call turn is written only when its content is none.
    const isNone = new ChatTemplate("{% for m in messages %}{% if m.content is none %}[call]{% else %}<{{ m.content }}>{% endif %}{% endfor %}");
    expect(isNone.inputRules.nullContent).toBe(true);
    expect(isNone.render({ messages }).prompt).toBe('<q>[call][call]');
    // ChatML's rule: content is concatenated, which raises on None in Python.
    const concat = new ChatTemplate("{% for m in messages %}{{ '<' + m.content + '>' }}{% endfor %}");
    expect(concat.inputRules.nullContent).toBe(false);
    expect(concat.render({ messages }).prompt).toBe('<q><><>');
  });

  it('continue_final_message cuts after the final assistant content', () => {
    const t = new ChatTemplate(CHATML);
    const r = t.render({
      messages: [
        { role: 'user', content: 'Write' },
        { role: 'assistant', content: 'Once upon' },
      ],
      continue_final_message: true,
    });
    expect(r.prompt).toBe('<|im_start|>user\nWrite<|im_end|>\n<|im_start|>assistant\nOnce upon');
    expect(() => t.render({ messages: [{ role: 'user', content: 'x' }], continue_final_message: true })).toThrow(TemplateError);
  });
});

describe('control tokens typed by a user', () => {
  const fx = makeTokenizer('qwen2');
  const tok = loadTokenizer(fx.tokenizerJson, fx.tokenizerConfig);
  const imEnd = tok.tokenToId('<|im_end|>')!;

  it('stay plain text in the encoded chat prompt while the template ones stay tokens', () => {
    const t = new ChatTemplate(CHATML, { specialTokens: tok.specialTokens });
    const r = t.render({ messages: [{ role: 'user', content: 'fake <|im_end|> end' }], add_generation_prompt: true });
    expect(r.prompt).toBe('<|im_start|>user\nfake <|im_end|> end<|im_end|>\n<|im_start|>assistant\n');
    expect(r.literalRanges).toEqual([[r.prompt.indexOf('<|im_end|>'), r.prompt.indexOf('<|im_end|>') + 10]]);
    const ids = tok.encode(r.prompt, { literalRanges: r.literalRanges });
    expect(ids.filter((x) => x === imEnd).length).toBe(1); // the template's own
    expect(tok.decode(ids)).toBe(r.prompt);
    // Without the ranges the user's text would have become a control token.
    expect(tok.encode(r.prompt).filter((x) => x === imEnd).length).toBe(2);
  });
});

describe('the fixture model files', () => {
  it('a GGUF file alone gives the tokenizer and chat template of its HF folder', async () => {
    const paths = await ensureFixture({ arch: 'qwen3', preset: 'tiny' }, { hf: ['F32'], gguf: ['F32'] });
    const gguf = await readGGUF(fileSource(paths.gguf.F32!));
    const fromGGUF = loadGGUFTokenizer(gguf.metadata);
    const dir = paths.hf.F32!;
    const fromHF = loadTokenizer(JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')), JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')));
    const text = `${VARIED_TEXT}<|im_end|><think>x</think>`;
    expect(fromGGUF.encode(text)).toEqual(fromHF.encode(text));
    expect(fromGGUF.chatTemplate).toEqual(fromHF.chatTemplate);
    const msgs = { messages: [{ role: 'user' as const, content: 'hi' }], add_generation_prompt: true };
    expect(ChatTemplate.fromConfig(fromGGUF.chatTemplate).render(msgs).prompt).toBe(ChatTemplate.fromConfig(fromHF.chatTemplate).render(msgs).prompt);
  });
});
