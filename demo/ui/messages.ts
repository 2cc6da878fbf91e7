/**
 * The conversation's DOM. Streaming appends to text nodes (no re-render), every assistant
 * message has its stats line from the start (so nothing below it moves when numbers appear), and
 * the list follows the newest text only while the reader is at the bottom.
 */
import { formatMs } from './format';

export type ReplyState = 'waiting' | 'streaming' | 'done' | 'stopped' | 'error';

export interface ToolCallView {
  name: string;
  arguments: string;
}

export interface ReplyStats {
  ttftMs?: number;
  tokensPerSec?: number;
  tokens?: number;
  /** True when `tokens` counts chunks because no usage arrived (a stopped reply). */
  approximate?: boolean;
  finish?: string;
}

export class MessageList {
  private stick = true;

  constructor(
    private readonly scroller: HTMLElement,
    private readonly list: HTMLElement,
  ) {
    scroller.addEventListener('scroll', () => {
      this.stick = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 48;
    });
  }

  /** A user message: its images (data: URLs) above its text. */
  addUser(text: string, images: readonly string[] = []): void {
    const msg = el('article', 'msg user');
    const bubble = el('div', 'bubble');
    if (images.length) {
      const row = el('div', 'images');
      for (const [i, url] of images.entries()) {
        const img = el('img') as HTMLImageElement;
        img.src = url;
        img.alt = `image ${i + 1}`;
        row.append(img);
      }
      bubble.append(row);
    }
    const content = el('div', 'content');
    content.textContent = text;
    bubble.append(content);
    msg.append(roleLabel('You'), bubble);
    this.list.append(msg);
    this.stick = true;
    this.follow();
  }

  addReply(model: string): Reply {
    const r = new Reply(model, () => this.follow());
    this.list.append(r.root);
    this.follow();
    return r;
  }

  clear(): void {
    this.list.replaceChildren();
  }

  get isEmpty(): boolean {
    return this.list.childElementCount === 0;
  }

  follow(): void {
    if (this.stick) this.scroller.scrollTop = this.scroller.scrollHeight;
  }
}

export class Reply {
  readonly root: HTMLElement;
  private readonly content: Text;
  private readonly reasoningBox: HTMLDetailsElement;
  private readonly reasoning: Text;
  private readonly reasoningCount: HTMLElement;
  private readonly tools: HTMLElement;
  private readonly stats: HTMLElement;
  private readonly error: HTMLElement;
  private text = '';
  private thought = '';

  constructor(
    model: string,
    private readonly changed: () => void,
  ) {
    this.root = el('article', 'msg assistant');
    const bubble = el('div', 'bubble');

    this.reasoningBox = el('details', 'reasoning') as HTMLDetailsElement;
    this.reasoningBox.hidden = true;
    const summary = el('summary');
    summary.append('Reasoning');
    this.reasoningCount = el('span', 'count');
    summary.append(this.reasoningCount);
    const rt = el('div', 'reasoning-text');
    this.reasoning = document.createTextNode('');
    rt.append(this.reasoning);
    this.reasoningBox.append(summary, rt);

    const c = el('div', 'content');
    this.content = document.createTextNode('');
    c.append(this.content);

    this.tools = el('div', 'tool-calls');
    this.tools.hidden = true;
    this.error = el('p', 'reply-error');
    this.error.hidden = true;

    bubble.append(this.reasoningBox, c, this.tools, this.error);
    this.stats = el('footer', 'stats');
    this.stats.textContent = ' ';
    this.root.append(roleLabel(model), bubble, this.stats);
    this.setState('waiting');
  }

  get contentText(): string {
    return this.text;
  }

  setState(s: ReplyState): void {
    this.root.dataset.state = s;
  }

  appendContent(t: string): void {
    this.text += t;
    this.content.appendData(t);
    this.changed();
  }

  appendReasoning(t: string): void {
    this.thought += t;
    this.reasoningBox.hidden = false;
    this.reasoning.appendData(t);
    this.reasoningCount.textContent = ` · ${this.thought.length.toLocaleString()} characters`;
    this.changed();
  }

  setToolCalls(calls: ToolCallView[]): void {
    this.tools.hidden = calls.length === 0;
    this.tools.replaceChildren(
      ...calls.map((c) => {
        const card = el('div', 'tool-call');
        const head = el('div', 'tool-head');
        head.append(span('tool-badge', 'tool call'), span('tool-name', c.name || '…'));
        const args = el('pre', 'tool-args');
        args.textContent = prettyJSON(c.arguments);
        card.append(head, args);
        return card;
      }),
    );
    this.changed();
  }

  showError(title: string, text: string): void {
    this.error.hidden = false;
    this.error.textContent = `${title}: ${text}`;
    this.setState('error');
    this.changed();
  }

  setStats(s: ReplyStats): void {
    const parts: string[] = [];
    if (s.ttftMs !== undefined) parts.push(`first token ${formatMs(s.ttftMs)}`);
    if (s.tokensPerSec !== undefined && Number.isFinite(s.tokensPerSec)) parts.push(`${s.tokensPerSec.toFixed(1)} tok/s`);
    if (s.tokens !== undefined) parts.push(`${s.approximate ? '≈' : ''}${s.tokens} tokens`);
    if (s.finish) parts.push(s.finish);
    this.stats.textContent = parts.length ? parts.join(' · ') : ' ';
  }
}

/** Arguments as indented JSON once they parse; as streamed text until then. */
function prettyJSON(s: string): string {
  try {
    return JSON.stringify(JSON.parse(s), null, 2);
  } catch {
    return s;
  }
}

function roleLabel(text: string): HTMLElement {
  return span('role', text);
}

function el(tag: string, className = ''): HTMLElement {
  const e = document.createElement(tag);
  if (className) e.className = className;
  return e;
}

function span(className: string, text: string): HTMLElement {
  const s = el('span', className);
  s.textContent = text;
  return s;
}
