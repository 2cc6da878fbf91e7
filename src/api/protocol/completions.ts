/**
 * `POST /v1/completions`: the request as a field table in OpenAI's field order (extensions after
 * it, the shared ones in SAMPLING_FIELDS), its reading, and the response and stream-chunk shapes.
 */
import { invalid } from '../errors';
import { checkStreamOptions, refuseUnsupported, SAMPLING_FIELDS, streamOptionsField, withStructured, type RoutedExpertsExt, type SamplingFields, type Usage } from './common';
import { asBody, bool, custom, field, int, readFields, str, type FieldsOf } from './field';

/** One prompt: text, token ids, or ids mixed with text (llama.cpp). */
export type PromptInput = string | number[] | Array<string | number>;

export const MAX_LOGPROBS = 20;
export const MAX_N = 128;

export const COMPLETION_FIELDS = {
  model: field(str, { required: true, doc: 'The model id; `"default"` is the only loaded model.' }),
  prompt: field(custom(readPrompt), {
    required: true,
    doc: 'A string, a list of strings (a batch), token ids, a list of token-id lists, or ids mixed with strings; read as a list of prompts.',
  }),
  best_of: field(int({ min: 1, max: MAX_N }), { doc: 'Generate best_of completions per prompt and return the n with the highest cumulative logprob (absent: n).' }),
  echo: field(bool, { default: false, doc: 'Return the prompt in front of the completion.' }),
  // frequency_penalty, logit_bias: SAMPLING_FIELDS
  logprobs: field(int({ min: 0, max: MAX_LOGPROBS }), { doc: 'Return the logprobs of this many most likely tokens per position, and of the chosen one.' }),
  max_tokens: field(int({ min: -1 }), { doc: 'Tokens to generate at most (-1 or absent: until EOS or the end of the context).' }),
  n: field(int({ min: 1, max: MAX_N }), { default: 1, doc: 'Completions per prompt.' }),
  // presence_penalty, seed, stop: SAMPLING_FIELDS
  stream: field(bool, { default: false, doc: 'Send partial completions as server-sent events.' }),
  stream_options: streamOptionsField,
  suffix: field(str, { doc: 'Text after the completion: fill-in-the-middle, for models with FIM tokens.' }),
  // temperature, top_p: SAMPLING_FIELDS
  user: field(str, { doc: 'An end-user id; accepted and ignored.' }),
  // ---- extensions: SAMPLING_FIELDS' ----
  ...SAMPLING_FIELDS,
};

export type CompletionRequest = FieldsOf<typeof COMPLETION_FIELDS> & Pick<SamplingFields, 'structured'>;

/** Validates a parsed JSON body into a `CompletionRequest`; throws a 400 naming the field. */
export function parseCompletionRequest(raw: unknown): CompletionRequest {
  const body = asBody(raw);
  refuseUnsupported(body);
  const r = readFields(COMPLETION_FIELDS, body);
  if (r.best_of !== undefined && r.best_of < r.n) throw invalid('best_of', `best_of must be at least n (${r.n}); got ${r.best_of}`);
  if (r.best_of !== undefined && r.best_of > r.n && r.stream) throw invalid('best_of', 'best_of greater than n cannot be streamed');
  checkStreamOptions(r);
  return withStructured(r);
}

const isId = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x) && x >= 0;

/**
 * The prompt forms as a list of prompts: a string or an id list is one prompt; a list of strings
 * or of lists is a batch; a list mixing ids and strings is one prompt (llama.cpp).
 */
function readPrompt(p: unknown, param: string): PromptInput[] {
  const bad = () =>
    invalid(param, `${param} must be a string, a list of strings, a list of token ids, a list of token-id lists, or token ids mixed with strings`);
  if (typeof p === 'string') return [p];
  if (!Array.isArray(p)) throw bad();
  if (p.length === 0) throw invalid(param, `${param} must not be an empty list`);
  if (p.every((x) => typeof x === 'string')) return p as string[];
  if (p.every((x) => isId(x) || typeof x === 'string')) return [p as Array<string | number>];
  if (p.every((x) => Array.isArray(x))) {
    for (const x of p as unknown[][]) {
      if (x.length === 0) throw invalid(param, `${param} must not contain an empty token list`);
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
  /** SGLang's return_hidden_states: the final hidden state the last token was drawn from (on the finish chunk when streamed). */
  hidden_states?: number[];
  /** With return_routed_experts (`RoutedExpertsExt`, ./chat.ts). */
  sglext?: RoutedExpertsExt;
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
