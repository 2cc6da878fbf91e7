/**
 * The per-token cost of structured output: the bench's decode run repeated under a grammar, so
 * each step also computes xgrammar's bitmask on the CPU, uploads it and runs the apply_mask kernel;
 * and a forced tool call token by token and with jump-forward decoding (steps and ms per token).
 */
import type { GpuEngine } from '../engine/engine';
import type { GenerateRequest, GenerationResult } from '../engine/types';
import { compileConstraint, type Constraint, type ConstraintSpec } from '../structured/grammar';
import { GREEDY } from '../testing/sampling';

/** ms per generated token from the arrival times of the tokens: the first token (prefill) is excluded. */
export function msPerGeneratedToken(at: number[]): number {
  if (at.length < 2) return NaN;
  return (at[at.length - 1]! - at[0]!) / (at.length - 1);
}

/** Constrained minus unconstrained decode time per token, and the constrained decode rate. */
export function maskOverhead(constrainedMsPerToken: number, freeMsPerToken: number): { maskMsPerToken: number; tokensPerSecond: number } {
  return { maskMsPerToken: constrainedMsPerToken - freeMsPerToken, tokensPerSecond: 1000 / constrainedMsPerToken };
}

/**
 * The grammar the bench decodes under: a JSON object (the json_schema flavour of json_object) whose
 * one property is an array of at least `tokens` strings. A random-weight model under plain
 * `json_object` may close its object after a few tokens (generation then ends with 'stop'); every
 * array item costs at least one token (its closing quote, comma and next opening quote can share
 * one), so this keeps the grammar open for the whole run and the step count equals the unconstrained
 * run's.
 */
export function benchConstraintSpec(tokens: number): ConstraintSpec {
  return {
    kind: 'json_schema',
    schema: {
      type: 'object',
      properties: { items: { type: 'array', items: { type: 'string' }, minItems: tokens + 1 } },
      required: ['items'],
    },
  };
}

/** How the report names the constraint. */
export const BENCH_CONSTRAINT_LABEL = 'json_schema {items: string[] (minItems = tokens + 1)}';

/**
 * The forced tool call the bench decodes (issue #26 point 3): Hermes `<tool_call>` format,
 * tool_choice `required` over one weather tool, as `tools` + `tool_choice` give it. Its fixed
 * text (`<tool_call>\n{"name": "get_weather", "arguments": {"city":"`, `","unit":"`, the enum's
 * rest, the closing `}}\n</tool_call>`) is where jump-forward decoding takes tokens without a draw.
 */
export const BENCH_TOOL_CALL: ConstraintSpec = {
  kind: 'tool_calls',
  format: 'hermes',
  multiple: false,
  tools: [
    {
      name: 'get_weather',
      parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'] },
    },
  ],
};

/** One run of the forced tool call: tokens, engine steps, decode tokens per step and ms per token. */
export interface ToolCallRun {
  tokens: number;
  /** Engine steps, the prompt's included. */
  steps: number;
  /** Tokens after the first ÷ steps after the first (the prompt's step gives the first token). */
  tokensPerStep: number;
  /** Wall ms per token after the first (msPerGeneratedToken). */
  msPerToken: number;
  finishReason: string;
}

export interface ToolCallBench {
  constraint: string;
  /** Token by token: every constrained token waits for its draw's readback and the next mask. */
  tokenByToken: ToolCallRun;
  /** Jump-forward on (the engine's default). */
  jumpForward: ToolCallRun;
  /** Unconstrained, as many tokens as the token-by-token call, for the per-token comparison. */
  free: ToolCallRun;
  /** Jump-forward gave the token-by-token run's tokens (it must). */
  identical: boolean;
}

type BenchEngine = Pick<GpuEngine, 'generate' | 'kvStats' | 'tokenizer' | 'config'>;

/**
 * One greedy generation counted: its ids, the engine's steps, tokens per step after the first
 * (the prompt's), wall ms per token (a step that hands out several tokens gives each the time it
 * reached the CPU) and its result.
 */
export async function countedRun(engine: Pick<GpuEngine, 'generate' | 'kvStats'>, request: Omit<GenerateRequest, 'sampling' | 'stopTokenIds' | 'minTokens'>): Promise<ToolCallRun & { ids: number[]; result: GenerationResult }> {
  const steps = engine.kvStats.steps;
  const t0 = performance.now();
  const at: number[] = [];
  const ids: number[] = [];
  const gen = engine.generate({ sampling: GREEDY, stopTokenIds: [], minTokens: 0, ...request });
  for (let r = await gen.next(); ; r = await gen.next()) {
    if (r.done) {
      const n = engine.kvStats.steps - steps;
      return { ids, tokens: ids.length, steps: n, tokensPerStep: (ids.length - 1) / (n - 1), msPerToken: msPerGeneratedToken(at), finishReason: r.value.finishReason, result: r.value };
    }
    ids.push(r.value.id);
    at.push(performance.now() - t0);
  }
}

async function toolCallRun(engine: BenchEngine, promptIds: number[], maxTokens: number, constraint: Constraint | undefined, jumpForward: boolean): Promise<ToolCallRun & { ids: number[] }> {
  const { result: _, ...run } = await countedRun(engine, { promptIds, maxTokens, ignoreEos: !constraint, cachePrompt: false, constraint, jumpForward });
  return run;
}

/** The forced tool call token by token, then with jump-forward, then unconstrained (greedy, one warm-up run first). */
export async function benchToolCall(engine: BenchEngine, promptIds: number[], maxTokens: number): Promise<ToolCallBench> {
  const compiled = await compileConstraint(engine.tokenizer, BENCH_TOOL_CALL, engine.config.vocabSize);
  const call = async (jumpForward: boolean) => {
    const constraint = await compiled.start();
    try {
      return await toolCallRun(engine, promptIds, maxTokens, constraint, jumpForward);
    } finally {
      constraint.dispose();
    }
  };
  // Warm-up: a step that feeds several tokens and samples may take pipelines a decode step does not.
  await call(true);
  const { ids: slow, ...tokenByToken } = await call(false);
  const { ids: fast, ...jumpForward } = await call(true);
  const { ids: _, ...free } = await toolCallRun(engine, promptIds, tokenByToken.tokens, undefined, false);
  return { constraint: BENCH_TOOL_CALL_LABEL, tokenByToken, jumpForward, free, identical: slow.join() === fast.join() };
}

export const BENCH_TOOL_CALL_LABEL = 'tool_calls (hermes, tool_choice required): get_weather {city: string ≤ 12, unit: celsius|fahrenheit}';
