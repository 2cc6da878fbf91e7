// LoRA's first half over a ragged batch whose tokens use different adapters (Punica's "shrink"):
// h[t, r] = Σ_k A[r, k] · x[t, k] for every r below the rank of token t's adapter on this matrix.
// A token finds its adapter through its step row (tokenSeq, then seqAdapter), and the adapter's A
// through the pool's entry table; so tokens with different adapters, or none, share a dispatch, and
// loading an adapter rewrites the pool and the table, never a pipeline or a bind group.
// One workgroup per (rank row, token): x's row is reduced against one row of A.
alias act = f32;
// x's element type: f32 where x is the residual stream, at every precision (Specialisation.f32).
alias x_t = act;

override WG: u32 = 64;

const NONE: u32 = 0xffffffffu;

struct Params {
  k: u32,       // input features (A's row length)
  xStride: u32, // elements between consecutive tokens' rows of x
  xOffset: u32, // element offset of token 0's row
  mat: u32,     // this matrix's column of the entry table (layer · 7 + target)
  numMats: u32, // entries per adapter
  maxRank: u32, // h's row length
}

@group(0) @binding(0) var<storage, read> x: array<x_t>;
@group(0) @binding(1) var<storage, read> pool: array<f32>;
// [adapter · numMats + mat]: A's offset in pool, B's offset, rank (0: not adapted), scale's bits.
@group(0) @binding(2) var<storage, read> entries: array<vec4u>;
@group(0) @binding(3) var<storage, read> tokenSeq: array<u32>;
@group(0) @binding(4) var<storage, read> seqAdapter: array<u32>;
@group(0) @binding(5) var<storage, read_write> h: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let r = wid.x;
  let t = wid.y;
  let adapter = seqAdapter[tokenSeq[t]];
  // No early return before the barriers: a row beyond the rank reduces nothing and writes nothing.
  var rank = 0u;
  var aRow = 0u;
  if (adapter != NONE) {
    let e = entries[adapter * p.numMats + p.mat];
    rank = e.z;
    aRow = e.x + r * p.k;
  }
  let live = r < rank;
  var sum = 0.0;
  if (live) {
    let xRow = p.xOffset + t * p.xStride;
    for (var i = lid; i < p.k; i += WG) {
      sum += pool[aRow + i] * f32(x[xRow + i]);
    }
  }
  partial[lid] = sum;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { partial[lid] += partial[lid + s]; }
    workgroupBarrier();
  }
  if (lid == 0u && live) { h[t * p.maxRank + r] = partial[0]; }
}
