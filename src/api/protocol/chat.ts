/**
 * `POST /v1/chat/completions`: the request in OpenAI's field order (extensions after it), its
 * validation, and the response and stream-chunk shapes.
 */
import type { ChatMessage, ChatTool } from '../../text/index';
import { invalid, unsupported } from '../errors';
import { asBody, bool, int, obj, oneOf, readSamplingFields, readStreamOptions, refuseUnsupported, str, type Json, type SamplingFields, type StreamOptions, type Usage } from './common';
import { MAX_N } from './completions';

export type ToolChoice = 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } };

export interface ChatCompletionRequest extends SamplingFields {
  /** The conversation so far; roles system, developer, user, assistant, tool, function. */
  messages: ChatMessage[];
  /** The model id; `"default"` is the only loaded model. */
  model: string;
  // frequency_penalty, logit_bias: see SamplingFields
  /** Return the chosen tokens' logprobs. */
  logprobs?: boolean;
  /** Tokens to generate at most; wins over `max_tokens`. */
  max_completion_tokens?: number;
  /** Deprecated by OpenAI in favour of `max_completion_tokens` (-1 or absent: until EOS or the end of the context). */
  max_tokens?: number;
  /** Choices to generate. */
  n?: number;
  /** Accepted; the model decides how many calls it writes. */
  parallel_tool_calls?: boolean;
  // presence_penalty: see SamplingFields
  /** `low`, `medium` or `high`; passed to the chat template as `reasoning_effort`. */
  reasoning_effort?: 'low' | 'medium' | 'high';
  // seed, stop: see SamplingFields
  /** Send the reply as server-sent events of `chat.completion.chunk`. */
  stream?: boolean;
  /** Options of the stream (only with `stream: true`). */
  stream_options?: StreamOptions;
  // temperature: see SamplingFields
  /** `auto` (the model decides), `none`, `required` (at least one call) or a named function (that call), the last two forced by a grammar. */
  tool_choice?: ToolChoice;
  /** Functions the model may call, shown to it by the chat template. */
  tools?: ChatTool[];
  /** Alternatives per token to return with `logprobs` (0..20). */
  top_logprobs?: number;
  // top_p: see SamplingFields
  /** An end-user id; accepted and ignored. */
  user?: string;

  // ---- extensions (SGLang / vLLM); the sampling ones are in SamplingFields ----
  /** Extra variables for the chat template, e.g. `{enable_thinking: false}`. */
  chat_template_kwargs?: Record<string, unknown>;
  /** Put `<think>` reasoning in `reasoning_content` (default true). */
  separate_reasoning?: boolean;
  /** Stream reasoning as it comes (default true); false sends it in one piece when it ends. */
  stream_reasoning?: boolean;
  /** Continue the final assistant message instead of starting a new one. */
  continue_final_message?: boolean;
  /** End the prompt with the assistant's header (default true; false with continue_final_message). */
  add_generation_prompt?: boolean;
}

/** Validates a parsed JSON body into a `ChatCompletionRequest`; throws a 400 naming the field. */
export function parseChatRequest(raw: unknown): ChatCompletionRequest {
  const b = asBody(raw);
  refuseUnsupported(b);
  const messages = readMessages(b);
  const model = str(b, 'model', true)!;
  const tools = readTools(b);
  const logprobs = bool(b, 'logprobs');
  const topLogprobs = int(b, 'top_logprobs', { min: 0, max: 20 });
  if (topLogprobs !== undefined && !logprobs) throw invalid('top_logprobs', 'top_logprobs needs logprobs: true');
  const stream = bool(b, 'stream');
  const kwargs = obj(b, 'chat_template_kwargs');
  return {
    ...readSamplingFields(b),
    messages,
    model,
    logprobs,
    max_completion_tokens: int(b, 'max_completion_tokens', { min: -1 }),
    max_tokens: int(b, 'max_tokens', { min: -1 }),
    n: int(b, 'n', { min: 1, max: MAX_N }),
    parallel_tool_calls: bool(b, 'parallel_tool_calls'),
    reasoning_effort: oneOf(b, 'reasoning_effort', ['low', 'medium', 'high'] as const),
    stream,
    stream_options: readStreamOptions(b, stream),
    tool_choice: readToolChoice(b, tools),
    tools,
    top_logprobs: topLogprobs,
    user: str(b, 'user'),
    chat_template_kwargs: kwargs,
    separate_reasoning: bool(b, 'separate_reasoning'),
    stream_reasoning: bool(b, 'stream_reasoning'),
    continue_final_message: bool(b, 'continue_final_message'),
    add_generation_prompt: bool(b, 'add_generation_prompt'),
  };
}

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'function']);

/** The message list: shapes only (the template checks the conversation itself). Non-text parts are refused. */
export function readMessages(b: Json): ChatMessage[] {
  const m = b.messages;
  if (m === undefined || m === null) throw invalid('messages', 'messages is required', 'missing_required_parameter');
  if (!Array.isArray(m) || m.length === 0) throw invalid('messages', 'messages must be a non-empty list of messages');
  m.forEach((msg: unknown, i) => {
    const at = `messages[${i}]`;
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) throw invalid(at, `${at} must be an object`);
    const x = msg as Json;
    if (typeof x.role !== 'string' || !ROLES.has(x.role)) throw invalid(`${at}.role`, `${at}.role must be one of ${[...ROLES].join(', ')}; got ${JSON.stringify(x.role)}`);
    const c = x.content;
    if (c === undefined || c === null) {
      if (x.role !== 'assistant') throw invalid(`${at}.content`, `${at}.content is required for ${x.role} messages`);
    } else if (Array.isArray(c)) {
      c.forEach((part: unknown, j) => {
        const pat = `${at}.content[${j}]`;
        if (part === null || typeof part !== 'object') throw invalid(pat, `${pat} must be an object`);
        const p = part as Json;
        if (p.type !== 'text') throw unsupported(pat, `content of type ${JSON.stringify(p.type)} (only text parts)`);
        if (typeof p.text !== 'string') throw invalid(pat, `${pat}.text must be a string`);
      });
    } else if (typeof c !== 'string') throw invalid(`${at}.content`, `${at}.content must be a string or a list of content parts`);
  });
  return m as ChatMessage[];
}

function readTools(b: Json): ChatTool[] | undefined {
  const t = b.tools;
  if (t === undefined || t === null) return undefined;
  if (!Array.isArray(t)) throw invalid('tools', 'tools must be a list of {type: "function", function: {name, parameters}}');
  t.forEach((tool: unknown, i) => {
    const at = `tools[${i}]`;
    const x = tool as Json;
    if (!x || typeof x !== 'object' || x.type !== 'function' || !x.function || typeof x.function !== 'object')
      throw invalid('tools', `${at} must be {type: "function", function: {name, ...}}`);
    const fn = x.function as Json;
    if (typeof fn.name !== 'string' || fn.name.length === 0) throw invalid('tools', `${at}.function.name must be a non-empty string`);
    if (fn.strict !== undefined && fn.strict !== null && typeof fn.strict !== 'boolean') throw invalid('tools', `${at}.function.strict must be true or false; got ${JSON.stringify(fn.strict)}`);
  });
  return t as ChatTool[];
}

function readToolChoice(b: Json, tools: ChatTool[] | undefined): ToolChoice | undefined {
  const c = b.tool_choice;
  if (c === undefined || c === null) return undefined;
  if (c === 'none' || c === 'auto') return c;
  if (c === 'required') {
    if (!tools?.length) throw invalid('tool_choice', 'tool_choice "required" needs tools');
    return c;
  }
  if (typeof c === 'object' && (c as Json).type === 'function') {
    const fn = (c as Json).function as Json | undefined;
    const name = fn && typeof fn === 'object' ? fn.name : undefined;
    if (typeof name !== 'string') throw invalid('tool_choice', 'tool_choice {type: "function"} needs function: {name}');
    if (!tools?.some((t) => t.function.name === name)) throw invalid('tool_choice', `tool_choice names ${JSON.stringify(name)}, which is not in tools`);
    return { type: 'function', function: { name } };
  }
  throw invalid('tool_choice', `tool_choice must be "none", "auto", "required" or {type: "function", function: {name}}; got ${JSON.stringify(c)}`);
}

// ---------------------------------------------------------------------------------------------
// Responses

export interface ChatTopLogprob {
  token: string;
  logprob: number;
  /** The token's UTF-8 bytes (a token may hold part of a character). */
  bytes: number[];
}

export interface ChatTokenLogprob extends ChatTopLogprob {
  top_logprobs: ChatTopLogprob[];
}

export interface ChatLogprobs {
  content: ChatTokenLogprob[];
}

export interface ChatToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export type ChatFinishReason = 'stop' | 'length' | 'tool_calls' | 'abort' | null;

export interface ChatMessageOut {
  role: 'assistant';
  /** null when the reply is only tool calls. */
  content: string | null;
  /** The `<think>` block, when the template has one and `separate_reasoning` is on. */
  reasoning_content: string | null;
  tool_calls?: ChatToolCall[];
}

export interface ChatChoice {
  index: number;
  message: ChatMessageOut;
  logprobs: ChatLogprobs | null;
  finish_reason: ChatFinishReason;
  /** SGLang: the stop string or token id that ended the choice; null for length/abort. */
  matched_stop: string | number | null;
}

export interface ChatCompletionResponse {
  id: string;
  object: 'chat.completion';
  /** Seconds since the epoch. */
  created: number;
  model: string;
  choices: ChatChoice[];
  usage: Usage;
}

export interface ChatDelta {
  role?: 'assistant';
  content?: string;
  reasoning_content?: string;
  tool_calls?: Array<{ index: number; id?: string; type?: 'function'; function: { name?: string; arguments?: string } }>;
}

export interface ChatChunkChoice {
  index: number;
  delta: ChatDelta;
  logprobs: ChatLogprobs | null;
  finish_reason: ChatFinishReason;
  matched_stop?: string | number | null;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: ChatChunkChoice[];
  usage?: Usage | null;
}
