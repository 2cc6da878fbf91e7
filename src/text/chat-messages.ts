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
 * - `content: null` becomes `''` (templates concatenate content, e.g. on tool-call turns);
 * - content parts become one string (text parts joined by newlines) unless the template loops over them;
 * - tool-call `arguments` JSON strings become objects unless the template concatenates them.
 * Keys the caller left out stay out, so `is defined` tests in templates behave as in Python.
 */
export function normaliseMessages(messages: readonly ChatMessage[], template: string): Record<string, unknown>[] {
  const keepParts = templateWantsContentParts(template);
  const stringArgs = templateWantsStringArguments(template);
  return messages.map((message, i) => {
    if (message === null || typeof message !== 'object' || typeof message.role !== 'string')
      throw new TemplateError('invalid_messages', `messages[${i}] must be an object with a string role`);
    if (!ROLES.has(message.role))
      throw new TemplateError('invalid_messages', `messages[${i}].role must be one of ${[...ROLES].join(', ')}; got ${JSON.stringify(message.role)}`);
    const m: Record<string, unknown> = { ...message };
    if (m.role === 'developer') m.role = 'system';
    else if (m.role === 'function') m.role = 'tool';
    if ('content' in m && m.content == null) m.content = '';
    else if (Array.isArray(m.content) && !keepParts) m.content = partsToText(m.content as ChatContentPart[], i);
    if (Array.isArray(m.tool_calls)) m.tool_calls = (m.tool_calls as ChatToolCall[]).map((c) => normaliseToolCall(c, stringArgs));
    return m;
  });
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
