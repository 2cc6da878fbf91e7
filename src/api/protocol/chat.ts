/**
 * `POST /v1/chat/completions`: the request as a field table in OpenAI's field order (extensions
 * after it, the shared ones in SAMPLING_FIELDS), its reading, and the response and stream-chunk
 * shapes.
 */
import type { ChatMessage, ChatTool } from '../../text/index';
import { invalid, unsupported } from '../errors';
import { checkStreamOptions, refuseUnsupported, SAMPLING_FIELDS, streamOptionsField, withStructured, type RoutedExpertsExt, type SamplingFields, type Usage } from './common';
import { MAX_LOGPROBS, MAX_N } from './completions';
import { asBody, bool, custom, field, int, obj, oneOf, readFields, str, type FieldsOf, type Json } from './field';

export type ToolChoice = 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } };

export const CHAT_FIELDS = {
  messages: field(custom(readMessages), { required: true, doc: 'The conversation so far; roles system, developer, user, assistant, tool, function.' }),
  model: field(str, { required: true, doc: 'The model id; `"default"` is the only loaded model.' }),
  // frequency_penalty, logit_bias: SAMPLING_FIELDS
  logprobs: field(bool, { default: false, doc: "Return the chosen tokens' logprobs." }),
  max_completion_tokens: field(int({ min: -1 }), { doc: 'Tokens to generate at most; wins over `max_tokens`.' }),
  max_tokens: field(int({ min: -1 }), { doc: 'Deprecated by OpenAI in favour of `max_completion_tokens` (-1 or absent: until EOS or the end of the context).' }),
  n: field(int({ min: 1, max: MAX_N }), { default: 1, doc: 'Choices to generate.' }),
  parallel_tool_calls: field(bool, { default: true, doc: 'false: a forced tool_choice makes one call; otherwise the model decides how many it writes.' }),
  // presence_penalty: SAMPLING_FIELDS
  reasoning_effort: field(oneOf(['low', 'medium', 'high']), { doc: 'Passed to the chat template as `reasoning_effort`.' }),
  // response_format, seed, stop: SAMPLING_FIELDS
  stream: field(bool, { default: false, doc: 'Send the reply as server-sent events of `chat.completion.chunk`.' }),
  stream_options: streamOptionsField,
  // temperature: SAMPLING_FIELDS
  tool_choice: field(custom(readToolChoice), {
    doc: '`auto` (the model decides), `none`, `required` (at least one call) or a named function (that call), the last two forced by a grammar.',
  }),
  tools: field(custom(readTools), { doc: 'Functions the model may call, shown to it by the chat template.' }),
  top_logprobs: field(int({ min: 0, max: MAX_LOGPROBS }), { doc: 'Alternatives per token to return with `logprobs`.' }),
  // top_p: SAMPLING_FIELDS
  user: field(str, { doc: 'An end-user id; accepted and ignored.' }),

  // ---- extensions (SGLang / vLLM); the shared ones are SAMPLING_FIELDS' ----
  chat_template_kwargs: field(obj, { doc: 'Extra variables for the chat template, e.g. `{enable_thinking: false}`.' }),
  separate_reasoning: field(bool, { default: true, doc: 'Put `<think>` reasoning in `reasoning_content`.' }),
  stream_reasoning: field(bool, { default: true, doc: 'Stream reasoning as it comes; false sends it in one piece when it ends.' }),
  continue_final_message: field(bool, { default: false, doc: 'Continue the final assistant message instead of starting a new one.' }),
  add_generation_prompt: field(bool, { doc: "End the prompt with the assistant's header (absent: true, but false with continue_final_message)." }),
  ...SAMPLING_FIELDS,
};

export type ChatCompletionRequest = FieldsOf<typeof CHAT_FIELDS> & Pick<SamplingFields, 'structured'>;

/** Validates a parsed JSON body into a `ChatCompletionRequest`; throws a 400 naming the field. */
export function parseChatRequest(raw: unknown): ChatCompletionRequest {
  const body = asBody(raw);
  refuseUnsupported(body);
  const r = readFields(CHAT_FIELDS, body);
  if (r.top_logprobs !== undefined && !r.logprobs) throw invalid('top_logprobs', 'top_logprobs needs logprobs: true');
  checkStreamOptions(r);
  checkToolChoice(r.tool_choice, r.tools);
  return withStructured(r);
}

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'function']);

/** The message list: shapes only (the template checks the conversation itself). Parts other than text and images are refused. */
export function readMessages(m: unknown, param: string): ChatMessage[] {
  if (!Array.isArray(m) || m.length === 0) throw invalid(param, `${param} must be a non-empty list of messages`);
  m.forEach((msg: unknown, i) => {
    const at = `${param}[${i}]`;
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) throw invalid(at, `${at} must be an object`);
    const x = msg as Json;
    if (typeof x.role !== 'string' || !ROLES.has(x.role)) throw invalid(`${at}.role`, `${at}.role must be one of ${[...ROLES].join(', ')}; got ${JSON.stringify(x.role)}`);
    const c = x.content;
    if (c === undefined || c === null) {
      if (x.role !== 'assistant') throw invalid(`${at}.content`, `${at}.content is required for ${x.role} messages`);
    } else if (Array.isArray(c)) {
      c.forEach((part: unknown, j) => {
        const pat = `${at}.content[${j}]`;
        if (part === null || typeof part !== 'object' || Array.isArray(part)) throw invalid(pat, `${pat} must be an object`);
        readPart(part as Json, pat, x.role as string);
      });
    } else if (typeof c !== 'string') throw invalid(`${at}.content`, `${at}.content must be a string or a list of content parts`);
  });
  return m as ChatMessage[];
}

/** Media OpenAI's chat takes that no model here does yet: refused by name. */
const MEDIA_PARTS = new Set(['input_audio', 'audio_url', 'video_url', 'file']);
const DETAILS = new Set(['auto', 'low', 'high']);

/** One content part: text anywhere, `image_url` in user turns (whether the model takes images is the endpoint's check). */
function readPart(p: Json, pat: string, role: string): void {
  if (p.type === 'text') {
    if (typeof p.text !== 'string') throw invalid(pat, `${pat}.text must be a string`);
  } else if (p.type === 'image_url') {
    if (role !== 'user') throw invalid(pat, `${pat}: image parts are taken in user messages only, not ${role} messages`);
    const img = p.image_url as Json | undefined;
    if (!img || typeof img !== 'object' || typeof img.url !== 'string' || img.url.length === 0)
      throw invalid(`${pat}.image_url.url`, `${pat}.image_url must be {url: "data:image/...;base64,..." or "https://..."}`);
    if (img.detail !== undefined && !DETAILS.has(img.detail as string))
      throw invalid(`${pat}.image_url.detail`, `${pat}.image_url.detail must be one of auto, low, high; got ${JSON.stringify(img.detail)}`);
  } else if (MEDIA_PARTS.has(p.type as string)) {
    throw unsupported(pat, `content of type ${JSON.stringify(p.type)} (no model here takes it; text and image_url parts are)`);
  } else {
    throw invalid(pat, `${pat}.type must be "text" or "image_url"; got ${JSON.stringify(p.type)}`);
  }
}

function readTools(t: unknown, param: string): ChatTool[] {
  if (!Array.isArray(t)) throw invalid(param, `${param} must be a list of {type: "function", function: {name, parameters}}`);
  t.forEach((tool: unknown, i) => {
    const at = `${param}[${i}]`;
    const x = tool as Json;
    if (!x || typeof x !== 'object' || x.type !== 'function' || !x.function || typeof x.function !== 'object')
      throw invalid(param, `${at} must be {type: "function", function: {name, ...}}`);
    const fn = x.function as Json;
    if (typeof fn.name !== 'string' || fn.name.length === 0) throw invalid(param, `${at}.function.name must be a non-empty string`);
    if (fn.strict !== undefined && fn.strict !== null && typeof fn.strict !== 'boolean') throw invalid(param, `${at}.function.strict must be true or false; got ${JSON.stringify(fn.strict)}`);
  });
  return t as ChatTool[];
}

function readToolChoice(c: unknown, param: string): ToolChoice {
  if (c === 'none' || c === 'auto' || c === 'required') return c;
  if (typeof c === 'object' && (c as Json).type === 'function') {
    const fn = (c as Json).function as Json | undefined;
    const name = fn && typeof fn === 'object' ? fn.name : undefined;
    if (typeof name !== 'string') throw invalid(param, `${param} {type: "function"} needs function: {name}`);
    return { type: 'function', function: { name } };
  }
  throw invalid(param, `${param} must be "none", "auto", "required" or {type: "function", function: {name}}; got ${JSON.stringify(c)}`);
}

/** A forced tool choice needs the tools it forces. */
function checkToolChoice(c: ToolChoice | undefined, tools: ChatTool[] | undefined): void {
  if (c === 'required' && !tools?.length) throw invalid('tool_choice', 'tool_choice "required" needs tools');
  if (typeof c === 'object' && !tools?.some((t) => t.function.name === c.function.name))
    throw invalid('tool_choice', `tool_choice names ${JSON.stringify(c.function.name)}, which is not in tools`);
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
  /** SGLang's return_hidden_states: the final hidden state the last token was drawn from. */
  hidden_states?: number[];
  sglext?: RoutedExpertsExt;
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
  /** On the finish chunk, with return_hidden_states (as SGLang streams it). */
  hidden_states?: number[];
}

export interface ChatChunkChoice {
  index: number;
  delta: ChatDelta;
  logprobs: ChatLogprobs | null;
  finish_reason: ChatFinishReason;
  matched_stop?: string | number | null;
  sglext?: RoutedExpertsExt;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: ChatChunkChoice[];
  usage?: Usage | null;
}
