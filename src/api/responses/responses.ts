/**
 * `/v1/responses`: OpenAI's Responses API over the chat pipeline. A request runs as a streamed
 * chat completion (translate.ts); its chunks become output items (reasoning, message,
 * function_call) and, when streamed, the Responses event sequence. Stored responses (`store`,
 * default true) keep their conversation in a bounded in-memory store for `previous_response_id`,
 * `GET` and `DELETE`; a continuation's prompt starts with the stored turns, so the backend's prompt
 * prefix cache reuses their KV.
 */
import { newId } from '../choices';
import { ApiError, toApiError } from '../errors';
import type { ChatCompletionChunk, ChatCompletionRequest } from '../protocol/chat';
import type { Json } from '../protocol/field';
import { renameParam, toChatBody, type ChatMessageJson, type ResponsesRequest } from './translate';

type Item = Record<string, unknown> & { type: string; id: string };

export interface ResponseObject {
  id: string;
  object: 'response';
  created_at: number;
  status: 'in_progress' | 'completed' | 'incomplete';
  error: null;
  incomplete_details: { reason: 'max_output_tokens' | 'content_filter' } | null;
  instructions: string | null;
  max_output_tokens: number | null;
  metadata: Record<string, string>;
  model: string;
  output: Item[];
  parallel_tool_calls: boolean;
  previous_response_id: string | null;
  reasoning: { effort: string | null; summary: null };
  store: boolean;
  temperature: number | null;
  text: { format: Json };
  tool_choice: unknown;
  tools: Json[];
  top_p: number | null;
  truncation: 'disabled';
  usage: {
    input_tokens: number;
    input_tokens_details: { cached_tokens: number };
    output_tokens: number;
    output_tokens_details: { reasoning_tokens: number };
    total_tokens: number;
  } | null;
  user: null;
}

interface Stored {
  response: ResponseObject;
  /** The conversation the response continues (without instructions) and its own reply. */
  messages: ChatMessageJson[];
}

/** Responses kept for `previous_response_id` and GET, the oldest dropped past this. */
export const MAX_STORED_RESPONSES = 256;

export interface ResponsesDeps {
  /** Reads and runs a chat body (the chat route's own parse + prepare). */
  runChat(chat: Json, signal: AbortSignal): Promise<{ req: ChatCompletionRequest; chunks: AsyncGenerator<ChatCompletionChunk, void, void> }>;
  maxStored?: number;
}

/** OpenAI's id style: `resp_…`, `msg_…`. */
const rid = (prefix: string) => newId(prefix).replace('-', '_');
const now = () => Math.floor(Date.now() / 1000);
const notFound = (id: string) => new ApiError(404, `No response with id '${id}' found (it was not stored, was deleted, or was evicted)`, 'invalid_request_error', null, 'not_found');

export function createResponses(deps: ResponsesDeps) {
  const store = new Map<string, Stored>();
  const max = deps.maxStored ?? MAX_STORED_RESPONSES;

  function remember(id: string, entry: Stored): void {
    store.set(id, entry);
    while (store.size > max) store.delete(store.keys().next().value!);
  }

  /** Events of one response; the last is `response.completed` carrying the whole object. */
  async function* events(req: ResponsesRequest, previous: ChatMessageJson[], chat: Json, signal: AbortSignal): AsyncGenerator<Json, void, void> {
    const { chunks } = await deps.runChat(chat, signal).catch((e: unknown) => {
      throw renameParam(e);
    });
    const response: ResponseObject = {
      id: rid('resp'),
      object: 'response',
      created_at: now(),
      status: 'in_progress',
      error: null,
      incomplete_details: null,
      instructions: req.instructions,
      max_output_tokens: req.maxOutputTokens,
      metadata: req.metadata,
      model: req.model,
      output: [],
      parallel_tool_calls: req.parallelToolCalls,
      previous_response_id: req.previousResponseId,
      reasoning: { effort: req.reasoningEffort, summary: null },
      store: req.store,
      temperature: req.temperature,
      text: { format: req.textFormat },
      tool_choice: req.toolChoice,
      tools: req.tools,
      top_p: req.topP,
      truncation: 'disabled',
      usage: null,
      user: null,
    };
    let seq = 0;
    const ev = (type: string, body: Json): Json => ({ type, sequence_number: seq++, ...body });
    const snapshot = () => structuredClone(response);
    yield ev('response.created', { response: snapshot() });
    yield ev('response.in_progress', { response: snapshot() });

    let reasoning: Item | null = null;
    let message: Item | null = null;
    const calls = new Map<number, Item>();
    const events: Json[] = [];
    const open = (item: Item) => {
      response.output.push(item);
      events.push(ev('response.output_item.added', { output_index: response.output.length - 1, item: structuredClone(item) }));
    };
    const indexOf = (item: Item) => response.output.indexOf(item);
    const closeReasoning = () => {
      if (!reasoning) return;
      const text = (reasoning.content as { text: string }[])[0]!.text;
      events.push(ev('response.reasoning_text.done', { item_id: reasoning.id, output_index: indexOf(reasoning), content_index: 0, text }));
      reasoning.status = 'completed';
      events.push(ev('response.output_item.done', { output_index: indexOf(reasoning), item: structuredClone(reasoning) }));
      reasoning = null;
    };

    for await (const chunk of chunks) {
      if (chunk.usage) {
        const u = chunk.usage;
        response.usage = {
          input_tokens: u.prompt_tokens,
          input_tokens_details: { cached_tokens: u.prompt_tokens_details?.cached_tokens ?? 0 },
          output_tokens: u.completion_tokens,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: u.total_tokens,
        };
      }
      const choice = chunk.choices[0];
      if (!choice) continue;
      const d = choice.delta;
      if (d.reasoning_content) {
        if (!reasoning) open((reasoning = { type: 'reasoning', id: rid('rs'), summary: [], content: [{ type: 'reasoning_text', text: '' }], status: 'in_progress' }));
        (reasoning.content as { text: string }[])[0]!.text += d.reasoning_content;
        events.push(ev('response.reasoning_text.delta', { item_id: reasoning.id, output_index: indexOf(reasoning), content_index: 0, delta: d.reasoning_content }));
      }
      if (d.content) {
        closeReasoning();
        if (!message) {
          open((message = { type: 'message', id: rid('msg'), status: 'in_progress', role: 'assistant', content: [] }));
          const part = { type: 'output_text', text: '', annotations: [] };
          (message.content as unknown[]).push(part);
          events.push(ev('response.content_part.added', { item_id: message.id, output_index: indexOf(message), content_index: 0, part: structuredClone(part) }));
        }
        (message.content as { text: string }[])[0]!.text += d.content;
        events.push(ev('response.output_text.delta', { item_id: message.id, output_index: indexOf(message), content_index: 0, delta: d.content, logprobs: [] }));
      }
      for (const tc of d.tool_calls ?? []) {
        closeReasoning();
        let call = calls.get(tc.index);
        if (!call) {
          calls.set(tc.index, (call = { type: 'function_call', id: rid('fc'), call_id: tc.id ?? rid('call'), name: tc.function?.name ?? '', arguments: '', status: 'in_progress' }));
          open(call);
        } else if (tc.function?.name) call.name = String(call.name) + tc.function.name;
        if (tc.function?.arguments) {
          call.arguments = String(call.arguments) + tc.function.arguments;
          events.push(ev('response.function_call_arguments.delta', { item_id: call.id, output_index: indexOf(call), delta: tc.function.arguments }));
        }
      }
      if (choice.finish_reason) {
        if (choice.finish_reason === 'length') response.incomplete_details = { reason: 'max_output_tokens' };
      }
      yield* events.splice(0);
    }

    closeReasoning();
    if (message) {
      const part = (message.content as { text: string }[])[0]!;
      events.push(ev('response.output_text.done', { item_id: message.id, output_index: indexOf(message), content_index: 0, text: part.text, logprobs: [] }));
      events.push(ev('response.content_part.done', { item_id: message.id, output_index: indexOf(message), content_index: 0, part: structuredClone(part) }));
      message.status = 'completed';
      events.push(ev('response.output_item.done', { output_index: indexOf(message), item: structuredClone(message) }));
    }
    for (const call of calls.values()) {
      events.push(ev('response.function_call_arguments.done', { item_id: call.id, output_index: indexOf(call), arguments: call.arguments }));
      call.status = 'completed';
      events.push(ev('response.output_item.done', { output_index: indexOf(call), item: structuredClone(call) }));
    }
    response.status = response.incomplete_details ? 'incomplete' : 'completed';
    if (req.store) {
      const text = message ? (message.content as { text: string }[])[0]!.text : null;
      const toolCalls = [...calls.values()].map((c) => ({ id: c.call_id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
      const reply: ChatMessageJson = { role: 'assistant', content: text, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) };
      const input = (chat.messages as ChatMessageJson[]).slice(req.instructions ? 1 : 0);
      remember(response.id, { response: structuredClone(response), messages: [...input, reply] });
    }
    yield* events.splice(0);
    yield ev(response.status === 'completed' ? 'response.completed' : 'response.incomplete', { response: snapshot() });
  }

  return {
    /** POST: the events (streamed) or the final response object. */
    async create(body: Json, signal: AbortSignal): Promise<{ stream: boolean; events: AsyncGenerator<Json, void, void>; fold(): Promise<ResponseObject> }> {
      const prevId = body.previous_response_id;
      let previous: ChatMessageJson[] = [];
      if (typeof prevId === 'string') {
        const stored = store.get(prevId);
        if (!stored) throw new ApiError(400, `previous_response_id '${prevId}' is not a stored response`, 'invalid_request_error', 'previous_response_id', 'previous_response_not_found');
        previous = stored.messages;
      }
      const { req, chat } = toChatBody(body, previous);
      const it = events(req, previous, chat, signal);
      // Validation and the prompt run before the reply starts: a bad request is a 400, not a stream.
      const first = await it.next();
      async function* all(): AsyncGenerator<Json, void, void> {
        if (!first.done) yield first.value;
        yield* it;
      }
      return {
        stream: req.stream,
        events: all(),
        async fold() {
          let last: Json | undefined;
          for await (const e of all()) last = e;
          return (last as { response: ResponseObject }).response;
        },
      };
    },
    get(id: string): ResponseObject {
      const stored = store.get(id);
      if (!stored) throw notFound(id);
      return stored.response;
    },
    delete(id: string): { id: string; object: 'response.deleted'; deleted: true } {
      if (!store.delete(id)) throw notFound(id);
      return { id, object: 'response.deleted', deleted: true };
    },
  };
}

/** The Responses event stream as SSE: `event: <type>` and `data: <json>` per event, an error event on failure. */
export function responsesSse(events: AsyncGenerator<Json, void, void>): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  const frame = (e: Json) => enc.encode(`event: ${String(e.type)}\ndata: ${JSON.stringify(e)}\n\n`);
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const r = await events.next();
        if (!r.done) return controller.enqueue(frame(r.value));
      } catch (e) {
        const err = toApiError(e);
        controller.enqueue(frame({ type: 'error', code: err.code, message: err.message, param: err.param }));
      }
      controller.close();
    },
    async cancel() {
      await events.return(undefined);
    },
  });
}
