/**
 * The reference's greedy continuation up to its first near-tie: random weights make some steps'
 * top two logits almost equal, where another backend's rounding may pick the other token.
 */
import { greedy, logitsFor, type ReferenceModel } from '../reference/forward';

/** Greedy ids after `prompt`, cut at the first step whose top-2 logit margin is below `tie`. */
export function stableGreedy(ref: ReferenceModel, prompt: readonly number[], steps: number, tie = 1e-3): number[] {
  const want = greedy(ref, prompt, steps);
  const logits = logitsFor(ref, [...prompt, ...want]);
  const stable = want.findIndex((_, s) => {
    const sorted = [...logits[prompt.length - 1 + s]!].sort((a, b) => b - a);
    return sorted[0]! - sorted[1]! < tie;
  });
  return stable < 0 ? want : want.slice(0, stable);
}
