// Bidirectional attention of an encoder (BERT, SigLIP): every token attends to every token of its
// own sequence in this step, with no causal mask and no KV cache: q, k and v are this step's rows.
// GQA as the decoder's (query head h reads KV head h / (nHeads / nKv)).
//
// One workgroup per (token, query head). Keys stream in chunks of WG, one per thread: each
// thread scores its key, the workgroup takes the chunk's max and sum, and an online softmax
// (running max m and sum l, the output rescaled by exp(m_old - m_new)) carries across chunks;
// each thread owns OUTS of the head's output columns. Scores and sums are f32 whatever `act` is.
// The step's tokens are grouped by sequence in order: sequence s owns tokens
// lastToken[s-1]+1 ..= lastToken[s] (StepBuffers.write gives them so).
// A symmetric sliding window (EmbeddingGemma's local layers): with halfWindow > 0 a token sees
// only the keys of its sequence at most halfWindow positions away on either side; 0: all of them.
// Positions count within the sequence, so the distance is the distance between rows.
alias act = f32;

override WG: u32 = 64;
override HEAD_DIM: u32 = 64;
override OUTS: u32 = (HEAD_DIM + WG - 1u) / WG;
const MAX_OUTS = 4u;
const MASKED = -3.0e38;  // the score of a key past the sequence: exp(MASKED - m) is 0

struct Counts {
  T: u32,  // tokens in this step
  S: u32,  // sequences in this step
}

struct Params {
  nHeads: u32,
  nKv: u32,
  scale: f32,  // multiplies q·k (1/sqrt(HEAD_DIM) usually)
  halfWindow: u32,  // keys at most this far from the query on either side; 0: no window
}

@group(0) @binding(0) var<storage, read> q: array<act>;          // [T, nHeads, HEAD_DIM]
@group(0) @binding(1) var<storage, read> k: array<act>;          // [T, nKv, HEAD_DIM]
@group(0) @binding(2) var<storage, read> v: array<act>;          // [T, nKv, HEAD_DIM]
@group(0) @binding(3) var<storage, read> lastToken: array<u32>;  // [S] last token of each sequence
@group(0) @binding(4) var<uniform> counts: Counts;
@group(0) @binding(5) var<storage, read_write> out: array<act>;  // [T, nHeads, HEAD_DIM]
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> qs: array<f32, HEAD_DIM>;  // the query row, pre-scaled
var<workgroup> probs: array<f32, WG>;     // the chunk's exp(score - m)
var<workgroup> red: array<f32, WG>;

// The max (or the sum) of every thread's `x`; all threads call it.
fn reduce(x: f32, lid: u32, isMax: bool) -> f32 {
  workgroupBarrier();  // the last reduction's result was read
  red[lid] = x;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) { red[lid] = select(red[lid] + red[lid + stride], max(red[lid], red[lid + stride]), isMax); }
    workgroupBarrier();
  }
  return red[0];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let t = wg.x;
  let h = wg.y;
  if (t >= counts.T) { return; }
  // The token's sequence: tokens begin ..< end.
  var begin = 0u;
  var end = 0u;
  for (var s = 0u; s < counts.S; s++) {
    if (t <= lastToken[s]) {
      end = lastToken[s] + 1u;
      break;
    }
    begin = lastToken[s] + 1u;
  }
  if (p.halfWindow > 0u) {
    if (t > begin + p.halfWindow) { begin = t - p.halfWindow; }
    end = min(end, t + p.halfWindow + 1u);
  }
  let kh = h / (p.nHeads / p.nKv);
  for (var d = lid; d < HEAD_DIM; d += WG) { qs[d] = f32(q[(t * p.nHeads + h) * HEAD_DIM + d]) * p.scale; }
  workgroupBarrier();

  var m = MASKED;
  var l = 0.0;
  var acc: array<f32, MAX_OUTS>;
  for (var j0 = begin; j0 < end; j0 += WG) {
    let j = j0 + lid;
    var score = MASKED;
    if (j < end) {
      score = 0.0;
      let kRow = (j * p.nKv + kh) * HEAD_DIM;
      for (var d = 0u; d < HEAD_DIM; d++) { score += qs[d] * f32(k[kRow + d]); }
    }
    let mNew = max(m, reduce(score, lid, true));
    let e = select(0.0, exp(score - mNew), j < end);
    probs[lid] = e;
    let alpha = exp(m - mNew);
    l = l * alpha + reduce(e, lid, false);
    m = mNew;
    let n = min(WG, end - j0);
    for (var o = 0u; o < OUTS; o++) {
      let d = lid + o * WG;
      if (d < HEAD_DIM) {
        var a = acc[o] * alpha;
        for (var i = 0u; i < n; i++) { a += probs[i] * f32(v[((j0 + i) * p.nKv + kh) * HEAD_DIM + d]); }
        acc[o] = a;
      }
    }
    workgroupBarrier();  // probs is read before the next chunk writes it
  }
  for (var o = 0u; o < OUTS; o++) {
    let d = lid + o * WG;
    if (d < HEAD_DIM) { out[(t * p.nHeads + h) * HEAD_DIM + d] = act(acc[o] / l); }
  }
}
