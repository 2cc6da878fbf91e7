// The chunked delta rule's intra-chunk pass (src/kernels/delta-net-chunked.ts; the math in
// src/model/delta-net-chunked.ts, deltaChunkIntra): one workgroup per (value head h, row s of the
// step, chunk c of the row), for rows of at least chunkFrom tokens. Everything here is within a
// chunk and needs no state, so every chunk of every prefill row runs side by side. For the
// chunk's n ≤ CH tokens:
//   rq, rk = 1/‖q‖·1/√dk, 1/‖k‖ (L2 norms as delta_rule's); β = sigmoid(b); g = −A·softplus(a + dt);
//   gc = cumulative g;  A[t][s] = β_t·exp(gc_t − gc_s)·(k̂_t·k̂_s) (s < t);  P[t][s] = exp(gc_t − gc_s)·(q̂_t·k̂_s) (s ≤ t);
//   M = (I + A)⁻¹ by forward substitution (n − 1 sequential rows: the UT transform);
//   W = M·(β·exp(gc)·K̂) [n, dk];  U = M·(β·V) [n, dv].
// It writes, per (token, value head), W, U, P's row and F = (gc, rq, rk) into `chunk` (f32 at every
// precision) for delta_chunk_state.wgsl.
alias act = f32;

override WG: u32 = 64;
override CH: u32 = 32;       // chunk length
override TRI: u32 = CH * (CH - 1u) / 2u + 1u;  // a strictly lower CH × CH triangle, packed (at least one)

@group(0) @binding(0) var<storage, read> conv: array<act>;          // [T, 2·nk·dk + nv·dv] q, k, v after the conv
@group(0) @binding(1) var<storage, read> zba: array<act>;           // b [T, nv] at bOff, a [T, nv] at aOff
@group(0) @binding(2) var<storage, read> vecs: array<f32>;          // dt_bias [nv], decay [nv], norm [dv]
@group(0) @binding(3) var<storage, read_write> chunk: array<f32>;   // W, U, P, F as above
@group(0) @binding(4) var<storage, read> lastToken: array<u32>;     // [maxSeqs]
@group(0) @binding(5) var<uniform> counts: Counts;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> m: array<f32, TRI>;  // A, then M's strictly lower part: row t's c < t at tri(t) + c
var<workgroup> gc: array<f32, CH>;
var<workgroup> rq: array<f32, CH>;
var<workgroup> rk: array<f32, CH>;
var<workgroup> bt: array<f32, CH>;
var<workgroup> row: array<f32, CH>;  // the solve's next row before it replaces A's

// Where row t of the packed triangle starts.
fn tri(t: u32) -> u32 { return t * (t - 1u) / 2u; }

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
  if (len < p.chunkFrom || wid.z * CH >= len) { return; }
  let t0 = first + wid.z * CH;
  let n = min(CH, len - wid.z * CH);
  let dk = p.dk;
  let dv = p.dv;
  let kh = delta_key_head(p, h);
  let width = 2u * p.nk * dk + p.nv * dv;
  let qb = kh * dk;           // q's columns of key head kh in a conv row
  let kb = p.nk * dk + kh * dk;
  let vb = 2u * p.nk * dk + h * dv;
  let rate = delta_rate(p, vecs[p.nv + h]);

  // Per token: the norms, β and g.
  for (var t = lid; t < n; t += WG) {
    let tt = t0 + t;
    var sq = 0.0;
    var sk = 0.0;
    for (var i = 0u; i < dk; i++) {
      let q = f32(conv[tt * width + qb + i]);
      let k = f32(conv[tt * width + kb + i]);
      sq += q * q;
      sk += k * k;
    }
    rq[t] = inverseSqrt(sq + p.eps) * inverseSqrt(f32(dk));
    rk[t] = inverseSqrt(sk + p.eps);
    bt[t] = 1.0 / (1.0 + exp(-f32(zba[p.bOff + tt * p.nv + h])));
    gc[t] = delta_log_decay(rate, f32(zba[p.aOff + tt * p.nv + h]) + vecs[h]);
  }
  workgroupBarrier();
  if (lid == 0u) {
    for (var t = 1u; t < n; t++) { gc[t] += gc[t - 1u]; }
  }
  workgroupBarrier();
  for (var t = lid; t < n; t += WG) {
    let f = p.fOff + ((t0 + t) * p.nv + h) * 4u;
    chunk[f] = gc[t];
    chunk[f + 1u] = rq[t];
    chunk[f + 2u] = rk[t];
  }

  // The decay-masked products: P (q̂·k̂, s ≤ t) to chunk, A (β·k̂·k̂, s < t) to m.
  for (var e = lid; e < n * n; e += WG) {
    let t = e / n;
    let c = e % n;
    if (c <= t) {
      var qk = 0.0;
      var kk = 0.0;
      for (var i = 0u; i < dk; i++) {
        let kc = f32(conv[(t0 + c) * width + kb + i]);
        qk += f32(conv[(t0 + t) * width + qb + i]) * kc;
        kk += f32(conv[(t0 + t) * width + kb + i]) * kc;
      }
      let decay = exp(gc[t] - gc[c]);
      chunk[p.pOff + ((t0 + t) * p.nv + h) * CH + c] = decay * qk * rq[t] * rk[c];
      if (c < t) { m[tri(t) + c] = bt[t] * decay * kk * rk[t] * rk[c]; }
    }
  }
  workgroupBarrier();

  // M = (I + A)⁻¹, a row at a time: M[t][c] = −A[t][c] − Σ_{c<j<t} A[t][j]·M[j][c].
  for (var t = 1u; t < n; t++) {
    for (var c = lid; c < t; c += WG) {
      var acc = -m[tri(t) + c];
      for (var j = c + 1u; j < t; j++) { acc -= m[tri(t) + j] * m[tri(j) + c]; }
      row[c] = acc;
    }
    workgroupBarrier();
    for (var c = lid; c < t; c += WG) { m[tri(t) + c] = row[c]; }
    workgroupBarrier();
  }

  // W = M·(β·exp(gc)·K̂) and U = M·(β·V), M's unit diagonal included.
  let cols = dk + dv;
  for (var e = lid; e < n * cols; e += WG) {
    let t = e / cols;
    let col = e % cols;
    var acc = 0.0;
    for (var c = 0u; c <= t; c++) {
      var coef = bt[c];
      if (c < t) { coef *= m[tri(t) + c]; }
      if (col < dk) {
        acc += coef * exp(gc[c]) * rk[c] * f32(conv[(t0 + c) * width + kb + col]);
      } else {
        acc += coef * f32(conv[(t0 + c) * width + vb + col - dk]);
      }
    }
    if (col < dk) {
      chunk[p.wOff + ((t0 + t) * p.nv + h) * dk + col] = acc;
    } else {
      chunk[p.uOff + ((t0 + t) * p.nv + h) * dv + col - dk] = acc;
    }
  }
}
