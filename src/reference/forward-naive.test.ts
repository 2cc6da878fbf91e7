/**
 * The reference against arithmetic we can check without it: a 1-layer, hidden-4 model worked by
 * hand, and an independent whole-sequence implementation (matrices, causal mask, rotate_half)
 * for random small models with GQA, biases, q/k norms and both RoPE styles.
 */
import { describe, expect, it } from 'vitest';
import { layerWindow, mamba2ConvDim, PLAIN_MATH, type ModelConfig } from '../model/config';
import { mamba2Sequence } from '../testing/mamba2-naive';
import { greedy, logitsFor, ReferenceModel } from './forward';
import { MtpReference } from './mtp';
import { randomWeights } from '../testing/random-weights';

const base: ModelConfig = {
  arch: 'llama',
  vocabSize: 4,
  hiddenSize: 4,
  intermediateSize: 4,
  numLayers: 1,
  numHeads: 1,
  numKvHeads: 1,
  headDim: 4,
  rmsNormEps: 0,
  ropeTheta: 10000,
  ropeScaling: null,
  ropeStyle: 'neox',
  maxPositionEmbeddings: 32,
  tieWordEmbeddings: false,
  attentionBias: false,
  qkNorm: false,
  slidingWindow: null,
  noRopeLayers: [],
  qkNormScope: 'head',
  normPlacement: 'pre',
  ...PLAIN_MATH,
  bosTokenId: null,
  eosTokenIds: [],
};

const identity4 = new Float32Array([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]);

describe('reference forward, by hand', () => {
  it('computes the logits of a 1-layer hidden-4 model at positions 0 and 1', () => {
    // Embeddings: token 0 = [2,2,2,2] (rms 2), token 1 = [0,4,0,0] (rms 2); norm weights are ones, eps 0.
    // Wv = Wo = I, gate = 0 (silu(0) = 0, so the FFN adds nothing), output rows pick coordinates.
    const w = new Map<string, Float32Array>([
      ['token_embd.weight', new Float32Array([2, 2, 2, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])],
      ['blk.0.attn_norm.weight', new Float32Array([1, 1, 1, 1])],
      ['blk.0.attn_q.weight', new Float32Array(16)],
      ['blk.0.attn_k.weight', new Float32Array(16)],
      ['blk.0.attn_v.weight', identity4],
      ['blk.0.attn_output.weight', identity4],
      ['blk.0.ffn_norm.weight', new Float32Array([1, 1, 1, 1])],
      ['blk.0.ffn_gate.weight', new Float32Array(16)],
      ['blk.0.ffn_up.weight', new Float32Array(16).fill(1)],
      ['blk.0.ffn_down.weight', new Float32Array(16).fill(1)],
      ['output_norm.weight', new Float32Array([1, 2, 3, 4])],
      ['output.weight', new Float32Array([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1])],
    ]);
    const m = ReferenceModel.fromWeights(base, w);

    // pos 0, token 0: xb = [1,1,1,1]; attention over one position returns v = xb;
    // x = [2,2,2,2] + [1,1,1,1] = [3,3,3,3]; final norm [1,1,1,1] * [1,2,3,4] = [1,2,3,4].
    // logits = [1, 2, 3, 1+2+3+4].
    expect([...m.forward(0, 0)]).toEqual([1, 2, 3, 10]);

    // pos 1, token 1: x = [0,4,0,0], xb = [0,2,0,0]. q = k = 0, so both positions score 0 and
    // attention averages v: ([1,1,1,1] + [0,2,0,0]) / 2 = [0.5,1.5,0.5,0.5]; x = [0.5,5.5,0.5,0.5].
    // rms = sqrt((0.25*3 + 30.25)/4) = sqrt(7.75); normed = x / sqrt(7.75) * [1,2,3,4].
    const r = Math.sqrt(7.75);
    const n = [0.5 / r, (5.5 / r) * 2, (0.5 / r) * 3, (0.5 / r) * 4];
    const got = m.forward(1, 1);
    const want = [n[0], n[1], n[2], n[0] + n[1] + n[2] + n[3]];
    for (let i = 0; i < 4; i++) expect(got[i]).toBeCloseTo(want[i], 6);
  });
});

describe('reference forward, OLMo 2 by hand', () => {
  it('norms each block output, not its input: the FFN adds its post-norm weight whatever its own scale', () => {
    // 1 layer, hidden 4, one head; Wq = Wk = Wv = Wo = I; eps 0. Token 0 = [2,2,2,2] at position 0.
    // Attention over one position returns v = x (no input norm) = [2,2,2,2]; o = [2,2,2,2], its
    // post-norm (weights 1) is [1,1,1,1]: x = [3,3,3,3]. FFN on x itself: gate = up = I, so each
    // entry is s = silu(3)·3, and down = I gives [s,s,s,s]; its post-norm with weights [1,2,3,4] is
    // [1,2,3,4] for any s: x = [4,5,6,7]. Final norm (weights 1) and output = I: x / rms(x).
    const c: ModelConfig = { ...base, arch: 'olmo2', normPlacement: 'post', qkNorm: true, qkNormScope: 'full' };
    const w = new Map<string, Float32Array>([
      ['token_embd.weight', new Float32Array([2, 2, 2, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])],
      ['blk.0.attn_q.weight', identity4],
      ['blk.0.attn_k.weight', identity4],
      ['blk.0.attn_v.weight', identity4],
      ['blk.0.attn_q_norm.weight', new Float32Array([1, 1, 1, 1])],
      ['blk.0.attn_k_norm.weight', new Float32Array([1, 1, 1, 1])],
      ['blk.0.attn_output.weight', identity4],
      ['blk.0.post_attention_norm.weight', new Float32Array([1, 1, 1, 1])],
      ['blk.0.ffn_gate.weight', identity4],
      ['blk.0.ffn_up.weight', identity4],
      ['blk.0.ffn_down.weight', identity4],
      ['blk.0.post_ffw_norm.weight', new Float32Array([1, 2, 3, 4])],
      ['output_norm.weight', new Float32Array([1, 1, 1, 1])],
      ['output.weight', identity4],
    ]);
    const r = Math.sqrt((16 + 25 + 36 + 49) / 4);
    const want = [4 / r, 5 / r, 6 / r, 7 / r];
    const got = ReferenceModel.fromWeights(c, w).forward(0, 0);
    for (let i = 0; i < 4; i++) expect(got[i]).toBeCloseTo(want[i], 6);
    // Down scaled by 10: the post-norm takes the scale out.
    const scaled = new Map(w).set('blk.0.ffn_down.weight', identity4.map((v) => v * 10));
    const again = ReferenceModel.fromWeights(c, scaled).forward(0, 0);
    for (let i = 0; i < 4; i++) expect(again[i]).toBeCloseTo(want[i], 6);
  });

  it('a full-width q/k norm is the per-head norm when there is one head, and differs with two', () => {
    const one: ModelConfig = { ...base, arch: 'olmo2', normPlacement: 'post', qkNorm: true, qkNormScope: 'full', numLayers: 2, vocabSize: 11, intermediateSize: 6, rmsNormEps: 1e-5, ropeTheta: 100 };
    const w = randomWeights(one, 23);
    const ids = [3, 1, 4, 1, 5, 9];
    const full = logitsFor(ReferenceModel.fromWeights(one, w), ids);
    const perHead = logitsFor(ReferenceModel.fromWeights({ ...one, qkNormScope: 'head' }, w), ids);
    for (let t = 0; t < ids.length; t++) for (let v = 0; v < one.vocabSize; v++) expect(perHead[t][v]).toBeCloseTo(full[t][v], 6);
    // Two heads of 2: per-head weights would be [2], full-width ones [4]; norm a [4] weight whose
    // halves are equal both ways, so only the scope differs.
    const two: ModelConfig = { ...one, numHeads: 2, numKvHeads: 2, headDim: 2 };
    const w2 = randomWeights(two, 29);
    for (let l = 0; l < 2; l++) for (const g of ['attn_q_norm', 'attn_k_norm']) w2.set(`blk.${l}.${g}.weight`, Float32Array.from([1.3, 0.7, 1.3, 0.7]));
    const a = logitsFor(ReferenceModel.fromWeights(two, w2), ids);
    const half = new Map(w2);
    for (let l = 0; l < 2; l++) for (const g of ['attn_q_norm', 'attn_k_norm']) half.set(`blk.${l}.${g}.weight`, Float32Array.from([1.3, 0.7]));
    const b = logitsFor(ReferenceModel.fromWeights({ ...two, qkNormScope: 'head' }, half), ids);
    expect(Math.max(...a[5].map((v, i) => Math.abs(v - b[5][i])))).toBeGreaterThan(1e-3);
  });
});

// ---- an independent whole-sequence implementation ----

type Mat = number[][]; // rows

const rows = (a: Float32Array, cols: number): Mat =>
  Array.from({ length: a.length / cols }, (_, i) => Array.from(a.subarray(i * cols, (i + 1) * cols)));
const linear = (x: number[], wt: Mat, b?: Float32Array) => wt.map((row, i) => row.reduce((s, v, j) => s + v * x[j], b ? b[i] : 0));
const normOf = (x: number[], g: ArrayLike<number>, eps: number, offset = 0) => {
  const rms = Math.sqrt(x.reduce((s, v) => s + v * v, 0) / x.length + eps);
  return x.map((v, i) => (v / rms) * (offset + g[i]));
};
const cap = (s: number, c: number | null) => (c === null ? s : c * Math.tanh(s / c));

/**
 * Rotates one head; neox uses rotate_half, interleaved rotates adjacent pairs. Only the first `rd`
 * dimensions rotate (partial rotary), the rest pass through; pair i's frequency is divided by
 * `div[i]` (LongRoPE) and cos/sin multiplied by `m` (its attention factor).
 */
function rope(x: number[], pos: number, theta: number, style: 'neox' | 'interleaved', rd = x.length, div?: readonly number[], m = 1): number[] {
  const half = rd / 2;
  const freq = (i: number) => (pos * theta ** (-(2 * i) / rd)) / (div ? div[i] : 1);
  const xr = x.slice(0, rd);
  const pass = x.slice(rd);
  if (style === 'neox') {
    const rot = [...xr.slice(half).map((v) => -v), ...xr.slice(0, half)];
    return [...xr.map((v, j) => v * m * Math.cos(freq(j % half)) + rot[j] * m * Math.sin(freq(j % half))), ...pass];
  }
  const out = [...xr];
  for (let i = 0; i < half; i++) {
    const [a, b] = [xr[2 * i], xr[2 * i + 1]];
    out[2 * i] = m * (a * Math.cos(freq(i)) - b * Math.sin(freq(i)));
    out[2 * i + 1] = m * (a * Math.sin(freq(i)) + b * Math.cos(freq(i)));
  }
  return [...out, ...pass];
}

/**
 * YaRN as transformers' _compute_yarn_parameters states it, as divisors of theta^(-2i/d):
 * find_correction_range(beta_fast, beta_slow) (floor / ceil when truncating, within [0, d - 1]),
 * linear_ramp_factor over the d/2 pairs, and inv = interp · ramp + extrap · (1 - ramp) with
 * interp = extrap / factor.
 */
function yarnDivisors(s: Extract<ModelConfig['ropeScaling'], { type: 'yarn' }>, theta: number, d: number): number[] {
  const correctionDim = (rotations: number) => (d * Math.log(s.originalMaxPositionEmbeddings / (rotations * 2 * Math.PI))) / (2 * Math.log(theta));
  const lo = Math.max(s.truncate ? Math.floor(correctionDim(s.betaFast)) : correctionDim(s.betaFast), 0);
  let hi = Math.min(s.truncate ? Math.ceil(correctionDim(s.betaSlow)) : correctionDim(s.betaSlow), d - 1);
  if (hi === lo) hi += 0.001;
  return Array.from({ length: d / 2 }, (_, i) => {
    const ramp = Math.min(Math.max((i - lo) / (hi - lo), 0), 1);
    return 1 / (ramp / s.factor + (1 - ramp));
  });
}

function naiveLogits(c: ModelConfig, w: Map<string, Float32Array>, ids: number[], contextLength = Math.min(4096, c.maxPositionEmbeddings)): number[][] {
  // LongRoPE: the long factors past the original context, else the short ones; YaRN: yarnDivisors
  const s = c.ropeScaling;
  const div = s?.type === 'longrope' ? (contextLength > s.originalMaxPositionEmbeddings ? s.longFactor : s.shortFactor) : s?.type === 'yarn' ? yarnDivisors(s, c.ropeTheta, c.rotaryDim ?? c.headDim) : undefined;
  const m = s?.type === 'longrope' || s?.type === 'yarn' ? s.attentionFactor : 1;
  const d = c.hiddenSize;
  const hd = c.headDim;
  const W = (name: string, cols: number) => rows(w.get(name)!, cols);
  // Gemma: embeddings times sqrt(d), every norm weight applied as 1 + w
  let X: Mat = ids.map((id) => Array.from(w.get('token_embd.weight')!.subarray(id * d, (id + 1) * d)).map((v) => v * c.embeddingScale));
  const eps = c.rmsNormEps;
  const norm = (x: number[], g: ArrayLike<number>, e: number) => normOf(x, g, e, c.normWeightOffset);
  for (let l = 0; l < c.numLayers; l++) {
    const p = `blk.${l}.`;
    // pre-norm: blocks read the normed stream; post-norm (OLMo 2): the stream itself; sandwich (Gemma): both norms
    const pre = c.normPlacement !== 'post';
    const post = c.normPlacement !== 'pre';
    const H = X.map((x) => (pre ? norm(x, w.get(p + 'attn_norm.weight')!, eps) : x));
    // the token mixer: attention, or LFM2's gated short convolution on its conv layers
    const attend = (): Mat => {
    const heads = (M: Mat, n: number) => M.map((row) => Array.from({ length: n }, (_, h) => row.slice(h * hd, (h + 1) * hd)));
    // per-head q/k norm on each head; a full-width one on the whole projection before the split
    const qn = (v: number[], g: string) => (c.qkNorm && c.qkNormScope === 'head' ? norm(v, w.get(p + g)!, c.rmsNormEps) : v);
    const fullQn = (v: number[], g: string) => (c.qkNorm && c.qkNormScope === 'full' ? norm(v, w.get(p + g)!, c.rmsNormEps) : v);
    // NoPE layers leave q and k where they are; Gemma 3's windowed layers rotate with their own base
    const theta = c.ropeLocalTheta !== null && (c.slidingWindow?.layers ?? []).includes(l) ? c.ropeLocalTheta : c.ropeTheta;
    const rot = (v: number[], t: number) => (c.noRopeLayers.includes(l) ? v : rope(v, t, theta, c.ropeStyle, c.rotaryDim ?? hd, div, m));
    // gated attention (Qwen3.5): q_proj's rows are each head's query then its gate
    const qg = H.map((x) => linear(x, W(p + 'attn_q.weight', d), w.get(p + 'attn_q.bias')));
    const qOnly = c.attnOutputGate ? qg.map((r) => Array.from({ length: c.numHeads }, (_, h) => r.slice(2 * h * hd, (2 * h + 1) * hd)).flat()) : qg;
    const gates = qg.map((r) => Array.from({ length: c.numHeads }, (_, h) => r.slice((2 * h + 1) * hd, (2 * h + 2) * hd)).flat());
    const Q = heads(qOnly.map((x) => fullQn(x, 'attn_q_norm.weight')), c.numHeads)
      .map((hs, t) => hs.map((v) => rot(qn(v, 'attn_q_norm.weight'), t)));
    const K = heads(H.map((x) => fullQn(linear(x, W(p + 'attn_k.weight', d), w.get(p + 'attn_k.bias')), 'attn_k_norm.weight')), c.numKvHeads)
      .map((hs, t) => hs.map((v) => rot(qn(v, 'attn_k_norm.weight'), t)));
    const V = heads(H.map((x) => linear(x, W(p + 'attn_v.weight', d), w.get(p + 'attn_v.bias'))), c.numKvHeads);
    const window = layerWindow(c, l) ?? Infinity;
    const A = Q.map((qs, t) =>
      qs.flatMap((q, h) => {
        const kv = Math.floor(h / (c.numHeads / c.numKvHeads));
        // causal mask, narrowed by a sliding window: only positions t - window < s <= t
        const from = Math.max(0, t + 1 - window);
        // scaled (Gemma: by its own scalar), then soft-capped (Gemma 2)
        const scale = c.attentionScale ?? 1 / Math.sqrt(hd);
        const scores = K.slice(from, t + 1).map((ks) => cap(ks[kv].reduce((s, v, i) => s + v * q[i], 0) * scale, c.attnLogitSoftcap));
        const m = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - m));
        const z = e.reduce((a, b) => a + b, 0);
        return Array.from({ length: hd }, (_, i) => e.reduce((s, p2, u) => s + (p2 / z) * V[from + u][kv][i], 0));
      }),
    );
      return c.attnOutputGate ? A.map((a, t) => a.map((v, i) => v / (1 + Math.exp(-gates[t][i])))) : A;
    };
    const isConv = c.shortConv?.layers.includes(l) ?? false;
    const isDelta = c.deltaNet?.layers.includes(l) ?? false;
    const isMamba = c.mamba2?.layers.includes(l) ?? false;
    const mixed = isConv ? convNaive(c, w, p, H) : isDelta ? deltaNetNaive(c, w, p, H) : isMamba ? mamba2Naive(c, w, p, H) : attend();
    // post-norm: the block's output is normed before the residual add
    const out = (y: number[], g: string) => (post ? norm(y, w.get(p + g)!, eps) : y);
    // Granite scales each branch before the residual add
    const Wout = isConv ? W(p + 'shortconv.out_proj.weight', d) : isDelta
        ? W(p + 'ssm_out.weight', c.deltaNet!.numVHeads * c.deltaNet!.headVDim)
        : isMamba
          ? W(p + 'ssm_out.weight', c.mamba2!.numHeads * c.mamba2!.headDim)
          : W(p + 'attn_output.weight', c.numHeads * hd);
    X = X.map((x, t) => out(linear(mixed[t], Wout), 'post_attention_norm.weight').map((v, i) => c.residualScale * v + x[i]));
    X = X.map((x) => {
      const h = pre ? norm(x, w.get(p + 'ffn_norm.weight')!, c.rmsNormEps) : x;
      const g = linear(h, W(p + 'ffn_gate.weight', d));
      const u = linear(h, W(p + 'ffn_up.weight', d));
      // SwiGLU, or GeGLU: GELU with tanh, x·Φ(x) ≈ x/2·(1 + tanh(√(2/π)(x + 0.044715x³)))
      const gelu = (v: number) => (v / 2) * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
      const act = g.map((v, i) => (c.ffnActivation === 'gelu_tanh' ? gelu(v) : v / (1 + Math.exp(-v))) * u[i]);
      return out(linear(act, W(p + 'ffn_down.weight', c.intermediateSize)), 'post_ffw_norm.weight').map((v, i) => c.residualScale * v + x[i]);
    });
  }
  const out = W(c.tieWordEmbeddings ? 'token_embd.weight' : 'output.weight', d);
  // Granite divides the logits by logits_scaling
  return X.map((x) => linear(norm(x, w.get('output_norm.weight')!, eps), out).map((v) => cap(v / c.logitsScaling, c.finalLogitSoftcap)));
}

/** Granite 4.0-H's Mamba-2 over the whole sequence: in_proj's z, xBC, dt rows, then testing/mamba2-naive.ts's closed form. */
function mamba2Naive(c: ModelConfig, w: Map<string, Float32Array>, p: string, H: Mat): Mat {
  const m = c.mamba2!;
  const inner = m.numHeads * m.headDim;
  const cd = mamba2ConvDim(m);
  const proj = H.map((x) => linear(x, rows(w.get(p + 'ssm_in.weight')!, c.hiddenSize)));
  const v = (name: string) => w.get(p + name)!;
  const vectors = { conv: v('ssm_conv1d.weight'), convBias: v('ssm_conv1d.bias'), dtBias: v('ssm_dt.bias'), decay: v('ssm_a'), d: v('ssm_d'), norm: v('ssm_norm.weight') };
  const out = mamba2Sequence(m, c.rmsNormEps, vectors, proj.map((r) => r.slice(0, inner)), proj.map((r) => r.slice(inner, inner + cd)), proj.map((r) => r.slice(inner + cd)));
  return out.map((r) => Array.from(r));
}

/**
 * LFM2's gated short convolution over the whole sequence, as transformers' slow path computes it:
 * in_proj's rows B, C, x; Bx = B ⊙ x; a depthwise Conv1d with padding L − 1, cropped to the
 * sequence (so position t sees Bx[t − L + 1 .. t], zeros before 0); then C ⊙ that.
 */
function convNaive(c: ModelConfig, w: Map<string, Float32Array>, p: string, H: Mat): Mat {
  const d = c.hiddenSize;
  const L = c.shortConv!.kernel;
  const BCx = H.map((x) => linear(x, rows(w.get(p + 'shortconv.in_proj.weight')!, d)));
  const Bx = BCx.map((r) => r.slice(0, d).map((b, i) => b * r[2 * d + i]));
  const k = w.get(p + 'shortconv.conv.weight')!;
  const padded = [...Array.from({ length: L - 1 }, () => new Array<number>(d).fill(0)), ...Bx];
  return Bx.map((_, t) => Array.from({ length: d }, (_, i) => BCx[t][d + i] * Array.from({ length: L }, (_, j) => k[i * L + j] * padded[t + j][i]).reduce((a, b) => a + b, 0)));
}

/**
 * Qwen3.5's gated DeltaNet over the whole sequence in closed form: the conv as a padded Conv1d
 * then SiLU; per value head, with A_r = exp(g_r)·(I − β_r k_r k_rᵀ) (dk × dk), the state after
 * token t is S_t = Σ_{s ≤ t} A_t ⋯ A_{s+1} · β_s k_s v_sᵀ and the output S_tᵀ q_t (the transition
 * matrices formed explicitly, never the token-by-token update); then RMSNorm by the plain w
 * times SiLU(z).
 */
function deltaNetNaive(c: ModelConfig, w: Map<string, Float32Array>, p: string, H: Mat): Mat {
  const dn = c.deltaNet!;
  const { numKHeads: nk, numVHeads: nv, headKDim: dk, headVDim: dv, convKernel: L } = dn;
  const d = c.hiddenSize;
  const channels = 2 * nk * dk + nv * dv;
  const silu = (v: number) => v / (1 + Math.exp(-v));
  const mixedQkv = H.map((x) => linear(x, rows(w.get(p + 'attn_qkv.weight')!, d)));
  const Z = H.map((x) => linear(x, rows(w.get(p + 'attn_gate.weight')!, d)));
  const B = H.map((x) => linear(x, rows(w.get(p + 'ssm_beta.weight')!, d)));
  const Al = H.map((x) => linear(x, rows(w.get(p + 'ssm_alpha.weight')!, d)));
  const k = w.get(p + 'ssm_conv1d.weight')!;
  const padded = [...Array.from({ length: L - 1 }, () => new Array<number>(channels).fill(0)), ...mixedQkv];
  const conv = mixedQkv.map((_, t) => Array.from({ length: channels }, (_, i) => silu(Array.from({ length: L }, (_, j) => k[i * L + j] * padded[t + j][i]).reduce((a, b) => a + b, 0))));
  const unit = (v: number[]) => {
    const n = Math.sqrt(v.reduce((s, x) => s + x * x, 0) + c.rmsNormEps);
    return v.map((x) => x / n);
  };
  const Qh = conv.map((r) => Array.from({ length: nk }, (_, h) => unit(r.slice(h * dk, (h + 1) * dk)).map((x) => x / Math.sqrt(dk))));
  const Kh = conv.map((r) => Array.from({ length: nk }, (_, h) => unit(r.slice(nk * dk + h * dk, nk * dk + (h + 1) * dk))));
  const Vh = conv.map((r) => Array.from({ length: nv }, (_, h) => r.slice(2 * nk * dk + h * dv, 2 * nk * dk + (h + 1) * dv)));
  const dt = w.get(p + 'ssm_dt.bias')!;
  const a = w.get(p + 'ssm_a')!;
  const softplus = (x: number) => Math.log(1 + Math.exp(x));
  const matmulSq = (X: Mat, Y: Mat) => X.map((row) => Y[0].map((_, j) => row.reduce((s, v, i) => s + v * Y[i][j], 0)));
  const normW = w.get(p + 'ssm_norm.weight')!;
  return H.map((_, t) =>
    Array.from({ length: nv }, (_, h) => {
      // which key head this value head reads: grouped (HF) or tiled (llama.cpp's files)
      const kh = dn.vHeadOrder === 'grouped' ? Math.floor((h * nk) / nv) : h % nk;
      const rate = dn.aStored === 'log' ? Math.exp(a[h]) : -a[h];
      const transition = (r: number): Mat => {
        const beta = 1 / (1 + Math.exp(-B[r][h]));
        const decay = Math.exp(-rate * softplus(Al[r][h] + dt[h]));
        const kr = Kh[r][kh];
        return kr.map((ki, i) => kr.map((kj, j) => decay * ((i === j ? 1 : 0) - beta * ki * kj)));
      };
      let P: Mat = Array.from({ length: dk }, (_, i) => Array.from({ length: dk }, (_, j) => (i === j ? 1 : 0)));
      const S: Mat = Array.from({ length: dk }, () => new Array<number>(dv).fill(0));
      for (let s = t; s >= 0; s--) {
        const beta = 1 / (1 + Math.exp(-B[s][h]));
        const Pk = P.map((row) => row.reduce((acc, v, i) => acc + v * Kh[s][kh][i], 0));
        for (let i = 0; i < dk; i++) for (let j = 0; j < dv; j++) S[i][j] += beta * Pk[i] * Vh[s][h][j];
        P = matmulSq(P, transition(s));
      }
      const o = Array.from({ length: dv }, (_, j) => S.reduce((acc, row, i) => acc + row[j] * Qh[t][kh][i], 0));
      return normOf(o, normW, c.rmsNormEps).map((v, j) => v * silu(Z[t][h * dv + j]));
    }).flat(),
  );
}

/** llama.cpp's converter permutation of q/k rows: within a head, rows (i, i + d/2) become (2i, 2i+1). */
function permuteRows(a: Float32Array, numHeads: number, headDim: number, cols: number): Float32Array {
  const out = new Float32Array(a.length);
  const half = headDim / 2;
  for (let h = 0; h < numHeads; h++)
    for (let i = 0; i < half; i++)
      for (const j of [0, 1]) {
        const src = (h * headDim + j * half + i) * cols;
        out.set(a.subarray(src, src + cols), (h * headDim + 2 * i + j) * cols);
      }
  return out;
}

// Gemma 2's pieces, with caps low enough to bend these small models' scores and logits.
const GEMMA2: Partial<ModelConfig> = {
  arch: 'gemma2',
  normPlacement: 'sandwich',
  normWeightOffset: 1,
  embeddingScale: Math.sqrt(8),
  ffnActivation: 'gelu_tanh',
  attentionScale: 0.9,
  attnLogitSoftcap: 0.5,
  finalLogitSoftcap: 0.6,
  tieWordEmbeddings: true,
  numHeads: 2,
  numKvHeads: 1,
  headDim: 4,
  hiddenSize: 8,
  slidingWindow: { size: 2, layers: [0] },
};

// Gemma 3: Gemma 2 without the attention cap, with per-head q/k norms and the windowed layer's own RoPE base.
const GEMMA3: Partial<ModelConfig> = { ...GEMMA2, arch: 'gemma3', attnLogitSoftcap: null, finalLogitSoftcap: null, qkNorm: true, qkNormScope: 'head', ropeLocalTheta: 7 };

// Granite: its four multipliers, none of them 1 (interleaved RoPE as its GGUF files have it).
const GRANITE: Partial<ModelConfig> = { arch: 'granite', embeddingScale: 3, residualScale: 0.4, attentionScale: 0.2, logitsScaling: 2.5, tieWordEmbeddings: true, ropeStyle: 'interleaved' };

// Phi-3/4: 4 of 6 dimensions of each head rotary, LongRoPE (the default context, 32, exceeds
// the original 16: the long factors).
const PHI3: Partial<ModelConfig> = {
  arch: 'phi3',
  numHeads: 2,
  numKvHeads: 1,
  headDim: 6,
  rotaryDim: 4,
  ropeScaling: { type: 'longrope', longFactor: [1, 7], shortFactor: [1, 1.5], originalMaxPositionEmbeddings: 16, attentionFactor: 1.3 },
};

const QWEN35: Partial<ModelConfig> = {
  arch: 'qwen35',
  numLayers: 3,
  qkNorm: true,
  numHeads: 2,
  numKvHeads: 1,
  headDim: 6,
  rotaryDim: 2,
  hiddenSize: 8,
  normWeightOffset: 1,
  tieWordEmbeddings: true,
  attnOutputGate: true,
  deltaNet: { layers: [0, 2], convKernel: 3, numKHeads: 2, numVHeads: 4, headKDim: 4, headVDim: 3, vHeadOrder: 'grouped', aStored: 'log' },
};

const cases: [string, Partial<ModelConfig>][] = [
  ['llama with GQA', { numHeads: 4, numKvHeads: 2, headDim: 4, hiddenSize: 8 }],
  ['qwen2 with q/k/v biases and tied embeddings', { arch: 'qwen2', attentionBias: true, tieWordEmbeddings: true, numHeads: 2, numKvHeads: 1 }],
  ['qwen3 with q/k norms and a head_dim above hidden/heads', { arch: 'qwen3', qkNorm: true, numHeads: 2, numKvHeads: 2, headDim: 6 }],
  ['interleaved RoPE', { ropeStyle: 'interleaved', numHeads: 2, numKvHeads: 1, headDim: 4, hiddenSize: 8 }],
  ['mistral with a 3-key sliding window on every layer', { arch: 'mistral', numHeads: 2, numKvHeads: 1, slidingWindow: { size: 3, layers: [0, 1] } }],
  ['qwen2 with a 2-key window on layer 1 only', { arch: 'qwen2', attentionBias: true, slidingWindow: { size: 2, layers: [1] } }],
  ['olmo2 with post-norms and full-width q/k norms', { arch: 'olmo2', normPlacement: 'post', qkNorm: true, qkNormScope: 'full', numHeads: 2, numKvHeads: 1, headDim: 4, hiddenSize: 8 }],
  ['smollm3 with NoPE on layer 1 and interleaved RoPE on layer 0', { arch: 'smollm3', ropeStyle: 'interleaved', numHeads: 2, numKvHeads: 1, noRopeLayers: [1] }],
  ['gemma3 with (1 + w) per-head q/k norms and a local RoPE base on its windowed layer 0', { ...GEMMA3 }],
  ['granite with its embedding, residual, attention and logit multipliers', { ...GRANITE }],
  ['phi3 with partial rotary and LongRoPE (long factors, attention factor)', { ...PHI3 }],
  ['phi3 with partial interleaved rotary', { ...PHI3, ropeStyle: 'interleaved', ropeScaling: null }],
  // 3 pairs, theta 100, original 64: the ramp runs 0, 1/2, 1 (from pair 0 to pair 2).
  ['qwen3 with YaRN (its ramp and attention factor)', { arch: 'qwen3', qkNorm: true, numHeads: 2, numKvHeads: 2, headDim: 6, ropeScaling: { type: 'yarn', factor: 4, originalMaxPositionEmbeddings: 64, betaFast: 32, betaSlow: 1, attentionFactor: 1.2, truncate: true } }],
  // Conv on layers 0 and 2 (before and after attention), 3 taps over 6 positions: the state carries past the kernel.
  ['lfm2 with gated short convolutions on layers 0 and 2 and per-head q/k norms on its attention layer', { arch: 'lfm2', numLayers: 3, qkNorm: true, numHeads: 2, numKvHeads: 1, headDim: 4, hiddenSize: 8, tieWordEmbeddings: true, shortConv: { kernel: 3, layers: [0, 2] } }],
  // DeltaNet on layers 0 and 2 around a gated-attention layer (heads × head_dim 12 ≠ hidden 8, a
  // quarter rotary, (1 + w) norms), 3 taps over 6 positions, two value heads per key head, head
  // dims 4 (keys) and 3 (values): HF's grouped value heads and A_log, then llama.cpp's tiled heads.
  ['qwen35 with gated DeltaNet layers (grouped value heads, A_log) and gated attention', { ...QWEN35 }],
  // Mamba-2 on layers 0 and 2 around a NoPE attention layer, 3 taps over 6 positions, two groups of two heads.
  ['granite 4.0-H with Mamba-2 layers (grouped B/C, conv bias, D) and NoPE attention, its multipliers', { ...GRANITE, numLayers: 3, hiddenSize: 8, numHeads: 2, numKvHeads: 1, noRopeLayers: [0, 1, 2], mamba2: { layers: [0, 2], convKernel: 3, numHeads: 4, headDim: 2, stateSize: 3, numGroups: 2, aStored: 'log' } }],
  ['qwen35 with tiled value heads', { ...QWEN35, deltaNet: { ...QWEN35.deltaNet!, vHeadOrder: 'tiled' } }],
  ['gemma2 with sandwich (1 + w) norms, scaled embeddings, GeGLU, its own query scale, both soft-caps and a 2-key window on layer 0', { ...GEMMA2 }],
];

describe('reference forward against an independent whole-sequence computation', () => {
  for (const [name, over] of cases) {
    it(`agrees for ${name} over 6 positions`, () => {
      const c: ModelConfig = { ...base, numLayers: 2, vocabSize: 11, intermediateSize: 6, rmsNormEps: 1e-5, ropeTheta: 100, ...over };
      const w = randomWeights(c, 7);
      const ids = [3, 1, 4, 1, 5, 9];
      const want = naiveLogits(c, w, ids);
      const got = logitsFor(ReferenceModel.fromWeights(c, w), ids);
      for (let t = 0; t < ids.length; t++) for (let v = 0; v < c.vocabSize; v++) expect(got[t][v]).toBeCloseTo(want[t][v], 5);
    });
  }

  it('gives the same logits for neox on HF rows and interleaved on llama.cpp-permuted q/k rows', () => {
    const c: ModelConfig = { ...base, numLayers: 2, vocabSize: 11, hiddenSize: 8, numHeads: 2, numKvHeads: 1, intermediateSize: 6, ropeTheta: 100 };
    const w = randomWeights(c, 11);
    const permuted = new Map(w);
    for (let l = 0; l < c.numLayers; l++) {
      permuted.set(`blk.${l}.attn_q.weight`, permuteRows(w.get(`blk.${l}.attn_q.weight`)!, c.numHeads, c.headDim, c.hiddenSize));
      permuted.set(`blk.${l}.attn_k.weight`, permuteRows(w.get(`blk.${l}.attn_k.weight`)!, c.numKvHeads, c.headDim, c.hiddenSize));
    }
    const ids = [1, 2, 3, 4, 5, 6, 7, 8];
    const neox = logitsFor(ReferenceModel.fromWeights(c, w), ids);
    const inter = logitsFor(ReferenceModel.fromWeights({ ...c, ropeStyle: 'interleaved' }, permuted), ids);
    for (let t = 0; t < ids.length; t++) for (let v = 0; v < c.vocabSize; v++) expect(inter[t][v]).toBeCloseTo(neox[t][v], 5);
    // and the un-permuted weights under interleaved RoPE are a different model
    const wrong = logitsFor(ReferenceModel.fromWeights({ ...c, ropeStyle: 'interleaved' }, w), ids);
    expect(Math.max(...wrong[7].map((v, i) => Math.abs(v - neox[7][i])))).toBeGreaterThan(1e-3);
  });

  it('matches full attention while the context fits the sliding window, and differs after', () => {
    const c: ModelConfig = { ...base, arch: 'mistral', numLayers: 2, vocabSize: 11, hiddenSize: 8, numHeads: 2, numKvHeads: 1, intermediateSize: 6, ropeTheta: 100 };
    const w = randomWeights(c, 5);
    const ids = [1, 2, 3, 4, 5, 6, 7];
    const full = logitsFor(ReferenceModel.fromWeights(c, w), ids);
    const windowed = logitsFor(ReferenceModel.fromWeights({ ...c, slidingWindow: { size: 4, layers: [0, 1] } }, w), ids);
    const diff = (t: number) => Math.max(...windowed[t].map((v, i) => Math.abs(v - full[t][i])));
    for (let t = 0; t < 4; t++) expect(diff(t), `position ${t}`).toBe(0);
    for (let t = 4; t < ids.length; t++) expect(diff(t), `position ${t}`).toBeGreaterThan(1e-4);
  });

  it('smollm3 without NoPE layers is llama: the same weights give the same logits', () => {
    const c: ModelConfig = { ...base, numLayers: 2, vocabSize: 11, hiddenSize: 8, numHeads: 2, numKvHeads: 1, intermediateSize: 6, ropeTheta: 100 };
    const w = randomWeights(c, 13);
    const ids = [1, 2, 3, 4, 5, 6];
    const llama = logitsFor(ReferenceModel.fromWeights(c, w), ids);
    const smol = logitsFor(ReferenceModel.fromWeights({ ...c, arch: 'smollm3', noRopeLayers: [] }, w), ids);
    expect(smol).toEqual(llama);
  });

  it('a NoPE layer does not rotate: without positions the last logits ignore the order of earlier tokens', () => {
    // One layer without RoPE: causal attention at the last token sees the earlier tokens as a
    // set, so permuting them cannot move its logits. Any rotation would.
    const c: ModelConfig = { ...base, arch: 'smollm3', numLayers: 1, vocabSize: 11, hiddenSize: 8, numHeads: 2, numKvHeads: 1, intermediateSize: 6, ropeTheta: 100 };
    const w = randomWeights(c, 17);
    const last = (cfg: ModelConfig, ids: number[]) => logitsFor(ReferenceModel.fromWeights(cfg, w), ids).at(-1)!;
    const orders = [
      [3, 1, 4, 1, 5, 9],
      [5, 4, 1, 3, 1, 9],
    ];
    const nope = { ...c, noRopeLayers: [0] };
    const [a, b] = orders.map((ids) => last(nope, ids));
    for (let v = 0; v < c.vocabSize; v++) expect(b[v]).toBeCloseTo(a[v], 5);
    for (const style of ['neox', 'interleaved'] as const) {
      const roped = { ...c, ropeStyle: style, noRopeLayers: [] };
      const [x, y] = orders.map((ids) => last(roped, ids));
      expect(Math.max(...x.map((v, i) => Math.abs(v - y[i]))), style).toBeGreaterThan(1e-3);
    }
  });

  it('greedy() continues a prompt with the argmax of each step and matches teacher forcing', () => {
    const c: ModelConfig = { ...base, numLayers: 2, vocabSize: 11, intermediateSize: 6, ropeTheta: 100 };
    const m = ReferenceModel.fromWeights(c, randomWeights(c, 3));
    const out = greedy(m, [1, 2], 5);
    expect(out).toHaveLength(5);
    const seq = [1, 2, ...out];
    const logits = logitsFor(m, seq);
    for (let i = 0; i < 5; i++) {
      const l = logits[1 + i];
      expect(out[i]).toBe(l.indexOf(Math.max(...l)));
    }
  });

  it('rejects a position past the cache and a token outside the vocabulary', () => {
    const m = ReferenceModel.fromWeights(base, randomWeights(base, 1));
    expect(() => m.forward(0, 1)).toThrow(RangeError);
    expect(() => m.forward(4, 0)).toThrow(/outside the vocabulary/);
  });
});

describe('reference forward, Gemma 2 pieces', () => {
  it('by hand, no layers: embeddings times the scale, the final norm as (1 + w), logits soft-capped', () => {
    // Token 0 = [1,-1,1,-1] times sqrt(4) = [2,-2,2,-2]; eps 4 makes the norm see the scale:
    // rms = sqrt(4 + 4), normed = ±2/sqrt(8) = ±0.70711; weights w = [0,1,2,3] applied as
    // [1,2,3,4]: [0.70711, -1.41421, 2.12132, -2.82843]; output = 20·I: [14.142, -28.284,
    // 42.426, -56.569]; capped at 30: 30·tanh(those / 30).
    const c: ModelConfig = { ...base, ...GEMMA2, numLayers: 0, hiddenSize: 4, vocabSize: 4, rmsNormEps: 4, embeddingScale: 2, finalLogitSoftcap: 30, tieWordEmbeddings: false, slidingWindow: null };
    const w = new Map<string, Float32Array>([
      ['token_embd.weight', new Float32Array([1, -1, 1, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])],
      ['output_norm.weight', new Float32Array([0, 1, 2, 3])],
      ['output.weight', identity4.map((v) => v * 20)],
    ]);
    const got = ReferenceModel.fromWeights(c, w).forward(0, 0);
    const raw = [14.142136, -28.284271, 42.426407, -56.568542];
    for (let i = 0; i < 4; i++) expect(got[i]).toBeCloseTo(30 * Math.tanh(raw[i] / 30), 5);
    expect(got[2]).toBeCloseTo(26.6516, 3); // 30·tanh(1.41421)
    // Without the cap, the raw logits; without the scale, ±1/sqrt(5) normed: each piece shows.
    const plain = ReferenceModel.fromWeights({ ...c, finalLogitSoftcap: null }, w).forward(0, 0);
    for (let i = 0; i < 4; i++) expect(plain[i]).toBeCloseTo(raw[i], 4);
    const unscaled = ReferenceModel.fromWeights({ ...c, finalLogitSoftcap: null, embeddingScale: 1 }, w).forward(0, 0);
    expect(unscaled[0]).toBeCloseTo(20 / Math.sqrt(5), 4);
    const plainNorm = ReferenceModel.fromWeights({ ...c, finalLogitSoftcap: null, normWeightOffset: 0 }, w).forward(0, 0);
    expect(plainNorm[0]).toBeCloseTo(0, 6); // w[0] = 0 applied as is
  });

  it('each piece changes the logits: dropping any one would fail the whole-sequence check', () => {
    const c: ModelConfig = { ...base, numLayers: 2, vocabSize: 11, intermediateSize: 6, rmsNormEps: 1e-5, ropeTheta: 100, ...GEMMA2 };
    const w = randomWeights(c, 7);
    const ids = [3, 1, 4, 1, 5, 9];
    const want = logitsFor(ReferenceModel.fromWeights(c, w), ids);
    const drops: Partial<ModelConfig>[] = [
      { normWeightOffset: 0 },
      { embeddingScale: 1 },
      { ffnActivation: 'silu' },
      { attentionScale: null },
      { attnLogitSoftcap: null },
      { finalLogitSoftcap: null },
      { slidingWindow: null },
    ];
    // Gemma 3: the windowed layer's RoPE base matters; (1 + w) holds on every norm, q/k norms
    // included: offset 1 on w is offset 0 on w + 1 (what a GGUF file stores).
    const c3: ModelConfig = { ...c, ...GEMMA3 };
    const w3 = randomWeights(c3, 7);
    const want3 = logitsFor(ReferenceModel.fromWeights(c3, w3), ids);
    const maxDiff = (got: Float32Array[]) => Math.max(...got.flatMap((row, t) => Array.from(row, (v, i) => Math.abs(v - want3[t][i]))));
    expect(maxDiff(logitsFor(ReferenceModel.fromWeights({ ...c3, ropeLocalTheta: null }, w3), ids))).toBeGreaterThan(1e-3);
    const shifted = new Map([...w3].map(([name, v]) => [name, name.endsWith('norm.weight') ? v.map((x) => x + 1) : v]));
    expect(maxDiff(logitsFor(ReferenceModel.fromWeights({ ...c3, normWeightOffset: 0 }, shifted), ids))).toBeLessThan(1e-4);
    for (const drop of drops) {
      const got = logitsFor(ReferenceModel.fromWeights({ ...c, ...drop }, w), ids);
      const diff = Math.max(...got.flatMap((row, t) => Array.from(row, (v, i) => Math.abs(v - want[t][i]))));
      expect(diff, JSON.stringify(drop)).toBeGreaterThan(1e-3);
    }
  });
});

describe('reference forward, Granite multipliers', () => {
  const c: ModelConfig = { ...base, numLayers: 2, vocabSize: 11, hiddenSize: 8, numHeads: 2, numKvHeads: 1, intermediateSize: 6, rmsNormEps: 1e-5, ropeTheta: 100, ...GRANITE };
  const w = randomWeights(c, 31);
  const ids = [3, 1, 4, 1, 5, 9];
  const logits = (cfg: ModelConfig) => logitsFor(ReferenceModel.fromWeights(cfg, w), ids);
  const maxDiff = (a: Float32Array[], b: Float32Array[]) => Math.max(...a.flatMap((row, t) => Array.from(row, (v, i) => Math.abs(v - b[t][i]))));

  it('divides the logits by logits_scaling, exactly', () => {
    const divided = logits(c);
    const plain = logits({ ...c, logitsScaling: 1 });
    for (let t = 0; t < ids.length; t++) for (let v = 0; v < c.vocabSize; v++) expect(divided[t][v]).toBeCloseTo(plain[t][v] / 2.5, 6);
  });

  it.each(['embeddingScale', 'residualScale', 'attentionScale'] as const)('%s moves the logits', (key) => {
    expect(maxDiff(logits(c), logits({ ...c, [key]: key === 'attentionScale' ? null : 1 }))).toBeGreaterThan(1e-3);
  });
});

describe('reference forward, LongRoPE by context', () => {
  const c: ModelConfig = { ...base, numLayers: 2, vocabSize: 11, hiddenSize: 8, intermediateSize: 6, rmsNormEps: 1e-5, ropeTheta: 100, ...PHI3 };
  const w = randomWeights(c, 37);
  const ids = [3, 1, 4, 1, 5, 9];

  it('takes the short factors when the context fits the original one, the long ones past it', () => {
    const short = logitsFor(ReferenceModel.fromWeights(c, w, undefined, 16), ids);
    const long = logitsFor(ReferenceModel.fromWeights(c, w, undefined, 17), ids);
    const want = naiveLogits(c, w, ids, 16);
    for (let t = 0; t < ids.length; t++) for (let v = 0; v < c.vocabSize; v++) expect(short[t][v]).toBeCloseTo(want[t][v], 5);
    expect(Math.max(...short[5].map((v, i) => Math.abs(v - long[5][i])))).toBeGreaterThan(1e-3);
    // The default context is the engine's: min(4096, max positions 32) > 16, so long.
    expect(logitsFor(ReferenceModel.fromWeights(c, w), ids)[5]).toEqual(long[5]);
  });

  it('the attention factor and the rotary width each move the logits', () => {
    const s = c.ropeScaling as Extract<ModelConfig['ropeScaling'], { type: 'longrope' }>;
    const logits = (cfg: ModelConfig) => logitsFor(ReferenceModel.fromWeights(cfg, w), ids)[5];
    const diff = (a: Float32Array, b: Float32Array) => Math.max(...a.map((v, i) => Math.abs(v - b[i])));
    expect(diff(logits(c), logits({ ...c, ropeScaling: { ...s, attentionFactor: 1 } }))).toBeGreaterThan(1e-3);
    expect(diff(logits({ ...c, ropeScaling: null }), logits({ ...c, ropeScaling: null, rotaryDim: 2 }))).toBeGreaterThan(1e-3);
  });
});

describe('Qwen3.5 MTP head against an independent computation', () => {
  // The trunk of the qwen35 case above with an MTP head: layer 3, whose decoder layer attends.
  const c: ModelConfig = { ...base, numLayers: 2, vocabSize: 11, intermediateSize: 6, rmsNormEps: 1e-5, ropeTheta: 100, ...QWEN35, mtpLayers: 1 };
  const w = randomWeights(c, 11);
  const ids = [3, 1, 4, 1, 5, 9, 2];
  const d = c.hiddenSize;
  const trunk = ReferenceModel.fromWeights(c, w);
  // h_t: the trunk's final hidden state (after its output norm) at each position
  const hidden = ids.map((id, t) => (trunk.forward(id, t), Array.from(trunk.hidden)));
  const emb = (id: number) => Array.from(w.get('token_embd.weight')!.subarray(id * d, (id + 1) * d));
  const mtp = (name: string) => w.get(`blk.3.${name}`)!;

  /**
   * The head over the whole sequence: row t is fc · [enorm(e_{t+1}) | hnorm(h_t)] (or the `wrong`
   * variant), then naiveLogits' one attention layer over rows 0..t with the head's weights, its
   * norm and the trunk's (tied) LM head. Rows stand in as the embedding table, ids 0, 1, 2, ...
   */
  function naiveMtp(wrong?: 'hidden first' | 'norms swapped'): number[][] {
    const rowsX = ids.slice(1).map((next, t) => {
      const [ge, gh] = wrong === 'norms swapped' ? [mtp('nextn.hnorm.weight'), mtp('nextn.enorm.weight')] : [mtp('nextn.enorm.weight'), mtp('nextn.hnorm.weight')];
      const e = normOf(emb(next), ge, c.rmsNormEps, 1);
      const h = normOf(hidden[t], gh, c.rmsNormEps, 1);
      return linear(wrong === 'hidden first' ? [...h, ...e] : [...e, ...h], rows(mtp('nextn.eh_proj.weight'), 2 * d));
    });
    const one: ModelConfig = { ...c, numLayers: 1, deltaNet: null, mtpLayers: 0, tieWordEmbeddings: false };
    const w1 = new Map<string, Float32Array>([
      ['token_embd.weight', Float32Array.from(rowsX.flat())],
      ['output_norm.weight', mtp('nextn.shared_head_norm.weight')],
      ['output.weight', w.get('token_embd.weight')!],
    ]);
    for (const [name, v] of w) if (name.startsWith('blk.3.') && !name.includes('nextn')) w1.set(name.replace('blk.3.', 'blk.0.'), v);
    return naiveLogits(one, w1, rowsX.map((_, t) => t));
  }

  it('gives the logits of fc · [embedding | hidden] through its attention layer, its norm and the LM head, over 6 positions', () => {
    const head = MtpReference.fromWeights(c, w);
    const got = ids.slice(1).map((next, t) => head.forward(Float32Array.from(hidden[t]), next, t));
    const want = naiveMtp();
    for (let t = 0; t < got.length; t++) for (let v = 0; v < c.vocabSize; v++) expect(got[t][v]).toBeCloseTo(want[t][v], 5);
    // The conventions show: the other concat order, or the two norms exchanged, move the logits.
    for (const wrong of ['hidden first', 'norms swapped'] as const) {
      const moved = naiveMtp(wrong);
      expect(Math.max(...moved.flatMap((r, t) => r.map((v, i) => Math.abs(v - got[t][i])))), wrong).toBeGreaterThan(1e-2);
    }
  });
});
