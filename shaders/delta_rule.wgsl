// Qwen3.5's gated delta rule over a ragged step, after the conv (src/kernels/delta-net.ts,
// src/model/delta-net.ts's deltaNetCore). One workgroup per (value head h, row of the step): it
// walks the row's tokens in order over its slot's state S (dk × dv, f32), each invocation owning
// columns j of S. Per token:
//   k, q = the key head's rows, L2-normalised (x·rsqrt(Σx² + eps)), q times 1/√dk;
//   β = sigmoid(b_h), decay = exp(−A·softplus(a_h + dt_h)), A = exp(A_log) or −ssm_a;
//   S ← decay·S; S += k ⊗ β(v − Sᵀk); o = Sᵀq;
//   y = RMSNorm(o)·w ⊙ SiLU(z_h)   (the plain w)
// Value head h reads key head h / (nv / nk) (HF's grouped heads) or h % nk (GGUF's tiled ones).
// Rows of chunkFrom tokens or more are left to the chunked form (delta_chunk, delta_chunk_state),
// except the first row of a verify run (several rows on one slot), whose run is walked here by that
// row's workgroups, S checkpointed after each of its rows but the last (shaders/lib/verify_runs.wgsl,
// prepended).
alias act = f32;

override WG: u32 = 64;
const MAX_DK: u32 = 256u;
const MAX_DV: u32 = 256u;

@group(0) @binding(0) var<storage, read> conv: array<act>;          // [T, 2·nk·dk + nv·dv] q, k, v after the conv
@group(0) @binding(1) var<storage, read> zba: array<act>;           // z [T, nv·dv] at 0, b [T, nv] at bOff, a [T, nv] at aOff
@group(0) @binding(2) var<storage, read> vecs: array<f32>;          // dt_bias [nv], decay [nv], norm [dv]
@group(0) @binding(3) var<storage, read_write> state: array<f32>;   // [slots + checkpoint rows, stride], S [nv, dk, dv] at sOff
@group(0) @binding(4) var<storage, read_write> y: array<act>;       // [T, nv·dv]
@group(0) @binding(5) var<storage, read> lastToken: array<u32>;     // [maxSeqs]
@group(0) @binding(6) var<storage, read> rowSlot: array<u32>;       // [maxSeqs]
@group(0) @binding(7) var<uniform> counts: Counts;
@group(0) @binding(8) var<uniform> p: Params;

var<workgroup> kq: array<f32, 512>;  // k at [0, dk), q at [MAX_DK, MAX_DK + dk)
var<workgroup> o: array<f32, MAX_DV>;
var<workgroup> red: array<f32, WG>;
var<workgroup> red2: array<f32, WG>;

// Sums red and red2 over the workgroup into their element 0 (WG a power of two).
fn reduce2(lid: u32) {
  workgroupBarrier();
  for (var off = WG / 2u; off > 0u; off = off / 2u) {
    if (lid < off) {
      red[lid] += red[lid + off];
      red2[lid] += red2[lid + off];
    }
    workgroupBarrier();
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lidv: vec3u) {
  let h = wid.x;
  let s = wid.y;
  let lid = lidv.x;
  // Workgroup-uniform: the whole group returns or none does.
  if (s >= counts.S || run_continues(s)) { return; }
  let span = step_row(s);
  var t = span.x;
  let end = run_end(s);
  if (p.chunkFrom > 0u && span.y + 1u - t >= p.chunkFrom && end == s) { return; }
  let dk = p.dk;
  let dv = p.dv;
  let kh = delta_key_head(p, h);
  let C = 2u * p.nk * dk + p.nv * dv;
  let sb = rowSlot[s] * p.stride + p.sOff + h * dk * dv;
  let rate = delta_rate(p, vecs[p.nv + h]);
  for (var r = s; r <= end; r++) {
    for (; t <= lastToken[r]; t++) {
      var sk = 0.0;
      var sq = 0.0;
      for (var i = lid; i < dk; i += WG) {
        let q = f32(conv[t * C + kh * dk + i]);
        let k = f32(conv[t * C + p.nk * dk + kh * dk + i]);
        kq[MAX_DK + i] = q;
        kq[i] = k;
        sq += q * q;
        sk += k * k;
      }
      red[lid] = sk;
      red2[lid] = sq;
      reduce2(lid);
      let ik = inverseSqrt(red[0] + p.eps);
      let iq = inverseSqrt(red2[0] + p.eps) * inverseSqrt(f32(dk));
      let beta = 1.0 / (1.0 + exp(-f32(zba[p.bOff + t * p.nv + h])));
      let decay = exp(delta_log_decay(rate, f32(zba[p.aOff + t * p.nv + h]) + vecs[h]));
      // Everyone has read red before it is written again below.
      workgroupBarrier();
      var ss = 0.0;
      for (var j = lid; j < dv; j += WG) {
        var kv = 0.0;
        for (var i = 0u; i < dk; i++) { kv += state[sb + i * dv + j] * kq[i]; }
        let delta = beta * (f32(conv[t * C + 2u * p.nk * dk + h * dv + j]) - decay * kv * ik);
        var acc = 0.0;
        for (var i = 0u; i < dk; i++) {
          let v = decay * state[sb + i * dv + j] + kq[i] * ik * delta;
          state[sb + i * dv + j] = v;
          acc += v * kq[MAX_DK + i];
        }
        acc *= iq;
        o[j] = acc;
        ss += acc * acc;
      }
      red[lid] = ss;
      red2[lid] = 0.0;
      reduce2(lid);
      let inv = inverseSqrt(red[0] / f32(dv) + p.eps);
      for (var j = lid; j < dv; j += WG) {
        let z = f32(zba[t * p.nv * dv + h * dv + j]);
        y[t * p.nv * dv + h * dv + j] = act(o[j] * inv * vecs[2u * p.nv + j] * z / (1.0 + exp(-z)));
      }
      // kq, o and red are reused by the next token.
      workgroupBarrier();
    }
    // A checkpoint: each invocation copies the columns of S it wrote.
    if (r < end) {
      let cb = (p.ckpt + r) * p.stride + p.sOff + h * dk * dv;
      for (var j = lid; j < dv; j += WG) {
        for (var i = 0u; i < dk; i++) { state[cb + i * dv + j] = state[sb + i * dv + j]; }
      }
    }
  }
}
