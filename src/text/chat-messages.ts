/**
 * OpenAI chat messages in, the variables chat templates expect out. The same rules are written
 * in Python in testdata/render_golden.py so the golden renderings see the same input.
 */
import { TemplateError } from './errors';

export type ChatRole = 'system' | 'developer' | 'user' | 'assistant' | 'tool' | 'function';

export interface ChatContentPart {
  type: string;
  text?: string;
  [key: string]: unknown;
}

export interface ChatToolCall {
  id?: string;
  type?: 'function';
  function: { name: string; arguments: string | Record<string, unknown> };
}

export interface ChatMessage {
  role: ChatRole;
  content?: string | ChatContentPart[] | null;
  name?: string;
  tool_calls?: ChatToolCall[] | null;
  tool_call_id?: string;
  /** Earlier reasoning, for templates that render it (Qwen3). */
  reasoning_content?: string | null;
  [key: string]: unknown;
}

export interface ChatTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean };
}

/**
 * How a template wants the messages, read once per template (ChatTemplate holds it) rather
 * than per request.
 */
export interface TemplateInputRules {
  /** Keep OpenAI content parts: the template loops over them itself. */
  contentParts: boolean;
  /** Keep tool-call `arguments` as the JSON string: the template concatenates them (DeepSeek-R1). */
  stringArguments: boolean;
  /**
   * Pass `content: null` through as null. Some templates test `content is none` on tool-call
   * turns (DeepSeek-R1) and render them wrongly with ''; others concatenate content and fail on
   * null (Qwen3, ChatML, Phi-3.5, Granite, gpt-oss). ChatTemplate decides by rendering
   * NULL_CONTENT_PROBE once at load; when false, null becomes ''.
   */
  nullContent: boolean;
  /**
   * String content becomes one text part: the template reads `content[0].type` and loops over
   * parts without a string branch, so a plain string would render as nothing (SmolVLM's). Settled,
   * as llama.cpp's minja does, by rendering TYPED_CONTENT_PROBE both ways once at load.
   */
  typedContent: boolean;
}

/**
 * A user turn and an assistant tool-call turn with `content: null`, as the `openai` SDK sends it.
 * A template that renders this without error gets null content (what llama.cpp does).
 * render_golden.py probes with the same conversation.
 */
export const NULL_CONTENT_PROBE: readonly ChatMessage[] = [
  { role: 'user', content: 'Hi' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call12345', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }],
  },
];

/** A user turn whose text the probe looks for, as a string and as one text part. */
export const TYPED_CONTENT_PROBE = 'probe-7c1e';

/** The rules a template's text settles by itself (nullContent and typedContent need a render: see ChatTemplate). */
export function templateInputRules(template: string, nullContent = false, typedContent = false): TemplateInputRules {
  return { contentParts: templateWantsContentParts(template), stringArguments: templateWantsStringArguments(template), nullContent, typedContent };
}

/** Templates that loop over `message.content` handle OpenAI content parts themselves. */
export function templateWantsContentParts(template: string): boolean {
  return /for\s+\w+\s+in\s+\w+(?:\.content|\[\s*['"]content['"]\s*\])/.test(template);
}

/** Templates that concatenate `arguments` with `+` need the JSON string (DeepSeek-R1). */
export function templateWantsStringArguments(template: string): boolean {
  return /arguments(?:['"]\])?\s*\+/.test(template);
}

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'function']);

/**
 * - `developer` becomes `system` and legacy `function` becomes `tool` (templates know neither);
 * - `content: null` (or left out of an assistant turn) stays null where the template renders it
 *   (`rules.nullContent`), else becomes `''`;
 * - content parts become one string (text parts joined by newlines) unless the template loops over them;
 *   then OpenAI's image parts become transformers' `{type: "image"}` and, with `rules.typedContent`,
 *   string content becomes `[{type: "text", text}]`;
 * - tool-call `arguments` JSON strings become objects unless the template concatenates them.
 * Keys the caller left out stay out, so `is defined` tests in templates behave as in Python.
 * A template text in place of `rules` reads the rules from it with `nullContent` false.
 */
export function normaliseMessages(messages: readonly ChatMessage[], rules: TemplateInputRules | string): Record<string, unknown>[] {
  const { contentParts: keepParts, stringArguments: stringArgs, nullContent, typedContent } = typeof rules === 'string' ? templateInputRules(rules) : rules;
  return messages.map((message, i) => {
    if (message === null || typeof message !== 'object' || typeof message.role !== 'string')
      throw new TemplateError('invalid_messages', `messages[${i}] must be an object with a string role`);
    if (!ROLES.has(message.role))
      throw new TemplateError('invalid_messages', `messages[${i}].role must be one of ${[...ROLES].join(', ')}; got ${JSON.stringify(message.role)}`);
    const m: Record<string, unknown> = { ...message };
    if (m.role === 'developer') m.role = 'system';
    else if (m.role === 'function') m.role = 'tool';
    // OpenAI lets an assistant tool-call turn leave content out: the same as null.
    if (m.role === 'assistant' && !('content' in m)) m.content = null;
    if ('content' in m && m.content == null) m.content = nullContent ? null : '';
    else if (Array.isArray(m.content)) m.content = keepParts ? (m.content as ChatContentPart[]).map(hfPart) : partsToText(m.content as ChatContentPart[], i);
    else if (typeof m.content === 'string' && keepParts && typedContent) m.content = [{ type: 'text', text: m.content }];
    if (Array.isArray(m.tool_calls)) m.tool_calls = (m.tool_calls as ChatToolCall[]).map((c) => normaliseToolCall(c, stringArgs));
    return m;
  });
}

/** transformers' part shapes: an image is `{type: "image"}` (the pixels travel beside the prompt, not in it). */
function hfPart(p: ChatContentPart): ChatContentPart {
  return p !== null && typeof p === 'object' && p.type === 'image_url' ? { type: 'image' } : p;
}

function partsToText(parts: ChatContentPart[], i: number): string {
  return parts
    .filter((p) => {
      if (p === null || typeof p !== 'object') throw new TemplateError('invalid_messages', `messages[${i}].content parts must be objects`);
      return p.type === 'text';
    })
    .map((p) => String(p.text ?? ''))
    .join('\n');
}

function normaliseToolCall(call: ChatToolCall, stringArgs: boolean): ChatToolCall {
  const fn = { ...call.function };
  if (typeof fn.arguments === 'string' && !stringArgs) {
    try {
      fn.arguments = JSON.parse(fn.arguments);
    } catch {
      // Not JSON: leave the text, as transformers would receive it.
    }
  } else if (typeof fn.arguments === 'object' && fn.arguments !== null && stringArgs) {
    fn.arguments = JSON.stringify(fn.arguments);
  }
  return { ...call, function: fn };
}

/** The text of the final message, as transformers finds it for `continue_final_message`. */
export function finalMessageText(message: ChatMessage): string {
  const c = message.content;
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) {
    const texts = c.filter((p) => typeof p.text === 'string');
    if (texts.length) return texts[texts.length - 1].text!;
  }
  if (c == null) return '';
  throw new TemplateError('continue_final_message', 'continue_final_message is set but the final message has no text content');
}
