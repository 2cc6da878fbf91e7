/**
 * Chat templates: choose the model's template, render OpenAI messages with it exactly as
 * transformers (Python jinja2) would, and mark user-supplied text so that control-token strings
 * typed by a user are encoded as plain text (see `literalRanges`).
 */
import {
  finalMessageText,
  normaliseMessages,
  NULL_CONTENT_PROBE,
  TYPED_CONTENT_PROBE,
  templateInputRules,
  type ChatMessage,
  type ChatTool,
  type TemplateInputRules,
} from './chat-messages';
import { TemplateError } from './errors';
import { parseTemplate, renderParsed, type ParsedTemplate } from './jinja-env';

/** What `tokenizer_config.json`'s `chat_template` may hold. */
export type ChatTemplateConfig = string | ReadonlyArray<{ name: string; template: string }> | null | undefined;

/** Used when a model ships no template: plain ChatML. */
export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

export interface SelectedTemplate {
  text: string;
  /** `default`, `tool_use`, another named template, or `chatml` when the fallback is used. */
  name: string;
  warning?: string;
}

/**
 * Picks the template as transformers does: a plain string; or from a named list, `tool_use`
 * when tools are given and it exists, else `default`. Falls back to ChatML with a warning.
 */
export function selectChatTemplate(config: ChatTemplateConfig, opts: { tools?: boolean; name?: string } = {}): SelectedTemplate {
  if (typeof config === 'string' && config.length > 0) return { text: config, name: 'default' };
  if (Array.isArray(config) && config.length > 0) {
    const byName = new Map(config.map((t) => [t.name, t.template]));
    const wanted = opts.name ?? (opts.tools && byName.has('tool_use') ? 'tool_use' : 'default');
    const text = byName.get(wanted);
    if (text !== undefined) return { text, name: wanted };
    const first = config[0];
    return { text: first.template, name: first.name, warning: `chat template "${wanted}" not found; using "${first.name}"` };
  }
  return { text: CHATML_TEMPLATE, name: 'chatml', warning: 'the model has no chat template; using ChatML' };
}

/** GGUF keeps the default template in `tokenizer.chat_template` and named ones in `tokenizer.chat_template.<name>`. */
export function chatTemplateFromGGUF(metadata: Readonly<Record<string, unknown>> | ReadonlyMap<string, unknown>): ChatTemplateConfig {
  const list: { name: string; template: string }[] = [];
  const entries = metadata instanceof Map ? [...metadata] : Object.entries(metadata);
  for (const [key, value] of entries) {
    if (typeof value !== 'string') continue;
    if (key === 'tokenizer.chat_template') list.unshift({ name: 'default', template: value });
    else if (key.startsWith('tokenizer.chat_template.')) list.push({ name: key.slice('tokenizer.chat_template.'.length), template: value });
  }
  if (list.length === 0) return null;
  return list.length === 1 && list[0].name === 'default' ? list[0].template : list;
}

export interface ChatTemplateOptions {
  bosToken?: string | null;
  eosToken?: string | null;
  /**
   * Control-token strings (e.g. `<|im_end|>`). Occurrences inside user-supplied text are
   * reported in `literalRanges` so the tokenizer encodes them as plain text.
   */
  specialTokens?: readonly string[];
  /** Clock for `strftime_now` (tests fix it). */
  now?: () => Date;
}

export interface RenderChatRequest {
  messages: readonly ChatMessage[];
  tools?: readonly ChatTool[] | null;
  add_generation_prompt?: boolean;
  /** Render, then cut right after the final assistant message's content so generation continues it. */
  continue_final_message?: boolean;
  /** Extra template variables, e.g. `{ enable_thinking: false }`. */
  chat_template_kwargs?: Record<string, unknown>;
}

export interface RenderChatResult {
  prompt: string;
  /**
   * [start, end) character ranges of `prompt` holding a control-token string that came from
   * user-supplied text; pass them to `TextTokenizer.encode(prompt, { literalRanges })`.
   */
  literalRanges: [number, number][];
  templateName: string;
  warning?: string;
}

// Noncharacters (never exchanged as text) bracket control-token strings found in user text.
const OPEN = '\uFDD0';
const CLOSE = '\uFDD1';
const MARKERS = /[\uFDD0\uFDD1]/g;

export class ChatTemplate {
  private readonly parsed: ParsedTemplate;
  private readonly specials: string[];
  /** How this template wants the messages; settled once, here, with one probe render. */
  readonly inputRules: TemplateInputRules;

  constructor(
    readonly text: string,
    private readonly opts: ChatTemplateOptions = {},
    readonly name = 'default',
    readonly warning?: string,
  ) {
    this.parsed = parseTemplate(text);
    // Longest first, so `<|im_end|>` wins over a shorter token that is its prefix.
    this.specials = [...new Set(opts.specialTokens ?? [])].filter((s) => s.length > 0).sort((a, b) => b.length - a.length);
    this.inputRules = templateInputRules(text, this.rendersNullContent(), this.needsTypedContent());
  }

  /** True when a user turn's string content vanishes from the render but the same text as one text part shows. */
  private needsTypedContent(): boolean {
    const shows = (content: ChatMessage['content']) => {
      try {
        const messages = normaliseMessages([{ role: 'user', content }], templateInputRules(this.text));
        return renderParsed(this.parsed, this.variables(messages, {}, null, false), { now: this.opts.now }).includes(TYPED_CONTENT_PROBE);
      } catch {
        return false;
      }
    };
    return !shows(TYPED_CONTENT_PROBE) && shows([{ type: 'text', text: TYPED_CONTENT_PROBE }]);
  }

  /** True when the template renders NULL_CONTENT_PROBE with `content: null` without raising. */
  private rendersNullContent(): boolean {
    try {
      renderParsed(this.parsed, this.variables(normaliseMessages(NULL_CONTENT_PROBE, templateInputRules(this.text, true)), {}, null, false), { now: this.opts.now });
      return true;
    } catch {
      return false;
    }
  }

  /** The variables a render sees, as transformers passes them. */
  private variables(messages: unknown[], kwargs: object, tools: unknown, addGenerationPrompt: boolean): Record<string, unknown> {
    const vars: Record<string, unknown> = { ...kwargs, messages, tools, documents: null, add_generation_prompt: addGenerationPrompt };
    if (this.opts.bosToken != null) vars.bos_token = this.opts.bosToken;
    if (this.opts.eosToken != null) vars.eos_token = this.opts.eosToken;
    return vars;
  }

  /** Builds from tokenizer_config's `chat_template` (string or named list) or GGUF's. */
  static fromConfig(config: ChatTemplateConfig, opts: ChatTemplateOptions & { tools?: boolean; name?: string } = {}): ChatTemplate {
    const sel = selectChatTemplate(config, opts);
    return new ChatTemplate(sel.text, opts, sel.name, sel.warning);
  }

  render(req: RenderChatRequest): RenderChatResult {
    if (!Array.isArray(req.messages)) throw new TemplateError('invalid_messages', 'messages must be an array');
    if (req.continue_final_message && req.add_generation_prompt)
      throw new TemplateError('continue_final_message', 'continue_final_message and add_generation_prompt cannot both be set');
    const last = req.messages[req.messages.length - 1];
    if (req.continue_final_message && last?.role !== 'assistant')
      throw new TemplateError('continue_final_message', 'continue_final_message needs the final message to be an assistant message');

    const messages = this.mark(normaliseMessages(req.messages, this.inputRules)) as Record<string, unknown>[];
    const tools = req.tools && req.tools.length ? this.mark(req.tools) : null;
    const vars = this.variables(messages, this.mark(req.chat_template_kwargs ?? {}) as object, tools, !!req.add_generation_prompt);

    let marked = renderParsed(this.parsed, vars, { now: this.opts.now });
    if (req.continue_final_message) marked = cutAfterFinal(marked, this.markString(finalMessageText(last)));
    const { prompt, literalRanges } = unmark(marked);
    return { prompt, literalRanges, templateName: this.name, ...(this.warning ? { warning: this.warning } : {}) };
  }

  private markString(s: string): string {
    if (this.specials.length === 0 || s.length === 0) return s.replace(MARKERS, '');
    let out = '';
    let i = 0;
    const clean = s.replace(MARKERS, '');
    outer: while (i < clean.length) {
      for (const sp of this.specials) {
        if (clean.startsWith(sp, i)) {
          out += OPEN + sp + CLOSE;
          i += sp.length;
          continue outer;
        }
      }
      out += clean[i++];
    }
    return out;
  }

  /** Marks control-token strings in every user-supplied string (roles and ids are left alone). */
  private mark(v: unknown, key = ''): unknown {
    if (typeof v === 'string') return key === 'role' || key === 'type' ? v : this.markString(v);
    if (Array.isArray(v)) return v.map((x) => this.mark(x));
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, this.mark(x, k)]));
    return v;
  }
}

/** transformers' cut for continue_final_message, including its care for trimmed trailing spaces. */
function cutAfterFinal(rendered: string, final: string): string {
  const stripped = final.trim();
  const loc = rendered.lastIndexOf(stripped);
  if (loc < 0)
    throw new TemplateError('continue_final_message', 'continue_final_message is set but the final message does not appear in the rendered chat');
  const lstripped = final.replace(/^\s+/, '');
  if (rendered.slice(loc, loc + lstripped.length) === final) return rendered.slice(0, loc + lstripped.length);
  return rendered.slice(0, loc + stripped.length);
}

function unmark(marked: string): { prompt: string; literalRanges: [number, number][] } {
  if (!marked.includes(OPEN)) return { prompt: marked.replace(MARKERS, ''), literalRanges: [] };
  let prompt = '';
  const literalRanges: [number, number][] = [];
  let start = -1;
  for (const ch of marked) {
    if (ch === OPEN) start = prompt.length;
    else if (ch === CLOSE) {
      if (start >= 0 && prompt.length > start) literalRanges.push([start, prompt.length]);
      start = -1;
    } else prompt += ch;
  }
  return { prompt, literalRanges };
}
