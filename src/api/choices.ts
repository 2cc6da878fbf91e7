/** Pieces both endpoints use to run their choices: request fields to a `ChoiceRequest`, ids, usage. */
import type { Backend, SamplingParams } from '../engine/types';
import { deriveSeed } from '../engine/logit-processors';
import type { CompileOptions, CompiledConstraint } from '../structured/spec';
import { compileForRequest } from './protocol/structured';
import type { ToolCallFormat } from '../text/index';
import { invalid, unsupported } from './errors';
import type { ChatCompletionRequest } from './protocol/chat';
import type { ChoiceRequest, ChoiceUsage } from './generate';
import { SAMPLING_FIELDS, type SamplingFields, type Usage } from './protocol/common';
import { resolve } from './protocol/field';

export function newId(prefix: string): string {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return `${prefix}-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/** OpenAI's `created`: seconds, not milliseconds. */
export const nowSeconds = (): number => Math.floor(Date.now() / 1000);

/**
 * The per-request part of a `ChoiceRequest`: the shared fields resolved into the groups their
 * rows' `into` names (`generate`, `text`); the prompt, its length and the seed are per choice.
 */
export function choiceOptions(r: SamplingFields, backend: Backend, signal: AbortSignal | undefined) {
  return {
    backend,
    signal,
    generate: { ...(resolve(SAMPLING_FIELDS, 'generate', r) satisfies Omit<ChoiceRequest['generate'], 'promptIds' | 'maxTokens' | 'sampling'>), ...speculationOf(r, backend) },
    text: resolve(SAMPLING_FIELDS, 'text', r) satisfies ChoiceRequest['text'],
  };
}

/** The backend's `speculation` from `prediction` (its text as tokens, special tokens as plain text) or `speculative`. */
function speculationOf(r: SamplingFields, backend: Backend): Pick<ChoiceRequest['generate'], 'speculation'> {
  if (r.prediction !== undefined) return { speculation: { prediction: backend.tokenizer.encode(r.prediction, { addSpecialTokens: false, parseSpecial: false }) } };
  const s = r.speculative;
  if (!s) return {};
  return { speculation: s.type === 'mtp' ? { mtp: { k: s.k } } : { ngram: { n: s.n, k: s.k } } };
}

/** The request's structured-output grammar compiled for the backend's tokenizer (a 400 when invalid), if it asked for one. */
export async function structuredGrammar(r: SamplingFields, backend: Backend, compile?: CompileOptions): Promise<CompiledConstraint | undefined> {
  return r.structured ? compileForRequest(backend.tokenizer, backend.config.vocabSize, r.structured, compile) : undefined;
}

/** The grammar that forces tool calls (tool_choice `required` or named) in the template's call format. */
export async function forcedToolGrammar(r: ChatCompletionRequest, format: ToolCallFormat | null, backend: Backend, compile?: CompileOptions): Promise<CompiledConstraint> {
  if (r.structured) throw invalid('tool_choice', `tool_choice ${JSON.stringify(r.tool_choice)} cannot be combined with ${r.structured.param ?? 'response_format'}`);
  if (format === null) throw unsupported('tool_choice', "forcing tool calls for this model's template (it teaches no known tool-call format)");
  const named = typeof r.tool_choice === 'object' ? r.tool_choice.function.name : null;
  const tools = (r.tools ?? []).filter((t) => named === null || t.function.name === named).map((t) => ({ name: t.function.name, parameters: t.function.parameters }));
  const multiple = named === null && r.parallel_tool_calls;
  return compileForRequest(backend.tokenizer, backend.config.vocabSize, { kind: 'tool_calls', format, tools, multiple, param: 'tools' }, compile);
}

/**
 * With tool_choice `auto` and any `strict: true` tool: free text, but a call the model opens must
 * name one of the tools and (for strict tools) follow its parameters schema. Undefined when no
 * tool is strict or tools are off (`none`).
 */
export async function strictToolGrammar(
  r: ChatCompletionRequest,
  format: ToolCallFormat | null,
  backend: Backend,
  compile?: CompileOptions,
): Promise<CompiledConstraint | undefined> {
  const tools = r.tools ?? [];
  if (r.tool_choice === 'none' || !tools.some((t) => t.function.strict === true)) return undefined;
  if (r.structured) throw invalid('tools', `strict tools cannot be combined with ${r.structured.param ?? 'response_format'}`);
  if (format === null) throw unsupported('tools', "strict tools for this model's template (it teaches no known tool-call format)");
  // A call opened in the format must match one of the tags, so non-strict tools are in too, their arguments any object.
  const specTools = tools.map((t) => ({ name: t.function.name, parameters: t.function.strict === true ? t.function.parameters : undefined }));
  return compileForRequest(backend.tokenizer, backend.config.vocabSize, { kind: 'tool_calls_auto', format, tools: specTools, param: 'tools' }, compile);
}

/** Choice j of a prompt gets its own stream of the request's seed (choice 0 the seed itself). */
export function withChoiceSeed(s: SamplingParams, j: number): SamplingParams {
  return s.seed === undefined ? s : { ...s, seed: deriveSeed(s.seed, j) };
}

/**
 * Usage over all choices: each prompt counts once (as OpenAI counts it), completions add up, and
 * cached tokens are the least any choice of a prompt reused (later choices reuse the earlier ones').
 */
export class UsageTracker {
  private readonly prompt = new Map<number, { tokens: number; cached: number }>();
  private completion = 0;
  /** Proposed and accepted tokens over the choices, once a choice reported them (a request that speculates). */
  private speculation: { proposed: number; accepted: number } | null = null;

  constructor(promptLengths: number[]) {
    promptLengths.forEach((n, p) => this.prompt.set(p, { tokens: n, cached: Infinity }));
  }

  /** One more generated token (for continuous usage stats). */
  addToken(): void {
    this.completion++;
  }

  /** A choice of prompt `p` ended; its own count replaces the tokens counted one by one. */
  end(p: number, u: ChoiceUsage, countedTokens: number): void {
    this.completion += u.completionTokens - countedTokens;
    const e = this.prompt.get(p)!;
    e.cached = Math.min(e.cached, u.cachedTokens);
    if (u.speculation) {
      this.speculation ??= { proposed: 0, accepted: 0 };
      this.speculation.proposed += u.speculation.proposed;
      this.speculation.accepted += u.speculation.accepted;
    }
  }

  get usage(): Usage {
    let prompt = 0;
    let cached = 0;
    for (const e of this.prompt.values()) {
      prompt += e.tokens;
      cached += Number.isFinite(e.cached) ? e.cached : 0;
    }
    const s = this.speculation;
    return {
      prompt_tokens: prompt,
      completion_tokens: this.completion,
      total_tokens: prompt + this.completion,
      prompt_tokens_details: { cached_tokens: cached },
      ...(s ? { completion_tokens_details: { accepted_prediction_tokens: s.accepted, rejected_prediction_tokens: s.proposed - s.accepted } } : {}),
    };
  }
}
