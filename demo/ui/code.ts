/**
 * The code panel: the few lines that reproduce the current chat with the `openai` SDK and this
 * library, rebuilt whenever the chat, the settings or the model change, with a tiny highlighter.
 */
import type { ChatRequest } from './chat';

/** How the snippet names the model: a string it can pass, or a note about a picked file. */
export type ModelSource = { kind: 'string'; value: string } | { kind: 'file'; name: string } | { kind: 'none' };

const MAX_CONTENT = 400;

export function snippet(source: ModelSource, req: ChatRequest): string {
  const modelArg =
    source.kind === 'string'
      ? quote(source.value)
      : source.kind === 'file'
        ? `file /* the File you picked: ${source.name.replace(/\*\//g, '* /')} */`
        : quote('Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf');
  const messages = req.messages.length ? req.messages : [{ role: 'user', content: 'Hello!' }];
  const body: Record<string, unknown> = { ...req, messages: messages.map(trimMessage), stream: true };
  return [
    `import OpenAI from 'openai';`,
    `import { createEngine, installFetchShim } from 'webgpu-llm';`,
    ``,
    `const engine = await createEngine({ model: ${modelArg} });`,
    ...(typeof req.model === 'string' && req.model.includes(':') ? [`await engine.loadLora(${quote(req.model.slice(req.model.indexOf(':') + 1))}, adapterSource); // a PEFT folder or GGUF LoRA: repo id, URL or files`] : []),
    `installFetchShim(engine); // this page now answers fetch('/v1/...')`,
    `const client = new OpenAI({ baseURL: location.origin + '/v1', apiKey: 'not-needed', dangerouslyAllowBrowser: true });`,
    ``,
    `const stream = await client.chat.completions.create(${literal(body, 0)});`,
    `for await (const chunk of stream) console.log(chunk.choices[0]?.delta?.content ?? '');`,
  ].join('\n');
}

function trimMessage(m: unknown): unknown {
  const x = m as { content?: unknown };
  if (typeof x.content === 'string' && x.content.length > MAX_CONTENT) return { ...x, content: x.content.slice(0, MAX_CONTENT) + '…' };
  // An image part's data: URL is its whole file in base64: its head stands for it.
  if (Array.isArray(x.content))
    return {
      ...x,
      content: x.content.map((p: { type?: string; image_url?: { url: string } }) =>
        p.type === 'image_url' && p.image_url && p.image_url.url.length > MAX_CONTENT ? { ...p, image_url: { ...p.image_url, url: p.image_url.url.slice(0, MAX_CONTENT) + '…' } } : p,
      ),
    };
  return m;
}

/** A JS object literal: unquoted keys where allowed, one property per line, short arrays inline. */
function literal(v: unknown, depth: number): string {
  const pad = '  '.repeat(depth + 1);
  const end = '  '.repeat(depth);
  if (Array.isArray(v)) {
    if (v.length === 0) return '[]';
    const oneLine = `[${v.map((x) => literal(x, 0)).join(', ')}]`;
    if (!oneLine.includes('\n') && oneLine.length <= 40) return oneLine;
    return `[\n${v.map((x) => pad + literal(x, depth + 1)).join(',\n')},\n${end}]`;
  }
  if (v && typeof v === 'object') {
    const entries = Object.entries(v).filter(([, x]) => x !== undefined);
    const oneLine = `{ ${entries.map(([k, x]) => `${key(k)}: ${literal(x, 0)}`).join(', ')} }`;
    if (!oneLine.includes('\n') && oneLine.length <= 72) return oneLine;
    return `{\n${entries.map(([k, x]) => `${pad}${key(k)}: ${literal(x, depth + 1)}`).join(',\n')},\n${end}}`;
  }
  return typeof v === 'string' ? quote(v) : JSON.stringify(v);
}

const key = (k: string) => (/^[A-Za-z_$][\w$]*$/.test(k) ? k : quote(k));
const quote = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\n/g, '\\n')}'`;

const TOKEN = /(\/\/[^\n]*|\/\*[\s\S]*?\*\/)|('(?:[^'\\\n]|\\.)*')|\b(import|from|const|await|for|of|new)\b|\b(\d+(?:\.\d+)?|true|false|null)\b/g;

/** HTML with spans for comments, strings, keywords and literals. */
export function highlight(code: string): string {
  let out = '';
  let last = 0;
  for (const m of code.matchAll(TOKEN)) {
    out += escape(code.slice(last, m.index));
    const cls = m[1] ? 'c' : m[2] ? 's' : m[3] ? 'k' : 'n';
    out += `<span class="tok-${cls}">${escape(m[0])}</span>`;
    last = m.index! + m[0].length;
  }
  return out + escape(code.slice(last));
}

function escape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
