/**
 * Finds tool calls in model output, incrementally, and turns them into OpenAI `tool_calls`.
 *
 * - `hermes` (Qwen2.5/Qwen3, Hermes): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, any number.
 * - `llama3`: the whole reply is JSON `{"name": ..., "parameters": {...}}` (several separated by `;`),
 *   possibly after `<|python_tag|>`.
 * - `mistral`: `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`.
 * - `granite` (Granite 3.x): `<|tool_call|>[{"name": ..., "arguments": {...}}, ...]`, the list its
 *   template's default system prompt asks for.
 * - `phi4` (Phi-4-mini): `<|tool_call|>[{"name": ..., "arguments": {...}}, ...]<|/tool_call|>`; its
 *   template declares the tools between `<|tool|>` and `<|/tool|>` (Microsoft's function-calling
 *   example parses the list between the two special tokens; Ollama's phi4-mini template writes
 *   calls back this way).
 *
 * A call is emitted once it is complete: a first delta with index, id, type and name, then one
 * with the arguments as a JSON string. Text outside calls is content; partial tags are held.
 * `[TOOL_CALLS]`, `<|python_tag|>`, `<|tool_call|>` and `<|/tool_call|>` are special tokens: detokenize with them kept.
 */
import { partialTagSuffix, pushEvent, type OutputEvent } from './stream-text';

export type ToolCallFormat = 'hermes' | 'llama3' | 'mistral' | 'granite' | 'phi4';

/** Picks the format a chat template teaches its model, or null when it has none. */
export function detectToolCallFormat(template: string): ToolCallFormat | null {
  if (template.includes('[TOOL_CALLS]')) return 'mistral';
  if (template.includes('<|/tool|>')) return 'phi4';
  if (template.includes('<|tool_call|>')) return 'granite';
  if (template.includes('<tool_call>')) return 'hermes';
  if (template.includes('<|python_tag|>') || (template.includes('<|start_header_id|>') && template.includes('"parameters"'))) return 'llama3';
  return null;
}

export interface ToolCallParserOptions {
  format: ToolCallFormat;
  /** Makes call ids (tests pass a deterministic one). Default: `call_` + 24 random characters; 9 for Mistral, whose template checks that. */
  newId?: () => string;
}

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
function randomId(n: number): string {
  const bytes = new Uint8Array(n);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => ALNUM[b % ALNUM.length]).join('');
}

interface ParsedCall {
  name: string;
  arguments: string;
  id?: string;
}

/** `{"name", "arguments" | "parameters"}` to a call, or null when it is not one. */
function toCall(v: unknown): ParsedCall | null {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return null;
  const o = v as Record<string, unknown>;
  const fn = (o.function && typeof o.function === 'object' ? o.function : o) as Record<string, unknown>;
  if (typeof fn.name !== 'string') return null;
  const args = fn.arguments ?? fn.parameters ?? {};
  return {
    name: fn.name,
    arguments: typeof args === 'string' ? args : JSON.stringify(args),
    ...(typeof o.id === 'string' ? { id: o.id } : {}),
  };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** End index (exclusive) of the JSON value starting at `text[start]` (`{` or `[`), or -1 if not closed yet. */
function jsonEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

const HERMES_OPEN = '<tool_call>';
const HERMES_CLOSE = '</tool_call>';
const MISTRAL_TAG = '[TOOL_CALLS]';
export const GRANITE_TAG = '<|tool_call|>';
/** Closes Phi-4-mini's list (its open tag is Granite's). */
export const PHI4_CLOSE = '<|/tool_call|>';
const PYTHON_TAG = '<|python_tag|>';

export class ToolCallParser {
  private buf = '';
  private count = 0;
  /** llama3: undecided until the reply's first non-space character; then JSON or plain content. */
  private llamaMode: 'undecided' | 'json' | 'content' = 'undecided';
  /** mistral, granite, phi4: inside the call list after the tag. */
  private inList = false;
  /** phi4: a list was read; its closing tag (and the space before it) is dropped when it follows. */
  private afterList = false;
  private readonly newId: () => string;

  constructor(private readonly opts: ToolCallParserOptions) {
    this.newId = opts.newId ?? (opts.format === 'mistral' ? () => randomId(9) : () => `call_${randomId(24)}`);
  }

  /** Calls emitted so far; when > 0 the API sets `finish_reason: "tool_calls"`. */
  get toolCallCount(): number {
    return this.count;
  }

  get hasToolCalls(): boolean {
    return this.count > 0;
  }

  push(delta: string): OutputEvent[] {
    const out: OutputEvent[] = [];
    this.buf += delta;
    this.run(out, false);
    return out;
  }

  finish(): OutputEvent[] {
    const out: OutputEvent[] = [];
    this.run(out, true);
    return out;
  }

  private emitCall(out: OutputEvent[], call: ParsedCall): void {
    const index = this.count++;
    const id = this.opts.format === 'mistral' && call.id && /^[A-Za-z0-9]{9}$/.test(call.id) ? call.id : this.newId();
    out.push({ type: 'tool_call', delta: { index, id, type: 'function', function: { name: call.name, arguments: '' } } });
    out.push({ type: 'tool_call', delta: { index, function: { arguments: call.arguments } } });
  }

  private run(out: OutputEvent[], final: boolean): void {
    switch (this.opts.format) {
      case 'hermes':
        return this.runTagged(out, final, HERMES_OPEN, (body) => {
          const call = toCall(parseJson(body.trim()));
          return call ? [call] : null;
        });
      case 'mistral':
        return this.runTaggedList(out, final, MISTRAL_TAG);
      case 'granite':
        return this.runTaggedList(out, final, GRANITE_TAG);
      case 'phi4':
        return this.runTaggedList(out, final, GRANITE_TAG, PHI4_CLOSE);
      case 'llama3':
        return this.runLlama(out, final);
    }
  }

  /** `<tool_call>…</tool_call>` anywhere in the text. */
  private runTagged(out: OutputEvent[], final: boolean, open: string, parse: (body: string) => ParsedCall[] | null): void {
    for (;;) {
      const at = this.buf.indexOf(open);
      if (at < 0) {
        const keep = final ? 0 : partialTagSuffix(this.buf, [open]);
        pushEvent(out, { type: 'content', text: this.buf.slice(0, this.buf.length - keep) });
        this.buf = this.buf.slice(this.buf.length - keep);
        return;
      }
      pushEvent(out, { type: 'content', text: this.buf.slice(0, at) });
      this.buf = this.buf.slice(at);
      const close = this.buf.indexOf(HERMES_CLOSE);
      if (close < 0 && !final) return;
      const body = this.buf.slice(open.length, close < 0 ? undefined : close);
      const calls = parse(body);
      if (calls) for (const c of calls) this.emitCall(out, c);
      else pushEvent(out, { type: 'content', text: this.buf.slice(0, close < 0 ? undefined : close + HERMES_CLOSE.length) });
      this.buf = close < 0 ? '' : this.buf.slice(close + HERMES_CLOSE.length);
      if (close < 0) return;
    }
  }

  /**
   * A tag, then a JSON list of calls (or one call): `[TOOL_CALLS]` (Mistral), `<|tool_call|>`
   * (Granite), and the list's closing tag where the format has one (Phi-4-mini).
   */
  private runTaggedList(out: OutputEvent[], final: boolean, tag: string, close?: string): void {
    for (;;) {
      if (this.afterList && close) {
        const t = this.buf.replace(/^\s+/, '');
        if (t.startsWith(close)) this.buf = t.slice(close.length);
        else if (!final && close.startsWith(t)) return; // whitespace or part of the tag so far
        this.afterList = false;
      }
      if (!this.inList) {
        const at = this.buf.indexOf(tag);
        if (at < 0) {
          const keep = final ? 0 : partialTagSuffix(this.buf, [tag]);
          pushEvent(out, { type: 'content', text: this.buf.slice(0, this.buf.length - keep) });
          this.buf = this.buf.slice(this.buf.length - keep);
          return;
        }
        pushEvent(out, { type: 'content', text: this.buf.slice(0, at) });
        this.buf = this.buf.slice(at + tag.length);
        this.inList = true;
      }
      const start = this.buf.search(/\S/);
      if (start < 0) {
        if (final) this.buf = '';
        return;
      }
      const end = jsonEnd(this.buf, start);
      if (end < 0 && !final) return;
      const text = this.buf.slice(start, end < 0 ? undefined : end);
      const v = parseJson(text);
      const calls = (Array.isArray(v) ? v : [v]).map(toCall);
      const parsed = v !== undefined && calls.every((c) => c);
      if (parsed) for (const c of calls) this.emitCall(out, c!);
      else pushEvent(out, { type: 'content', text });
      this.buf = end < 0 ? '' : this.buf.slice(end);
      this.inList = false;
      this.afterList = parsed;
      if (end < 0) return;
    }
  }

  /** Llama 3: a reply that starts with `{` or `<|python_tag|>` is held until the end and parsed as calls. */
  private runLlama(out: OutputEvent[], final: boolean): void {
    if (this.llamaMode === 'undecided') {
      const t = this.buf.replace(/^\s+/, '');
      if (t.startsWith(PYTHON_TAG) || t.startsWith('{')) this.llamaMode = 'json';
      else if (t.length === 0 || (PYTHON_TAG.startsWith(t) && !final)) {
        if (!final) return;
      } else this.llamaMode = 'content';
    }
    if (this.llamaMode !== 'json') {
      pushEvent(out, { type: 'content', text: this.buf });
      this.buf = '';
      return;
    }
    if (!final) return;
    const body = this.buf.trim().replace(/^<\|python_tag\|>/, '').trim();
    const parts = body.split(/\s*;\s*(?=\{)/);
    const calls = parts.map((p) => toCall(parseJson(p)));
    if (calls.length > 0 && calls.every((c) => c)) for (const c of calls) this.emitCall(out, c!);
    else pushEvent(out, { type: 'content', text: this.buf });
    this.buf = '';
  }
}
