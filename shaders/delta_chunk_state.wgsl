// The chunked delta rule's state pass (src/kernels/delta-net-chunked.ts; the math in
// src/model/delta-net-chunked.ts, deltaChunkState), after delta_chunk.wgsl: one workgroup per
// (value head h, row s of the step) for rows of at least chunkFrom tokens, walking the row's
// chunks in order over its slot's state S (dk × dv, f32); invocations own columns j of S (each
// column's update reads only itself). Per chunk of n tokens, from delta_chunk's W, U, P, F:
//   V' = U − W·S;  o_t = exp(gc_t)·rq_t·(q_tᵀS) + Σ_{s≤t} P[t][s]·V'_s;
//   S ← exp(gc_n)·S + Σ_t exp(gc_n − gc_t)·rk_t·k_t·V'_tᵀ;
// then y_t = RMSNorm(o_t)·w ⊙ SiLU(z_t) as delta_rule's, one invocation per token (o kept in
// U's place in `chunk`, f32). A row of T tokens takes ⌈T/CH⌉ state updates instead of T.
alias act = f32;

override WG: u32 = 64;
override CH: u32 = 32;       // chunk length, ≤ MAX_CH
const MAX_CH: u32 = 64u;

@group(0) @binding(0) var<storage, read> conv: array<act>;          // [T, 2·nk·dk + nv·dv] q, k, v after the conv
@group(0) @binding(1) var<storage, read> zba: array<act>;           // z [T, nv·dv] at 0
@group(0) @binding(2) var<storage, read> vecs: array<f32>;          // dt_bias [nv], decay [nv], norm [dv]
@group(0) @binding(3) var<storage, read_write> state: array<f32>;   // [maxSeqs, stride], S [nv, dk, dv] at sOff
@group(0) @binding(4) var<storage, read_write> chunk: array<f32>;   // delta_chunk's output
@group(0) @binding(5) var<storage, read_write> y: array<act>;       // [T, nv·dv]
@group(0) @binding(6) var<storage, read> lastToken: array<u32>;     // [maxSeqs]
@group(0) @binding(7) var<storage, read> rowSlot: array<u32>;       // [maxSeqs]
@group(0) @binding(8) var<uniform> counts: Counts;
@group(0) @binding(9) var<uniform> p: Params;

var<workgroup> qf: array<f32, CH>;  // exp(gc_t)·rq_t
var<workgroup> kf: array<f32, CH>;  // exp(gc_n − gc_t)·rk_t

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lidv: vec3u) {
  let h = wid.x;
  let s = wid.y;
  let lid = lidv.x;
  // Workgroup-uniform: the whole group returns or none does.
  if (s >= counts.S) { return; }
  let span = step_row(s);
  let first = span.x;
  let len = span.y + 1u - first;
  // A verify run's rows (shaders/lib/verify_runs.wgsl, prepended) all stay with delta_rule, which checkpoints them.
  if (len < p.chunkFrom || run_end(s) > s) { return; }
  let dk = p.dk;
  let dv = p.dv;
  let kh = delta_key_head(p, h);
  let width = 2u * p.nk * dk + p.nv * dv;
  let qb = kh * dk;
  let kb = p.nk * dk + kh * dk;
  let sb = rowSlot[s] * p.stride + p.sOff + h * dk * dv;

  for (var t0 = first; t0 < first + len; t0 += CH) {
    let n = min(CH, first + len - t0);
    let gEnd = chunk[p.fOff + ((t0 + n - 1u) * p.nv + h) * 4u];
    for (var t = lid; t < n; t += WG) {
      let f = p.fOff + ((t0 + t) * p.nv + h) * 4u;
      qf[t] = exp(chunk[f]) * chunk[f + 1u];
      kf[t] = exp(gEnd - chunk[f]) * chunk[f + 2u];
    }
    workgroupBarrier();
    let decay = exp(gEnd);
    for (var j = lid; j < dv; j += WG) {
      var vn: array<f32, MAX_CH>;
      var o: array<f32, MAX_CH>;
      for (var t = 0u; t < n; t++) {
        vn[t] = chunk[p.uOff + ((t0 + t) * p.nv + h) * dv + j];
        o[t] = 0.0;
      }
      // V' = U − W·S and qᵀS, reading S's column once.
      for (var i = 0u; i < dk; i++) {
        let sij = state[sb + i * dv + j];
        for (var t = 0u; t < n; t++) {
          let tt = t0 + t;
          vn[t] -= chunk[p.wOff + (tt * p.nv + h) * dk + i] * sij;
          o[t] += f32(conv[tt * width + qb + i]) * sij;
        }
      }
      for (var t = 0u; t < n; t++) {
        var acc = qf[t] * o[t];
        let pr = p.pOff + ((t0 + t) * p.nv + h) * CH;
        for (var c = 0u; c <= t; c++) { acc += chunk[pr + c] * vn[c]; }
        chunk[p.uOff + ((t0 + t) * p.nv + h) * dv + j] = acc;
      }
      for (var i = 0u; i < dk; i++) {
        var acc = decay * state[sb + i * dv + j];
        for (var t = 0u; t < n; t++) { acc += kf[t] * f32(conv[(t0 + t) * width + kb + i]) * vn[t]; }
        state[sb + i * dv + j] = acc;
      }
    }
    // Every column's o is in chunk before the norm reads the rows; qf and kf are free again after it.
    storageBarrier();
    workgroupBarrier();
    for (var t = lid; t < n; t += WG) {
      let ob = p.uOff + ((t0 + t) * p.nv + h) * dv;
      var ss = 0.0;
      for (var j = 0u; j < dv; j++) { ss += chunk[ob + j] * chunk[ob + j]; }
      let inv = inverseSqrt(ss / f32(dv) + p.eps);
      let yb = (t0 + t) * p.nv * dv + h * dv;
      for (var j = 0u; j < dv; j++) {
        let z = f32(zba[yb + j]);
        y[yb + j] = act(chunk[ob + j] * inv * vecs[2u * p.nv + j] * z / (1.0 + exp(-z)));
      }
    }
    workgroupBarrier();
  }
}
