// The paged-KV side of the attention kernels (attn_decode, attn_prefill): their shared Params,
// the sliding window, the score cap and the page lookup. Concatenated in front of a kernel that
// declares
//   override D4;                        headDim / 4 (vec4s per key row)
//   var<storage, read> blockTable: array<u32>;            [S, maxPagesPerSeq]
//   var<uniform> p: Params;
// One Params layout serves both kernels, so src/kernels/attention.ts packs it in one place.

struct Params {
  nHeads: u32,          // query heads
  nKv: u32,             // key/value heads (nHeads is a multiple)
  pageSize: u32,        // tokens per KV page
  maxPagesPerSeq: u32,  // row length of blockTable
  window: u32,          // sliding window in keys: position p sees keys p - window < j <= p (0xffffffff: all)
  nSplits: u32,         // attn_decode only: the most splits per (token, head), the partials' stride
  pad: u32,
  scale: f32,           // what q·k is multiplied by (1 / sqrt(headDim) unless the model says otherwise)
  softcap: f32,         // scores s become tanh(s / softcap) * softcap before the softmax (Gemma 2); 0: none
}

// Below any real score and finite, so exp(m - m') never sees inf - inf.
const NO_MAX = -1e30;

// A scaled score, soft-capped when the model caps them. tanh's argument is clamped: tanh(±10)
// is ±1 in f32, and no backend meets exp overflow.
fn capScore(s: f32) -> f32 {
  if (p.softcap > 0.0) { return tanh(clamp(s / p.softcap, -10.0, 10.0)) * p.softcap; }
  return s;
}

// The first key a query at position `pos` sees (0 without a window).
fn firstKey(pos: u32) -> u32 {
  return pos + 1u - min(p.window, pos + 1u);
}

// Whether a query at position `pos` sees key `key`: causal, and within the window.
fn visible(key: u32, pos: u32) -> bool {
  return key <= pos && pos - key < p.window;
}

// Element index (in vec4s) of key `key` of sequence `seq`, kv head `kh`, column 0.
fn keyRow(seq: u32, key: u32, kh: u32) -> u32 {
  let page = blockTable[seq * p.maxPagesPerSeq + key / p.pageSize];
  return ((page * p.pageSize + key % p.pageSize) * p.nKv + kh) * D4;
}
