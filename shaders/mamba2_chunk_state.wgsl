// The chunked (SSD) Mamba-2 scan's state pass (src/kernels/mamba2-chunked.ts; the math in
// src/model/mamba2-chunked.ts), after mamba2_chunk.wgsl: one workgroup per (head h, row s of the
// step) for rows of at least chunkFrom tokens, walking the row's chunks in order over its slot's
// state S (P × N, f32); invocations own rows i of S (each row's update reads only itself). Per
// chunk of n tokens, with a_t = dt_t·A:
//   y_t = yd_t + exp(a_0 + … + a_t)·S·C_t;  y_t ← y_t ⊙ SiLU(z_t)
//   S ← exp(a_0 + … + a_{n−1})·S + Σ_u exp(a_{u+1} + … + a_{n−1})·dt_u·x_u ⊗ B_u
// A row of T tokens takes ⌈T/CH⌉ state updates instead of T.
alias act = f32;

override WG: u32 = 64;
override CH: u32 = 32;       // chunk length, ≤ MAX_CH (mamba2_chunk takes ≤ 32 too)
const MAX_CH: u32 = 32u;

@group(0) @binding(0) var<storage, read> conv: array<act>;          // [T, heads·P + 2·groups·N] x, B, C after the conv and SiLU
@group(0) @binding(1) var<storage, read> zdt: array<act>;           // z [T, heads·P] at 0, dt [T, heads] at dtOff
@group(0) @binding(2) var<storage, read> vecs: array<f32>;          // dt_bias [heads], the decay tensor [heads], D [heads]
@group(0) @binding(3) var<storage, read_write> state: array<f32>;   // [maxSeqs, stride], S [heads, P, N] at sOff
@group(0) @binding(4) var<storage, read> yd: array<f32>;            // mamba2_chunk's output [T, heads·P]
@group(0) @binding(5) var<storage, read_write> y: array<act>;       // [T, heads·P]
@group(0) @binding(6) var<storage, read> lastToken: array<u32>;     // [maxSeqs]
@group(0) @binding(7) var<storage, read> rowSlot: array<u32>;       // [maxSeqs]
@group(0) @binding(8) var<uniform> counts: Counts;
@group(0) @binding(9) var<uniform> p: Params;

var<workgroup> ad: array<f32, CH>;
var<workgroup> qf: array<f32, CH>;  // exp(a_0 + … + a_t): the carried state's weight at token t
var<workgroup> kf: array<f32, CH>;  // exp(a_{u+1} + … + a_{n−1})·dt_u: token u's weight in the chunk's state

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lidv: vec3u) {
  let s = wid.y;
  let row = mamba2_chunk_row(s);
  let first = row.x;
  let len = row.y;
  // Workgroup-uniform: the whole group returns or none does. A verify run's rows
  // (shaders/lib/verify_runs.wgsl, prepended) all stay with mamba2_scan, which checkpoints them.
  if (len == 0u || run_end(s) > s) { return; }
  let h = wid.x;
  let lid = lidv.x;
  let P = p.P;
  let N = p.N;
  let inner = p.heads * P;
  let C = inner + 2u * p.groups * N;
  let g = h / (p.heads / p.groups);
  let bb = inner + g * N;
  let cb = inner + (p.groups + g) * N;
  let A = mamba2_a(p, h);
  let sb = rowSlot[s] * p.stride + p.sOff + h * P * N;

  for (var t0 = first; t0 < first + len; t0 += CH) {
    let n = min(CH, first + len - t0);
    for (var t = lid; t < n; t += WG) { ad[t] = mamba2_dt(p, h, t0 + t) * A; }
    workgroupBarrier();
    for (var t = lid; t < n; t += WG) {
      var head = 0.0;
      for (var r = 0u; r <= t; r++) { head += ad[r]; }
      var tail = 0.0;
      for (var r = t + 1u; r < n; r++) { tail += ad[r]; }
      qf[t] = exp(head);
      kf[t] = exp(tail) * mamba2_dt(p, h, t0 + t);
    }
    workgroupBarrier();
    let decay = qf[n - 1u];
    for (var i = lid; i < P; i += WG) {
      var xs: array<f32, MAX_CH>;
      var o: array<f32, MAX_CH>;
      for (var t = 0u; t < n; t++) {
        xs[t] = kf[t] * f32(conv[(t0 + t) * C + h * P + i]);
        o[t] = 0.0;
      }
      // S·C_t from the carried S and S's update, reading each element of S's row once.
      let row = sb + i * N;
      for (var j = 0u; j < N; j++) {
        let sij = state[row + j];
        var acc = decay * sij;
        for (var t = 0u; t < n; t++) {
          let tt = (t0 + t) * C;
          o[t] += sij * f32(conv[tt + cb + j]);
          acc += xs[t] * f32(conv[tt + bb + j]);
        }
        state[row + j] = acc;
      }
      for (var t = 0u; t < n; t++) {
        let yi = (t0 + t) * inner + h * P + i;
        let z = f32(zdt[yi]);
        y[yi] = act((yd[yi] + qf[t] * o[t]) * z / (1.0 + exp(-z)));
      }
    }
    // ad, qf and kf are rewritten by the next chunk.
    workgroupBarrier();
  }
}
