// LoRA's second half (Punica's "expand"): y[t, o] += scale · Σ_r B[o, r] · h[t, r], with B, rank and
// scale those of token t's adapter on this matrix (see lora_shrink.wgsl), added onto the base
// matrix's output in place. A token without an adapter, or whose adapter leaves this matrix alone,
// leaves y untouched: the base weights are never modified. y may be a region of a wider fused output
// (its own row stride and offset). One thread per output feature, tokens on the grid's y.
alias act = f32;
// y's element type: f32 where y is the residual stream, at every precision (Specialisation.f32).
alias y_t = act;

override WG: u32 = 64;

const NONE: u32 = 0xffffffffu;

struct Params {
  n: u32,       // output features (B's rows)
  yStride: u32, // elements between consecutive tokens' rows of y
  yOffset: u32, // element offset of token 0's row
  mat: u32,
  numMats: u32,
  maxRank: u32,
}

@group(0) @binding(0) var<storage, read> pool: array<f32>;
@group(0) @binding(1) var<storage, read> entries: array<vec4u>;
@group(0) @binding(2) var<storage, read> tokenSeq: array<u32>;
@group(0) @binding(3) var<storage, read> seqAdapter: array<u32>;
@group(0) @binding(4) var<storage, read> h: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<y_t>;
@group(0) @binding(6) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let o = gid.x;
  let t = gid.y;
  if (o >= p.n) { return; }
  let adapter = seqAdapter[tokenSeq[t]];
  if (adapter == NONE) { return; }
  let e = entries[adapter * p.numMats + p.mat];
  let rank = e.z;
  if (rank == 0u) { return; }
  let bRow = e.y + o * rank;
  let hRow = t * p.maxRank;
  var sum = 0.0;
  for (var r = 0u; r < rank; r++) {
    sum += pool[bRow + r] * h[hRow + r];
  }
  let i = p.yOffset + t * p.yStride + o;
  y[i] = y_t(f32(y[i]) + bitcast<f32>(e.w) * sum);
}
