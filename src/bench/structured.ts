/**
 * The per-token cost of structured output: the bench's decode run repeated under a grammar, so
 * each step also computes xgrammar's bitmask on the CPU, uploads it and runs the apply_mask kernel.
 */
import type { ConstraintSpec } from '../structured/grammar';

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
