/**
 * `POST /v1/completions`: the request in OpenAI's field order (extensions after it), its
 * validation, and the response and stream-chunk shapes.
 */
import { invalid } from '../errors';
import { asBody, bool, int, readSamplingFields, readStreamOptions, refuseUnsupported, str, type Json, type SamplingFields, type StreamOptions, type Usage } from './common';

/** One prompt: text, token ids, or ids mixed with text (llama.cpp). */
export type PromptInput = string | number[] | Array<string | number>;

export interface CompletionRequest extends SamplingFields {
  /** The model id; `"default"` is the only loaded model. */
  model: string;
  /** A string, a list of strings (a batch), token ids, a list of token-id lists, or ids mixed with strings. */
  prompt: PromptInput[];
  /** Generate best_of completions per prompt and return the n with the highest cumulative logprob. */
  best_of?: number;
  /** Return the prompt in front of the completion. */
  echo?: boolean;
  // frequency_penalty, logit_bias: see SamplingFields
  /** Return the logprobs of this many most likely tokens per position (0..20), and of the chosen one. */
  logprobs?: number;
  /** Tokens to generate at most (-1 or absent: until EOS or the end of the context). */
  max_tokens?: number;
  /** Completions per prompt. */
  n?: number;
  // presence_penalty, seed, stop: see SamplingFields
  /** Send partial completions as server-sent events. */
  stream?: boolean;
  /** Options of the stream (only with `stream: true`). */
  stream_options?: StreamOptions;
  /** Text after the completion: fill-in-the-middle, for models with FIM tokens. */
  suffix?: string;
  // temperature, top_p: see SamplingFields
  /** An end-user id; accepted and ignored. */
  user?: string;
  // ---- extensions: the rest of SamplingFields ----
}

export const MAX_LOGPROBS = 20;
export const MAX_N = 128;

/** Validates a parsed JSON body into a `CompletionRequest`; throws a 400 naming the field. */
export function parseCompletionRequest(raw: unknown): CompletionRequest {
  const b = asBody(raw);
  refuseUnsupported(b);
  const model = str(b, 'model', true)!;
  const prompt = readPrompt(b);
  const n = int(b, 'n', { min: 1, max: MAX_N });
  const bestOf = int(b, 'best_of', { min: 1, max: MAX_N });
  const stream = bool(b, 'stream');
  if (bestOf !== undefined && bestOf < (n ?? 1)) throw invalid('best_of', `best_of must be at least n (${n ?? 1}); got ${bestOf}`);
  if (bestOf !== undefined && bestOf > (n ?? 1) && stream) throw invalid('best_of', 'best_of greater than n cannot be streamed');
  return {
    ...readSamplingFields(b),
    model,
    prompt,
    best_of: bestOf,
    echo: bool(b, 'echo'),
    logprobs: int(b, 'logprobs', { min: 0, max: MAX_LOGPROBS }),
    max_tokens: int(b, 'max_tokens', { min: -1 }),
    n,
    stream,
    stream_options: readStreamOptions(b, stream),
    suffix: str(b, 'suffix'),
    user: str(b, 'user'),
  };
}

const isId = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x) && x >= 0;

/**
 * The prompt forms as a list of prompts: a string or an id list is one prompt; a list of strings
 * or of lists is a batch; a list mixing ids and strings is one prompt (llama.cpp).
 */
function readPrompt(b: Json): PromptInput[] {
  const p = b.prompt;
  const bad = () =>
    invalid('prompt', 'prompt must be a string, a list of strings, a list of token ids, a list of token-id lists, or token ids mixed with strings');
  if (p === undefined || p === null) throw invalid('prompt', 'prompt is required', 'missing_required_parameter');
  if (typeof p === 'string') return [p];
  if (!Array.isArray(p)) throw bad();
  if (p.length === 0) throw invalid('prompt', 'prompt must not be an empty list');
  if (p.every((x) => typeof x === 'string')) return p as string[];
  if (p.every((x) => isId(x) || typeof x === 'string')) return [p as Array<string | number>];
  if (p.every((x) => Array.isArray(x))) {
    for (const x of p as unknown[][]) {
      if (x.length === 0) throw invalid('prompt', 'prompt must not contain an empty token list');
      if (!x.every((y) => isId(y) || typeof y === 'string')) throw bad();
    }
    return p as PromptInput[];
  }
  throw bad();
}

// ---------------------------------------------------------------------------------------------
// Responses

/** OpenAI's completions logprobs: parallel lists, one entry per token. */
export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: Array<number | null>;
  top_logprobs: Array<Record<string, number> | null>;
  text_offset: number[];
}

export type CompletionFinishReason = 'stop' | 'length' | 'abort' | null;

export interface CompletionChoice {
  index: number;
  text: string;
  logprobs: CompletionLogprobs | null;
  finish_reason: CompletionFinishReason;
  /** SGLang: the stop string or token id that ended the choice; null for length/abort. */
  matched_stop: string | number | null;
}

export interface CompletionResponse {
  id: string;
  object: 'text_completion';
  /** Seconds since the epoch. */
  created: number;
  model: string;
  choices: CompletionChoice[];
  usage: Usage;
}

/** A streamed chunk: the same object with partial choices; `usage` on the last one when asked. */
export interface CompletionChunk {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: CompletionChoice[];
  usage?: Usage | null;
}
