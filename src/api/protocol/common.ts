/**
 * What the completions and chat protocols share: the sampling and stopping fields, usage and
 * stream options, the field readers that validate a JSON body (every failure names its field and
 * the allowed range), and the refusal of fields we know but do not support yet.
 */
import { checkPatternLength } from '../limits';
import type { ConstraintSpec } from '../../structured/grammar';
import { readConstraintSpec } from './structured';
import { invalid, unsupported } from '../errors';

export type Json = Record<string, unknown>;

export interface StreamOptions {
  /** Send a last chunk with `usage` (and empty `choices`) before `[DONE]`. */
  include_usage?: boolean;
  /** vLLM: every chunk carries the usage so far. */
  continuous_usage_stats?: boolean;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

/**
 * The sampling and stopping fields both endpoints take, OpenAI's first, then the extensions
 * (SGLang, vLLM, llama.cpp, mistral.rs) in a marked section.
 */
export interface SamplingFields {
  /** Penalises tokens by how often they appeared in the output so far (-2..2). */
  frequency_penalty?: number;
  /** Token id (as a string key) → bias added to its logit (-100..100). */
  logit_bias?: Record<string, number>;
  /** Penalises tokens that appeared in the output at all (-2..2). */
  presence_penalty?: number;
  /** Same seed, same output. */
  seed?: number;
  /** Up to any number of strings; generation stops before the first one (which is not returned). */
  stop?: string[];
  /** 0..2; 0 is greedy. */
  temperature?: number;
  /** Nucleus sampling: keep the smallest set of tokens whose probability reaches top_p (0 < top_p ≤ 1). */
  top_p?: number;

  // ---- extensions ----
  /** Keep the k most likely tokens (-1 or 0 = off). */
  top_k?: number;
  /** Drop tokens below min_p × the top token's probability (0..1). */
  min_p?: number;
  /** Multiplicative penalty on every token seen, prompt included (> 0; 1 = off). */
  repetition_penalty?: number;
  /** Generate at least this many tokens before EOS or a stop token may end it. */
  min_tokens?: number;
  /** Keep going past EOS. */
  ignore_eos?: boolean;
  /** Cut a prompt that does not fit the context (keeping its end) instead of refusing it. */
  truncate_sequence?: boolean;
  /** Token ids that end generation. */
  stop_token_ids?: number[];
  /** Regular expressions that end generation where they match. */
  stop_regex?: string[];
  /** Keep the matched stop string in the output. */
  no_stop_trim?: boolean;
  /** Leave control tokens out of the text (default true). */
  skip_special_tokens?: boolean;
  /** DRY penalty strength (0 = off). */
  dry_multiplier?: number;
  /** DRY's exponential base (≥ 1). */
  dry_base?: number;
  /** Repeats up to this many tokens go unpenalised by DRY. */
  dry_allowed_length?: number;
  /** Strings that break DRY's repeat matching. */
  dry_sequence_breakers?: string[];
  /** 0 off, 1 mirostat, 2 mirostat 2.0. */
  mirostat?: 0 | 1 | 2;
  /** Mirostat's target surprise (> 0). */
  mirostat_tau?: number;
  /** Mirostat's learning rate (> 0). */
  mirostat_eta?: number;
  /** Reuse the KV cache of a shared prompt prefix (default true). */
  cache_prompt?: boolean;
  /**
   * Structured output, read from `response_format`, `json_schema`, `regex`, `ebnf` or `grammar`
   * (src/api/protocol/structured.ts): not a wire field itself.
   */
  structured?: ConstraintSpec;
}

// ---------------------------------------------------------------------------------------------
// Field readers. Absent and null both mean "not given", as in OpenAI's API.

const show = (v: unknown) => {
  const s = JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 60 ? s.slice(0, 57) + '...' : s;
};

export function num(body: Json, key: string, range: { min?: number; max?: number; minExclusive?: boolean; int?: boolean } = {}): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  const what = range.int ? 'an integer' : 'a number';
  const bounds =
    range.min !== undefined && range.max !== undefined
      ? ` ${range.minExclusive ? 'greater than' : 'from'} ${range.min} ${range.minExclusive ? 'and at most' : 'to'} ${range.max}`
      : range.min !== undefined
        ? ` ${range.minExclusive ? 'greater than' : 'at least'} ${range.min}`
        : range.max !== undefined
          ? ` at most ${range.max}`
          : '';
  const fail = () => invalid(key, `${key} must be ${what}${bounds}; got ${show(v)}`);
  if (typeof v !== 'number' || !Number.isFinite(v) || (range.int && !Number.isInteger(v))) throw fail();
  if (range.min !== undefined && (range.minExclusive ? v <= range.min : v < range.min)) throw fail();
  if (range.max !== undefined && v > range.max) throw fail();
  return v;
}

export function int(body: Json, key: string, range: { min?: number; max?: number } = {}): number | undefined {
  return num(body, key, { ...range, int: true });
}

export function bool(body: Json, key: string): boolean | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw invalid(key, `${key} must be true or false; got ${show(v)}`);
  return v;
}

export function str(body: Json, key: string, required = false): string | undefined {
  const v = body[key];
  if (v === undefined || v === null) {
    if (required) throw invalid(key, `${key} is required`, 'missing_required_parameter');
    return undefined;
  }
  if (typeof v !== 'string') throw invalid(key, `${key} must be a string; got ${show(v)}`);
  return v;
}

export function oneOf<T extends string>(body: Json, key: string, allowed: readonly T[]): T | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || !allowed.includes(v as T)) throw invalid(key, `${key} must be one of ${allowed.map((a) => `"${a}"`).join(', ')}; got ${show(v)}`);
  return v as T;
}

export function obj(body: Json, key: string): Json | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) throw invalid(key, `${key} must be an object; got ${show(v)}`);
  return v as Json;
}

/** A string or a list of strings, as a list. */
export function strings(body: Json, key: string, opts: { nonEmpty?: boolean } = {}): string[] | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  const list = typeof v === 'string' ? [v] : v;
  if (!Array.isArray(list) || !list.every((s) => typeof s === 'string'))
    throw invalid(key, `${key} must be a string or a list of strings; got ${show(v)}`);
  if (opts.nonEmpty && list.some((s) => s.length === 0)) throw invalid(key, `${key} must not contain empty strings`);
  return list as string[];
}

export function intList(body: Json, key: string, min = 0): number[] | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'number' && Number.isInteger(x) && x >= min))
    throw invalid(key, `${key} must be a list of integers ≥ ${min}; got ${show(v)}`);
  return v as number[];
}

/** The request body as an object, or a 400 naming what it is instead. */
export function asBody(v: unknown): Json {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw invalid(null, `the request body must be a JSON object; got ${show(v)}`);
  return v as Json;
}

// ---------------------------------------------------------------------------------------------

/** Reads and range-checks the fields of `SamplingFields`. */
export function readSamplingFields(b: Json): SamplingFields {
  const logitBias = obj(b, 'logit_bias');
  if (logitBias) {
    for (const [k, v] of Object.entries(logitBias)) {
      if (!/^\d+$/.test(k)) throw invalid('logit_bias', `logit_bias keys must be token ids (integers as strings); got ${show(k)}`);
      if (typeof v !== 'number' || !(v >= -100 && v <= 100)) throw invalid('logit_bias', `logit_bias values must be numbers from -100 to 100; got ${show(v)} for token ${k}`);
    }
  }
  const topK = int(b, 'top_k', { min: -1 });
  const mirostat = int(b, 'mirostat', { min: 0, max: 2 }) as 0 | 1 | 2 | undefined;
  return {
    frequency_penalty: num(b, 'frequency_penalty', { min: -2, max: 2 }),
    logit_bias: logitBias as Record<string, number> | undefined,
    presence_penalty: num(b, 'presence_penalty', { min: -2, max: 2 }),
    seed: int(b, 'seed'),
    stop: strings(b, 'stop', { nonEmpty: true }),
    temperature: num(b, 'temperature', { min: 0, max: 2 }),
    top_p: num(b, 'top_p', { min: 0, max: 1, minExclusive: true }),
    top_k: topK,
    min_p: num(b, 'min_p', { min: 0, max: 1 }),
    repetition_penalty: num(b, 'repetition_penalty', { min: 0, minExclusive: true }),
    min_tokens: int(b, 'min_tokens', { min: 0 }),
    ignore_eos: bool(b, 'ignore_eos'),
    truncate_sequence: bool(b, 'truncate_sequence'),
    stop_token_ids: intList(b, 'stop_token_ids'),
    stop_regex: readRegexes(b),
    no_stop_trim: bool(b, 'no_stop_trim'),
    skip_special_tokens: bool(b, 'skip_special_tokens'),
    dry_multiplier: num(b, 'dry_multiplier', { min: 0 }),
    dry_base: num(b, 'dry_base', { min: 1 }),
    dry_allowed_length: int(b, 'dry_allowed_length', { min: 0 }),
    dry_sequence_breakers: strings(b, 'dry_sequence_breakers'),
    mirostat,
    mirostat_tau: num(b, 'mirostat_tau', { min: 0, minExclusive: true }),
    mirostat_eta: num(b, 'mirostat_eta', { min: 0, minExclusive: true }),
    cache_prompt: bool(b, 'cache_prompt'),
    structured: readConstraintSpec(b),
  };
}

function readRegexes(b: Json): string[] | undefined {
  const list = strings(b, 'stop_regex', { nonEmpty: true });
  for (const s of list ?? []) {
    checkPatternLength(s, 'stop_regex');
    try {
      new RegExp(s, 'u');
    } catch (e) {
      throw invalid('stop_regex', `stop_regex ${show(s)} is not a valid regular expression: ${(e as Error).message}`);
    }
  }
  return list;
}

export function readStreamOptions(b: Json, stream: boolean | undefined): StreamOptions | undefined {
  const o = obj(b, 'stream_options');
  if (!o) return undefined;
  if (!stream) throw invalid('stream_options', 'stream_options is only allowed when stream is true');
  const field = (k: string) => {
    try {
      return bool(o, k);
    } catch {
      throw invalid('stream_options', `stream_options.${k} must be true or false; got ${show(o[k])}`);
    }
  };
  return { include_usage: field('include_usage'), continuous_usage_stats: field('continuous_usage_stats') };
}

/**
 * Fields we know and cannot honour yet: LoRA adapters by path, hidden states and MoE routing.
 * Refused by name so nobody gets output believing it honoured them.
 */
export function refuseUnsupported(b: Json): void {
  if (b.lora_path !== undefined && b.lora_path !== null) throw unsupported('lora_path', 'LoRA adapters');
  if (b.return_hidden_states === true) throw unsupported('return_hidden_states', 'returning hidden states');
  if (b.return_routed_experts === true) throw unsupported('return_routed_experts', 'returning routed experts (MoE)');
}
