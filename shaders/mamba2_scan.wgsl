// Granite 4.0-H's Mamba-2 scan over a ragged step, after the conv (src/kernels/mamba2.ts,
// src/model/mamba2.ts's mamba2Scan). One workgroup per (head h, row of the step): it walks the
// row's tokens in order over its slot's state S (headDim × stateSize, f32), each invocation owning
// rows i of S (head channels). Per token, with g = h / (heads / groups) the B/C group head h reads:
//   dt = softplus(dt_h + dt_bias_h), A = −exp(A_log) (or the stored −exp(A_log));
//   S ← exp(dt·A)·S + dt·x ⊗ B_g;  y = S·C_g + D_h·x;  y ← y ⊙ SiLU(z)
// The grouped RMSNorm after the gate spans heads, so it is a separate dispatch (rms_norm).
// Rows of chunkFrom tokens or more are left to the chunked form (mamba2_chunk, mamba2_chunk_state).
// Params, the row and dt helpers: shaders/lib/mamba2_common.wgsl. A verify run (several rows on one
// slot) is walked by its first row's workgroups, a long first row too, S checkpointed after each of
// its rows but the last (shaders/lib/verify_runs.wgsl, prepended).
alias act = f32;

override WG: u32 = 64;

@group(0) @binding(0) var<storage, read> conv: array<act>;          // [T, heads·P + 2·groups·N] x, B, C after the conv and SiLU
@group(0) @binding(1) var<storage, read> zdt: array<act>;           // z [T, heads·P] at 0, dt [T, heads] at dtOff
@group(0) @binding(2) var<storage, read> vecs: array<f32>;          // dt_bias [heads], the decay tensor [heads], D [heads]
@group(0) @binding(3) var<storage, read_write> state: array<f32>;   // [slots + checkpoint rows, stride], S [heads, P, N] at sOff
@group(0) @binding(4) var<storage, read_write> y: array<act>;       // [T, heads·P]
@group(0) @binding(5) var<storage, read> lastToken: array<u32>;     // [maxSeqs]
@group(0) @binding(6) var<storage, read> rowSlot: array<u32>;       // [maxSeqs]
@group(0) @binding(7) var<uniform> counts: Counts;
@group(0) @binding(8) var<uniform> p: Params;

var<workgroup> bc: array<f32, 512>;  // B_g at [0, N), C_g at [MAX_STATE, MAX_STATE + N)

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
  let P = p.P;
  let N = p.N;
  let inner = p.heads * P;
  let C = inner + 2u * p.groups * N;
  let g = h / (p.heads / p.groups);
  let sb = rowSlot[s] * p.stride + p.sOff + h * P * N;
  let A = mamba2_a(p, h);
  let D = vecs[2u * p.heads + h];
  for (var r = s; r <= end; r++) {
    for (; t <= lastToken[r]; t++) {
      for (var j = lid; j < N; j += WG) {
        bc[j] = f32(conv[t * C + inner + g * N + j]);
        bc[MAX_STATE + j] = f32(conv[t * C + inner + (p.groups + g) * N + j]);
      }
      workgroupBarrier();
      let dt = mamba2_dt(p, h, t);
      let decay = exp(dt * A);
      for (var i = lid; i < P; i += WG) {
        let xi = f32(conv[t * C + h * P + i]);
        let row = sb + i * N;
        var acc = 0.0;
        for (var j = 0u; j < N; j++) {
          let v = decay * state[row + j] + dt * xi * bc[j];
          state[row + j] = v;
          acc += v * bc[MAX_STATE + j];
        }
        let z = f32(zdt[t * inner + h * P + i]);
        y[t * inner + h * P + i] = act((acc + D * xi) * z / (1.0 + exp(-z)));
      }
      // bc is reused by the next token.
      workgroupBarrier();
    }
    // A checkpoint: each invocation copies the rows of S it wrote.
    if (r < end) {
      let cb = (p.ckpt + r) * p.stride + p.sOff + h * P * N;
      for (var i = lid; i < P; i += WG) {
        for (var j = 0u; j < N; j++) { state[cb + i * N + j] = state[sb + i * N + j]; }
      }
    }
  }
}
