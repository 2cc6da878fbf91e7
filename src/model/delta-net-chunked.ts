/**
 * The gated delta rule of model/delta-net.ts (deltaRuleStep) over a sequence's tokens in chunks
 * of C: the chunked (WY / UT-transform) form that flash-linear-attention's chunk_gated_delta_rule,
 * HF's torch_chunk_gated_delta_rule (qwen3_next) and llama.cpp's chunked delta net compute. Equal
 * to the token-by-token recurrence up to rounding; a prefill of T tokens takes T/C state updates
 * (each a few C-row products) plus, within each chunk, C steps of a triangular solve that the
 * chunks run side by side. The reference of shaders/delta_chunk.wgsl (`deltaChunkIntra`) and
 * shaders/delta_chunk_state.wgsl (`deltaChunkState`).
 *
 * Within a chunk of n tokens, per value head (q, k normalised; γ_t = exp(g_t); Γ_t = γ_1⋯γ_t,
 * from the cumulative sum gc_t = g_1 + … + g_t; S₀ the state before the chunk, rows = key dims):
 *   the recurrence S_t = γ_t·S_{t−1} + k_t·u_tᵀ with u_t = β_t(v_t − γ_t·S_{t−1}ᵀk_t) gives
 *   u_t + Σ_{s<t} β_t(Γ_t/Γ_s)(k_t·k_s)·u_s = β_t·v_t − β_t·Γ_t·S₀ᵀk_t, i.e. (I + A)·U = βV − (βΓK)·S₀
 *   with A[t][s] = β_t·exp(gc_t − gc_s)·(k_t·k_s) for s < t (strictly lower). With M = (I + A)⁻¹
 *   (unit lower triangular, by forward substitution: the UT transform):
 *     W = M·(β·Γ·K)  [n, dk],  U = M·(β·V)  [n, dv]              (intra-chunk, no state)
 *     V' = U − W·S₀                                               (the chunk's u_t)
 *     o_t = Γ_t·S₀ᵀq_t + Σ_{s≤t} exp(gc_t − gc_s)(q_t·k_s)·V'_s  (P[t][s] = exp(gc_t − gc_s)(q_t·k_s))
 *     S_n = Γ_n·S₀ + Σ_s exp(gc_n − gc_s)·k_s·V'_sᵀ
 * Decays enter only as exp of differences within a chunk (≤ 1) or Γ_t itself (≤ 1): nothing
 * overflows however strong the decay.
 */
import { deltaNetKeyHead, type DeltaNetConfig } from './config';

/** What the intra-chunk pass leaves for the state pass, per value head and chunk (f32 on the GPU). */
export interface DeltaChunk {
  n: number; // tokens in the chunk (≤ C; the last chunk of a row may be partial)
  gc: Float64Array; // [n] cumulative log decay
  w: Float64Array; // [n, dk] M·(β·Γ·K)
  u: Float64Array; // [n, dv] M·(β·V)
  p: Float64Array; // [n, n] exp(gc_t − gc_s)(q_t·k_s) for s ≤ t, 0 above
}

/**
 * Value head h's chunk of tokens t0 … t0 + n − 1: q, k [T, nk·dk] (normalised, q scaled), v [T, nv·dv],
 * g and β [T, nv], as model/delta-net.ts's deltaRuleStep takes them per token.
 */
export function deltaChunkIntra(d: DeltaNetConfig, h: number, q: Float32Array, k: Float32Array, v: Float32Array, g: Float32Array, beta: Float32Array, t0: number, n: number): DeltaChunk {
  const { numKHeads: nk, numVHeads: nv, headKDim: dk, headVDim: dv } = d;
  const kh = deltaNetKeyHead(d, h) * dk;
  const key = (t: number, i: number) => k[(t0 + t) * nk * dk + kh + i]!;
  const dot = (x: Float32Array, t: number, s: number) => {
    let acc = 0;
    for (let i = 0; i < dk; i++) acc += x[(t0 + t) * nk * dk + kh + i]! * key(s, i);
    return acc;
  };
  const b = (t: number) => beta[(t0 + t) * nv + h]!;
  const gc = new Float64Array(n);
  for (let t = 0, acc = 0; t < n; t++) gc[t] = acc += g[(t0 + t) * nv + h]!;
  // The decay-masked products: A strictly lower (β_t·k_t·k_s), P lower with its diagonal (q_t·k_s).
  const m = new Float64Array(n * n);
  const p = new Float64Array(n * n);
  for (let t = 0; t < n; t++)
    for (let s = 0; s <= t; s++) {
      const decay = Math.exp(gc[t]! - gc[s]!);
      p[t * n + s] = decay * dot(q, t, s);
      if (s < t) m[t * n + s] = b(t) * decay * dot(k, t, s);
    }
  // M = (I + A)⁻¹ row by row in place (forward substitution): M[t][c] = −A[t][c] − Σ_{c<j<t} A[t][j]·M[j][c].
  for (let t = 1; t < n; t++) {
    const row = new Float64Array(t);
    for (let c = 0; c < t; c++) {
      let acc = -m[t * n + c]!;
      for (let j = c + 1; j < t; j++) acc -= m[t * n + j]! * m[j * n + c]!;
      row[c] = acc;
    }
    m.set(row, t * n);
  }
  // W = M·(β·Γ·K), U = M·(β·V), M's unit diagonal included.
  const w = new Float64Array(n * dk);
  const u = new Float64Array(n * dv);
  for (let t = 0; t < n; t++)
    for (let s = 0; s <= t; s++) {
      const coef = (s === t ? 1 : m[t * n + s]!) * b(s);
      const kg = coef * Math.exp(gc[s]!);
      for (let i = 0; i < dk; i++) w[t * dk + i] += kg * key(s, i);
      for (let j = 0; j < dv; j++) u[t * dv + j] += coef * v[(t0 + s) * nv * dv + h * dv + j]!;
    }
  return { n, gc, w, u, p };
}

/**
 * Value head h's state pass over one chunk: out [T, nv·dv] gets o_t for the chunk's tokens, and
 * s (nv × dk × dv, as deltaRuleStep's) moves from S₀ to S_n.
 */
export function deltaChunkState(d: DeltaNetConfig, h: number, c: DeltaChunk, s: Float32Array, q: Float32Array, k: Float32Array, t0: number, out: Float32Array): void {
  const { numKHeads: nk, numVHeads: nv, headKDim: dk, headVDim: dv } = d;
  const { n, gc, w, u, p } = c;
  const kh = deltaNetKeyHead(d, h) * dk;
  const sh = h * dk * dv;
  const last = gc[n - 1]!;
  const vNew = new Float64Array(n);
  const o = new Float64Array(n);
  // Each column j of S is its own: the kernel gives columns to invocations.
  for (let j = 0; j < dv; j++) {
    for (let t = 0; t < n; t++) {
      const qt = (t0 + t) * nk * dk + kh;
      let vt = u[t * dv + j]!;
      let ot = 0;
      for (let i = 0; i < dk; i++) {
        const sij = s[sh + i * dv + j]!;
        vt -= w[t * dk + i]! * sij;
        ot += q[qt + i]! * sij;
      }
      vNew[t] = vt;
      o[t] = Math.exp(gc[t]!) * ot;
    }
    for (let t = 0; t < n; t++) {
      let acc = o[t]!;
      for (let r = 0; r <= t; r++) acc += p[t * n + r]! * vNew[r]!;
      out[(t0 + t) * nv * dv + h * dv + j] = acc;
    }
    for (let i = 0; i < dk; i++) {
      let acc = Math.exp(last) * s[sh + i * dv + j]!;
      for (let t = 0; t < n; t++) acc += Math.exp(last - gc[t]!) * k[(t0 + t) * nk * dk + kh + i]! * vNew[t]!;
      s[sh + i * dv + j] = acc;
    }
  }
}

/**
 * deltaRuleStep over `T` tokens in chunks of `chunk` (the last one partial): q, k [T, nk·dk],
 * v and out [T, nv·dv], g and β [T, nv]; s advanced over all of them.
 */
export function deltaRuleChunked(d: DeltaNetConfig, s: Float32Array, q: Float32Array, k: Float32Array, v: Float32Array, g: Float32Array, beta: Float32Array, out: Float32Array, T: number, chunk: number): void {
  for (let t0 = 0; t0 < T; t0 += chunk) {
    const n = Math.min(chunk, T - t0);
    for (let h = 0; h < d.numVHeads; h++) deltaChunkState(d, h, deltaChunkIntra(d, h, q, k, v, g, beta, t0, n), s, q, k, t0, out);
  }
}
