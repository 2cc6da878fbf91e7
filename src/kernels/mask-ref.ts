/**
 * The token bitmask on the CPU (xgrammar's layout: bit v & 31 of word v >> 5, 1 = allowed): the
 * reference backend's masking and the oracle of the GPU kernel (src/kernels/apply-mask.ts).
 */

/** Bitmask words per sequence for a vocabulary. */
export const maskWords = (vocab: number): number => Math.ceil(vocab / 32);

/** `logits` ([seqs, vocab]) with the ids the mask forbids set to -inf, in place. */
export function applyMaskRef(logits: Float32Array, mask: Uint32Array, vocab: number, seqs = 1): Float32Array {
  const words = maskWords(vocab);
  for (let s = 0; s < seqs; s++) {
    for (let v = 0; v < vocab; v++) {
      if (((mask[s * words + (v >>> 5)]! >>> (v & 31)) & 1) === 0) logits[s * vocab + v] = -Infinity;
    }
  }
  return logits;
}
