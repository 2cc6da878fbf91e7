// The paged-KV side of the attention kernels (attn_decode, attn_prefill): their shared Params,
// the sliding window, the score cap, the page lookup and the key tile in workgroup memory.
// Concatenated in front of a kernel that declares
//   override WG;                        threads per workgroup
//   override D4;                        headDim / 4 (vec4s per key row)
//   override TILE_KEYS;                 keys per tile
//   var<storage, read> kCache, vCache: array<vec4<act>>;  [numPages, PAGE, nKv, D4]
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

// K tile rows are padded by one vec4 so that threads scoring different keys hit different banks.
override ROW: u32 = D4 + 1u;
var<workgroup> kt: array<vec4f, TILE_KEYS * ROW>;  // the tile's keys
var<workgroup> vt: array<vec4f, TILE_KEYS * D4>;   // and their values
// Cache offsets (in vec4s) of the tile's keys, double-buffered: the kernel looks the next tile's
// up into keyAt[(1 - buf) * TILE_KEYS ..] while this tile's softmax runs.
var<workgroup> keyAt: array<u32, 2 * TILE_KEYS>;

// K and V of the tile's n keys, whose offsets are at keyAt[buf * TILE_KEYS ..], loaded together
// into kt and vt (between barriers).
fn load_tile(n: u32, buf: u32, lid: u32) {
  for (var i = lid; i < n * D4; i += WG) {
    let j = i / D4;
    let c = i % D4;
    let at = keyAt[buf * TILE_KEYS + j] + c;
    kt[j * ROW + c] = vec4f(kCache[at]);
    vt[i] = vec4f(vCache[at]);
  }
}
