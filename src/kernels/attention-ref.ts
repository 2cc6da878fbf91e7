/**
 * Plain-loop reference for causal (optionally sliding-window) or bidirectional GQA attention over a ragged batch, independent of paging: each
 * sequence's K/V history is dense, `[len, nKv, headDim]`, in float64 arithmetic.
 */
export interface AttentionRefArgs {
  q: Float32Array; // [T, nHeads, headDim]
  keys: readonly Float32Array[]; // per sequence slot: [len, nKv, headDim]
  values: readonly Float32Array[];
  tokenSeq: ArrayLike<number>; // [T] sequence slot of each token
  positions: ArrayLike<number>; // [T] position of each token; it sees keys 0..position
  /** Sliding window: a token at position p sees only keys p - window < j <= p. null/absent: all. */
  window?: number | null;
  /**
   * false: each token sees every key of its sequence's history, before and after it (an encoder's
   * bidirectional attention); its position then only names its row. Default true.
   */
  causal?: boolean;
  /**
   * With `causal: false`: a token at position p sees only keys p - halfWindow <= j <= p + halfWindow
   * (a symmetric sliding window, EmbeddingGemma's local layers). null/absent/0: all.
   */
  halfWindow?: number | null;
  /** What q·k is multiplied by. Default 1/sqrt(headDim). */
  scale?: number;
  /** Scaled scores s become tanh(s / softcap) * softcap before the softmax. null/absent: none. */
  softcap?: number | null;
  nHeads: number;
  nKv: number;
  headDim: number;
}

/** softmax(cap(q·kᵀ · scale)) · v for each token and head: `[T, nHeads, headDim]`. */
export function attentionRef(a: AttentionRefArgs): Float32Array {
  const { nHeads, nKv, headDim: D } = a;
  const T = a.positions.length;
  const group = nHeads / nKv;
  const scale = a.scale ?? 1 / Math.sqrt(D);
  const cap = a.softcap ?? null;
  const out = new Float32Array(T * nHeads * D);
  for (let t = 0; t < T; t++) {
    const K = a.keys[a.tokenSeq[t]!]!;
    const V = a.values[a.tokenSeq[t]!]!;
    const len = a.causal === false ? K.length / (nKv * D) : a.positions[t]! + 1;
    if (K.length < len * nKv * D) throw new RangeError(`token ${t} at position ${len - 1} is past its sequence's history`);
    const hw = a.causal === false ? (a.halfWindow ?? 0) : 0;
    const first = hw ? Math.max(0, a.positions[t]! - hw) : a.window ? Math.max(0, len - a.window) : 0; // first visible key
    const last = hw ? Math.min(len, a.positions[t]! + hw + 1) : len; // past the last visible key
    for (let h = 0; h < nHeads; h++) {
      const kh = Math.floor(h / group);
      const qOff = (t * nHeads + h) * D;
      const scores = new Float64Array(len);
      let max = -Infinity;
      for (let j = first; j < last; j++) {
        let s = 0;
        for (let d = 0; d < D; d++) s += a.q[qOff + d]! * K[(j * nKv + kh) * D + d]!;
        scores[j] = cap === null ? s * scale : Math.tanh((s * scale) / cap) * cap;
        max = Math.max(max, scores[j]!);
      }
      let sum = 0;
      for (let j = first; j < last; j++) sum += scores[j] = Math.exp(scores[j]! - max);
      for (let d = 0; d < D; d++) {
        let o = 0;
        for (let j = first; j < last; j++) o += scores[j]! * V[(j * nKv + kh) * D + d]!;
        out[qOff + d] = o / sum;
      }
    }
  }
  return out;
}
