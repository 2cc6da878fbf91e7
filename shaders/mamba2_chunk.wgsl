// The chunked (SSD) Mamba-2 scan's intra-chunk pass (src/kernels/mamba2-chunked.ts; the math in
// src/model/mamba2-chunked.ts): one workgroup per (head h, row s of the step, chunk c of the row),
// for rows of at least chunkFrom tokens. Nothing here reads the state, so every chunk of every
// prefill row runs side by side. For the chunk's n ≤ CH tokens, with dt_t = softplus(dt + dt_bias),
// a_t = dt_t·A and seg(u, t) = a_{u+1} + … + a_t (summed over its own range, not a difference):
//   L[t][u] = exp(seg(u, t))·(C_t·B_u)·dt_u  (u ≤ t: the decay mask ∘ C·Bᵀ, the token's own dt)
//   yd_t = Σ_{u≤t} L[t][u]·x_u + D·x_t
// into `yd` (f32 at both precisions); mamba2_chunk_state.wgsl adds the carried state's part.
alias act = f32;

override WG: u32 = 64;
override CH: u32 = 32;       // chunk length, ≤ 32 (L is CH² floats of workgroup memory)
override CH2: u32 = CH * CH;

@group(0) @binding(0) var<storage, read> conv: array<act>;          // [T, heads·P + 2·groups·N] x, B, C after the conv and SiLU
@group(0) @binding(1) var<storage, read> zdt: array<act>;           // dt [T, heads] at dtOff
@group(0) @binding(2) var<storage, read> vecs: array<f32>;          // dt_bias [heads], the decay tensor [heads], D [heads]
@group(0) @binding(3) var<storage, read_write> yd: array<f32>;      // [T, heads·P]
@group(0) @binding(4) var<storage, read> lastToken: array<u32>;     // [maxSeqs]
@group(0) @binding(5) var<uniform> counts: Counts;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> L: array<f32, CH2>;  // row-major [CH, CH], the lower triangle
var<workgroup> dts: array<f32, CH>;
var<workgroup> ad: array<f32, CH>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lidv: vec3u) {
  let row = mamba2_chunk_row(wid.y);
  let first = row.x;
  let len = row.y;
  // Workgroup-uniform: the whole group returns or none does.
  if (wid.z * CH >= len) { return; }
  let h = wid.x;
  let lid = lidv.x;
  let t0 = first + wid.z * CH;
  let n = min(CH, len - wid.z * CH);
  let P = p.P;
  let N = p.N;
  let inner = p.heads * P;
  let C = inner + 2u * p.groups * N;
  let g = h / (p.heads / p.groups);
  let bb = inner + g * N;              // B_g's columns in a conv row
  let cb = inner + (p.groups + g) * N; // C_g's
  let A = mamba2_a(p, h);

  for (var t = lid; t < n; t += WG) {
    let dt = mamba2_dt(p, h, t0 + t);
    dts[t] = dt;
    ad[t] = dt * A;
  }
  workgroupBarrier();
  for (var e = lid; e < n * n; e += WG) {
    let t = e / n;
    let u = e % n;
    if (u <= t) {
      var dot = 0.0;
      for (var j = 0u; j < N; j++) { dot += f32(conv[(t0 + t) * C + cb + j]) * f32(conv[(t0 + u) * C + bb + j]); }
      var seg = 0.0;
      for (var r = u + 1u; r <= t; r++) { seg += ad[r]; }
      L[t * CH + u] = exp(seg) * dot * dts[u];
    }
  }
  workgroupBarrier();
  let D = vecs[2u * p.heads + h];
  for (var e = lid; e < n * P; e += WG) {
    let t = e / P;
    let i = e % P;
    let xt = f32(conv[(t0 + t) * C + h * P + i]);
    var acc = D * xt;
    for (var u = 0u; u <= t; u++) { acc += L[t * CH + u] * f32(conv[(t0 + u) * C + h * P + i]); }
    yd[(t0 + t) * inner + h * P + i] = acc;
  }
}
