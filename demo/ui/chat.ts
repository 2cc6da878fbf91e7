/**
 * The conversation: it sends the chat through the `openai` SDK, exactly as any OpenAI client
 * would, and streams the reply into the page. The SDK's requests reach the engine through the
 * fetch shim; nothing here knows about the engine.
 */
import type OpenAI from 'openai';
import type { ChatCompletionChunk, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { explain, isAbort } from './errors';
import type { MessageList, Reply, ToolCallView } from './messages';
import { requestFields, type ChatSettings } from './settings';

/** What the engine adds to a streamed delta beyond OpenAI's fields. */
type Delta = ChatCompletionChunk.Choice.Delta & { reasoning_content?: string | null };

export interface ChatRequest {
  model: string;
  messages: ChatCompletionMessageParam[];
  [field: string]: unknown;
}

export interface ChatDeps {
  list: MessageList;
  client: () => OpenAI | null;
  model: () => string;
  settings: () => ChatSettings;
  /** Called when a reply starts and ends. */
  onBusy: (busy: boolean) => void;
  /** Errors that concern the whole page (the GPU), beyond the reply they broke. */
  onError: (e: unknown) => void;
}

export class Chat {
  private history: ChatCompletionMessageParam[] = [];
  private controller: AbortController | null = null;

  constructor(private readonly deps: ChatDeps) {}

  get busy(): boolean {
    return this.controller !== null;
  }

  /** The request the next message would send, without that message (for the code panel). */
  request(extraUser?: string): ChatRequest {
    const s = this.deps.settings();
    const messages: ChatCompletionMessageParam[] = [];
    if (s.system) messages.push({ role: 'system', content: s.system });
    messages.push(...this.history);
    if (extraUser !== undefined) messages.push({ role: 'user', content: extraUser });
    return { model: this.deps.model(), messages, ...requestFields(s) };
  }

  clear(): void {
    this.stop();
    this.history = [];
    this.deps.list.clear();
  }

  stop(): void {
    this.controller?.abort();
  }

  /** Sends a message; with `images` (data: URLs) its content is those `image_url` parts, then the text. */
  async send(text: string, images: readonly string[] = []): Promise<void> {
    const client = this.deps.client();
    if (!client || this.busy) return;
    const body = this.request(text);
    const content: ChatCompletionMessageParam['content'] = images.length
      ? [...images.map((url) => ({ type: 'image_url' as const, image_url: { url } })), ...(text ? [{ type: 'text' as const, text }] : [])]
      : text;
    body.messages[body.messages.length - 1] = { role: 'user', content } as ChatCompletionMessageParam;
    this.history.push({ role: 'user', content } as ChatCompletionMessageParam);
    this.deps.list.addUser(text, images);
    const reply = this.deps.list.addReply(body.model);

    const controller = new AbortController();
    this.controller = controller;
    this.deps.onBusy(true);
    try {
      await stream(client, body, reply, controller.signal, (msg) => this.history.push(msg));
    } catch (e) {
      const x = explain(e);
      reply.showError(x.title, x.text);
      this.deps.onError(e);
    } finally {
      this.controller = null;
      this.deps.onBusy(false);
    }
  }
}

const FINISH: Record<string, string> = {
  stop: 'finished',
  length: 'max tokens',
  tool_calls: 'tool call',
  abort: 'stopped',
  stopped: 'stopped',
};

/** One streamed reply: content, folded reasoning, tool calls and live stats. */
async function stream(
  client: OpenAI,
  body: ChatRequest,
  reply: Reply,
  signal: AbortSignal,
  remember: (m: ChatCompletionMessageParam) => void,
): Promise<void> {
  const t0 = performance.now();
  let tFirst: number | undefined;
  let tLast = t0;
  let chunks = 0;
  let completionTokens: number | undefined;
  let finish: string | undefined;
  const calls: Array<{ id: string; name: string; arguments: string }> = [];

  const stats = (final: boolean) => {
    const tokens = completionTokens ?? chunks;
    const decodeSec = (tLast - (tFirst ?? tLast)) / 1000;
    reply.setStats({
      ttftMs: tFirst !== undefined ? tFirst - t0 : undefined,
      // Decode speed: tokens after the first over the time they took.
      tokensPerSec: tokens > 1 && decodeSec > 0 ? (tokens - 1) / decodeSec : undefined,
      tokens: tFirst !== undefined ? tokens : undefined,
      approximate: completionTokens === undefined,
      finish: final && finish ? (FINISH[finish] ?? finish) : undefined,
    });
  };

  try {
    const s = await client.chat.completions.create(
      { ...(body as unknown as OpenAI.Chat.ChatCompletionCreateParamsStreaming), stream: true, stream_options: { include_usage: true } },
      { signal },
    );
    reply.setState('streaming');
    for await (const chunk of s) {
      if (chunk.usage) completionTokens = chunk.usage.completion_tokens;
      const choice = chunk.choices[0];
      if (!choice) continue;
      const d = choice.delta as Delta;
      if (d.content || d.reasoning_content || d.tool_calls?.length) {
        const now = performance.now();
        tFirst ??= now;
        tLast = now;
        chunks++;
      }
      if (d.reasoning_content) reply.appendReasoning(d.reasoning_content);
      if (d.content) reply.appendContent(d.content);
      if (d.tool_calls?.length) {
        for (const tc of d.tool_calls) {
          const c = (calls[tc.index] ??= { id: '', name: '', arguments: '' });
          if (tc.id) c.id = tc.id;
          c.name += tc.function?.name ?? '';
          c.arguments += tc.function?.arguments ?? '';
        }
        reply.setToolCalls(calls.map((c): ToolCallView => ({ name: c.name, arguments: c.arguments })));
      }
      if (choice.finish_reason) finish = choice.finish_reason;
      stats(false);
    }
    if (signal.aborted) finish = 'stopped';
    reply.setState(signal.aborted ? 'stopped' : 'done');
  } catch (e) {
    if (!isAbort(e)) throw e;
    finish = 'stopped';
    reply.setState('stopped');
  } finally {
    stats(true);
    if (reply.contentText || calls.length) {
      remember({
        role: 'assistant',
        content: reply.contentText,
        ...(calls.length ? { tool_calls: calls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } })) } : {}),
      });
    }
  }
}
