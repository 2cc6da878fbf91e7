/**
 * The penalties kernel's TypeScript reference (src/kernels/penalties.ts) and the CPU sampler's
 * first processors (src/engine/logit-processors.ts): plain functions over one row of logits.
 */

/** logits[id] += bias for each entry; out-of-vocabulary ids are ignored. */
export function applyLogitBias(logits: Float32Array, bias: Readonly<Record<number, number>>): void {
  for (const key in bias) {
    const id = Number(key);
    if (id >= 0 && id < logits.length) logits[id] += bias[key];
  }
}

/**
 * HF / llama.cpp repetition penalty over every token seen (prompt and output): a positive logit
 * is divided by `penalty`, a negative one multiplied, so the token always becomes less likely.
 */
export function applyRepetitionPenalty(logits: Float32Array, seen: Iterable<number>, penalty: number): void {
  if (penalty === 1) return;
  for (const id of new Set(seen)) {
    if (id < 0 || id >= logits.length) continue;
    logits[id] = logits[id] > 0 ? logits[id] / penalty : logits[id] * penalty;
  }
}

/** OpenAI's formula over the generated tokens: logit −= count·frequency + (count > 0)·presence. */
export function applyFrequencyPresence(logits: Float32Array, generated: readonly number[], frequency: number, presence: number): void {
  if (frequency === 0 && presence === 0) return;
  const counts = new Map<number, number>();
  for (const id of generated) counts.set(id, (counts.get(id) ?? 0) + 1);
  for (const [id, n] of counts) if (id >= 0 && id < logits.length) logits[id] -= n * frequency + presence;
}
