/**
 * Mixture-of-experts routing, the math both forward passes share (the CPU reference runs it;
 * the GPU router kernel, shaders/moe_route.wgsl, is held to it): softmax over every expert's
 * logit, the k most probable kept, optionally renormalised to sum 1 (`MoeConfig`).
 */

export interface Routing {
  /** The k chosen experts, most probable first; among equal probabilities the lower id first. */
  ids: number[];
  /** Their weights: softmax probabilities, renormalised over the k when asked. */
  weights: number[];
}

/** Routes one token from its `logits` (one per expert), in float64. */
export function routeTopK(logits: ArrayLike<number>, k: number, renormalise: boolean): Routing {
  const n = logits.length;
  if (!(Number.isInteger(k) && k >= 1 && k <= n)) throw new RangeError(`top-k of ${k} among ${n} experts`);
  let max = -Infinity;
  for (let e = 0; e < n; e++) max = Math.max(max, logits[e]!);
  const probs = Array.from({ length: n }, (_, e) => Math.exp(logits[e]! - max));
  const sum = probs.reduce((a, b) => a + b, 0);
  // Stable sort: equal probabilities keep ascending ids.
  const order = Array.from({ length: n }, (_, e) => e).sort((a, b) => probs[b]! - probs[a]!);
  const ids = order.slice(0, k);
  let weights = ids.map((e) => probs[e]! / sum);
  if (renormalise) {
    const kept = weights.reduce((a, b) => a + b, 0);
    weights = weights.map((w) => w / kept);
  }
  return { ids, weights };
}
