/**
 * What the completions and chat protocols share: the sampling and stopping fields as one table
 * (`SAMPLING_FIELDS`), stream options, usage, and the refusal of fields we know but do not
 * support yet. Field tables and how they are read: field.ts.
 */
import { MTP_DEFAULT_GUESSES, MTP_MAX_GUESSES } from '../../engine/mtp-proposer';
import type { GenerateRequest, SamplingParams } from '../../engine/types';
import type { ConstraintSpec } from '../../structured/spec';
import { ApiError, invalid, unsupported } from '../errors';
import { checkPatternLength } from '../limits';
import type { TextOptions } from '../stop';
import { bool, custom, field, int, intList, num, obj, readFields, refine, show, str, strings, type FieldsOf, type Json } from './field';
import { oneConstraint, STRUCTURED_FIELDS } from './structured';

/**
 * Where a shared field's value goes (`into`, gathered by `resolve`): the engine's sampling
 * parameters (`dry` and `mirostat` are their nested groups), the rest of the backend's request,
 * or the API's own stopping and detokenizing on the text.
 */
type SamplingInto =
  | readonly ['sampling', Exclude<keyof SamplingParams, 'dry' | 'mirostat' | 'logprobs' | 'topLogprobs'>]
  | readonly ['dry', keyof SamplingParams['dry']]
  | readonly ['mirostat', keyof SamplingParams['mirostat']]
  | readonly ['generate', keyof Omit<GenerateRequest, 'signal' | 'constraint'>]
  | readonly ['text', keyof TextOptions];

const logitBias = custom((v, param) => {
  const bias = obj.read(v, param);
  for (const [k, b] of Object.entries(bias)) {
    if (!/^\d+$/.test(k)) throw invalid(param, `${param} keys must be token ids (integers as strings); got ${show(k)}`);
    if (typeof b !== 'number' || !(b >= -100 && b <= 100)) throw invalid(param, `${param} values must be numbers from -100 to 100; got ${show(b)} for token ${k}`);
  }
  return bias as Record<string, number>;
});

const regexes = refine(strings({ nonEmpty: true }), (list, param) => {
  for (const s of list) {
    checkPatternLength(s, param);
    try {
      new RegExp(s, 'u');
    } catch (e) {
      throw invalid(param, `${param} ${show(s)} is not a valid regular expression: ${(e as Error).message}`);
    }
  }
});

const positive = num({ min: 0, minExclusive: true });

/** OpenAI's Predicted Outputs: `{ type: "content", content }`, content a string or text parts; its text. */
const prediction = custom((v, param) => {
  const o = obj.read(v, param);
  if (o.type !== 'content') throw invalid(`${param}.type`, `${param}.type must be "content"; got ${show(o.type)}`);
  const c = o.content;
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) throw invalid(`${param}.content`, `${param}.content must be a string or a list of text parts; got ${show(c)}`);
  return c
    .map((part: unknown, i) => {
      const p = part as Json | null;
      if (p === null || typeof p !== 'object' || p.type !== 'text' || typeof p.text !== 'string') throw invalid(`${param}.content[${i}]`, `${param}.content[${i}] must be {"type": "text", "text": string}; got ${show(part)}`);
      return p.text;
    })
    .join('');
});

/**
 * `speculative: { type: "ngram", n, k }`: prompt-lookup decoding's match and proposal lengths;
 * `{ type: "mtp", k }`: the model's MTP head, k chained guesses per step (1..MTP_MAX_GUESSES).
 */
const speculative = custom((v, param): { type: 'ngram'; n: number; k: number } | { type: 'mtp'; k: number } => {
  const o = obj.read(v, param);
  if (o.type === 'mtp') return { type: 'mtp', k: int({ min: 1, max: MTP_MAX_GUESSES }).read(o.k ?? MTP_DEFAULT_GUESSES, `${param}.k`) };
  if (o.type !== 'ngram') throw invalid(`${param}.type`, `${param}.type must be "ngram" or "mtp"; got ${show(o.type)}`);
  return { type: 'ngram', n: int({ min: 1, max: 8 }).read(o.n ?? 3, `${param}.n`), k: int({ min: 1, max: 16 }).read(o.k ?? 8, `${param}.k`) };
});

/**
 * The sampling and stopping fields both endpoints take, OpenAI's first (in its documentation's
 * order), then the extensions (SGLang, vLLM, llama.cpp, mistral.rs). A new field is one row here.
 */
export const SAMPLING_FIELDS = {
  frequency_penalty: field(num({ min: -2, max: 2 }), { default: 0, into: ['sampling', 'frequencyPenalty'], doc: 'Penalises tokens by how often they appeared in the output so far.' }),
  logit_bias: field(logitBias, {
    default: {},
    into: ['sampling', 'logitBias'],
    map: (bias: Record<string, number>) => Object.fromEntries(Object.entries(bias).map(([k, b]) => [Number(k), b])),
    doc: 'Token id (as a string key) → bias added to its logit (-100 bans, 100 forces).',
  }),
  presence_penalty: field(num({ min: -2, max: 2 }), { default: 0, into: ['sampling', 'presencePenalty'], doc: 'Penalises tokens that appeared in the output at all.' }),
  prediction: field(prediction, {
    doc: 'Predicted Outputs: `{"type": "content", "content": text}`, text the output is expected to largely repeat; its tokens are verified several per step (the output is the same), and usage counts `accepted_prediction_tokens` and `rejected_prediction_tokens`.',
  }),
  seed: field(int(), { into: ['sampling', 'seed'], doc: 'Same seed, same output (absent: a random seed per request).' }),
  stop: field(strings({ nonEmpty: true }), { default: [], into: ['text', 'stop'], doc: 'Strings that end generation before the first of them (which is not returned).' }),
  temperature: field(num({ min: 0, max: 2 }), { default: 1, modelDefault: true, into: ['sampling', 'temperature'], doc: '0 is greedy.' }),
  top_p: field(num({ min: 0, max: 1, minExclusive: true }), {
    default: 1,
    modelDefault: true,
    into: ['sampling', 'topP'],
    doc: 'Nucleus sampling: keep the smallest set of tokens whose probability reaches top_p.',
  }),

  // ---- extensions ----
  top_k: field(int({ min: -1 }), { default: 0, modelDefault: true, into: ['sampling', 'topK'], map: (k: number) => (k < 0 ? 0 : k), doc: 'Keep the k most likely tokens (-1 or 0: off).' }),
  min_p: field(num({ min: 0, max: 1 }), { default: 0, modelDefault: true, into: ['sampling', 'minP'], doc: "Drop tokens below min_p × the top token's probability." }),
  repetition_penalty: field(positive, { default: 1, modelDefault: true, into: ['sampling', 'repetitionPenalty'], doc: 'Multiplicative penalty on every token seen, prompt included (1: off).' }),
  min_tokens: field(int({ min: 0 }), { default: 0, into: ['generate', 'minTokens'], doc: 'Generate at least this many tokens before EOS or a stop token may end it.' }),
  ignore_eos: field(bool, { default: false, into: ['generate', 'ignoreEos'], doc: 'Keep going past EOS.' }),
  truncate_sequence: field(bool, { default: false, doc: 'Cut a prompt that does not fit the context (keeping its end) instead of refusing it.' }),
  stop_token_ids: field(intList(), { default: [], into: ['generate', 'stopTokenIds'], doc: 'Token ids that end generation.' }),
  stop_regex: field(regexes, { default: [], into: ['text', 'stopRegex'], doc: 'Regular expressions that end generation where they match.' }),
  no_stop_trim: field(bool, { default: false, into: ['text', 'noStopTrim'], doc: 'Keep the matched stop string (or stop token) in the output.' }),
  skip_special_tokens: field(bool, { default: true, into: ['text', 'skipSpecialTokens'], doc: 'Leave control tokens out of the text.' }),
  // llama.cpp's DRY and mirostat defaults.
  dry_multiplier: field(num({ min: 0 }), { default: 0, into: ['dry', 'multiplier'], doc: 'DRY (don\'t repeat yourself) penalty strength (0: off).' }),
  dry_base: field(num({ min: 1 }), { default: 1.75, into: ['dry', 'base'], doc: "DRY's exponential base." }),
  dry_allowed_length: field(int({ min: 0 }), { default: 2, into: ['dry', 'allowedLength'], doc: 'Repeats up to this many tokens go unpenalised by DRY.' }),
  dry_sequence_breakers: field(strings(), { default: ['\n', ':', '"', '*'], into: ['dry', 'sequenceBreakers'], doc: "Strings that break DRY's repeat matching." }),
  mirostat: field(int<0 | 1 | 2>({ min: 0, max: 2 }), { default: 0, into: ['mirostat', 'mode'], doc: '0 off, 1 mirostat, 2 mirostat 2.0.' }),
  mirostat_tau: field(positive, { default: 5, into: ['mirostat', 'tau'], doc: "Mirostat's target surprise." }),
  mirostat_eta: field(positive, { default: 0.1, into: ['mirostat', 'eta'], doc: "Mirostat's learning rate." }),
  cache_prompt: field(bool, { default: true, into: ['generate', 'cachePrompt'], doc: 'Reuse the KV cache of a prompt prefix shared with earlier requests.' }),
  return_hidden_states: field(bool, {
    default: false,
    into: ['generate', 'returnHiddenStates'],
    doc: "SGLang: each choice carries `hidden_states`, the final hidden state (after the output norm) its last token was drawn from.",
  }),
  return_routed_experts: field(bool, {
    default: false,
    into: ['generate', 'returnRoutedExperts'],
    doc: "SGLang: each choice carries `sglext.routed_experts`, base64 of int32 [tokens][layers][k]: the experts every layer routed each generated token's row to (every layer listed; a dense layer of a model that mixes them reads k times -1). A model without experts answers 400.",
  }),
  speculative: field(speculative, {
    doc: 'Speculative decoding by n-gram lookup: `{"type": "ngram", "n": 3, "k": 8}` proposes up to k tokens that followed the last n (or fewer) tokens earlier in the prompt and output; `{"type": "mtp", "k": 1}` the model\'s multi-token-prediction head guesses k tokens per step (1 to 8, default 1), each chained on the head\'s own output (Qwen3.5; a model without one answers 400 naming `speculative`). The output is the same. `prediction` wins when both are given.',
  }),
  lora_path: field(str, { doc: 'SGLang: the loaded LoRA adapter to run with, by name (`model: "<model>:<adapter>"` wins when both are given).' }),
  ...STRUCTURED_FIELDS,
} satisfies Record<string, { doc: string; into?: SamplingInto }>;

/**
 * The shared fields as read, plus `structured`: the one structured-output spec that
 * `response_format`, `json_schema`, `regex`, `ebnf` or `grammar` asks for (not a wire field).
 */
export type SamplingFields = FieldsOf<typeof SAMPLING_FIELDS> & { structured?: ConstraintSpec };

/** The request with `structured`, the one spec its structured-output fields ask for (a 400 when more than one does). */
export function withStructured<R extends FieldsOf<typeof SAMPLING_FIELDS>>(r: R): R & { structured?: ConstraintSpec } {
  return { ...r, structured: oneConstraint(r) };
}

// ---------------------------------------------------------------------------------------------
// Stream options

const STREAM_OPTION_FIELDS = {
  include_usage: field(bool, { doc: 'Send a last chunk with `usage` (and empty `choices`) before `[DONE]`.' }),
  continuous_usage_stats: field(bool, { doc: 'vLLM: every chunk carries the usage so far.' }),
};

export type StreamOptions = FieldsOf<typeof STREAM_OPTION_FIELDS>;

/** The `stream_options` row of both endpoints; allowed only with `stream: true` (checkStreamOptions). */
export const streamOptionsField = field(
  custom((v, param) => {
    try {
      return readFields(STREAM_OPTION_FIELDS, obj.read(v, param), `${param}.`);
    } catch (e) {
      // The message names the inner field; the param stays the one the client sent.
      throw e instanceof ApiError ? invalid(param, e.message) : e;
    }
  }),
  { doc: 'Options of the stream (only with `stream: true`).' },
);

export function checkStreamOptions(r: { stream?: boolean; stream_options?: StreamOptions }): void {
  if (r.stream_options && !r.stream) throw invalid('stream_options', 'stream_options is only allowed when stream is true');
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
  /** With `prediction` or `speculative`: proposed tokens the output took, and those it did not. */
  completion_tokens_details?: { accepted_prediction_tokens: number; rejected_prediction_tokens: number };
}

// ---------------------------------------------------------------------------------------------

/**
 * SGLang's `sglext` of a choice with `return_routed_experts`: `routed_experts`, base64 of int32
 * [generated tokens][layers][k], the experts each layer routed the row each token was drawn from
 * to (most probable first); every layer is listed, a dense one (MoeConfig.denseLayers) as k
 * times -1. On the finish chunk when streamed.
 */
export interface RoutedExpertsExt {
  routed_experts: string;
}

/** The `sglext` of a choice's generated tokens' routed experts ([tokens][layers][k], flat). */
export function routedExpertsExt(ids: readonly number[]): RoutedExpertsExt {
  return { routed_experts: base64Int32(ids) };
}

/** Little-endian int32 values as base64, as SGLang encodes routed experts (numpy's frombuffer int32 reads them back). */
function base64Int32(values: readonly number[]): string {
  return base64Of(new Uint8Array(Int32Array.from(values).buffer));
}

/** Bytes as base64 (btoa over chunks: the browser has no Buffer). */
export function base64Of(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

/**
 * Fields we know and cannot honour yet (none now): refused by name so nobody gets output believing
 * it honoured them; a field supported one day moves from here to a table.
 */
const REFUSED: readonly [key: string, what: string, when: 'given' | 'true'][] = [];

export function refuseUnsupported(b: Json): void {
  for (const [key, what, when] of REFUSED) if (when === 'true' ? b[key] === true : b[key] !== undefined && b[key] !== null) throw unsupported(key, what);
}
