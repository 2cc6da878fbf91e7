// Granite 4.0-H's Mamba-2 scan over a ragged step, after the conv (src/kernels/mamba2.ts,
// src/model/mamba2.ts's mamba2Scan). One workgroup per (head h, row of the step): it walks the
// row's tokens in order over its slot's state S (headDim × stateSize, f32), each invocation owning
// rows i of S (head channels). Per token, with g = h / (heads / groups) the B/C group head h reads:
//   dt = softplus(dt_h + dt_bias_h), A = −exp(A_log) (or the stored −exp(A_log));
//   S ← exp(dt·A)·S + dt·x ⊗ B_g;  y = S·C_g + D_h·x;  y ← y ⊙ SiLU(z)
// The grouped RMSNorm after the gate spans heads, so it is a separate dispatch (rms_norm).
alias act = f32;

override WG: u32 = 64;
const MAX_STATE: u32 = 256u;

struct Params {
  heads: u32,
  groups: u32,  // divides heads
  P: u32,       // head dim
  N: u32,       // state size, ≤ MAX_STATE
  aNeg: u32,    // 1: the decay tensor holds −exp(A_log) (GGUF's ssm_a); 0: A_log
  dtOff: u32,   // where dt's rows [T, heads] start in zdt (elements); z's [T, heads·P] start at 0
  stride: u32,  // floats of one slot in state
  sOff: u32,    // where S starts in a slot (after the conv's window, in the layer's slot state)
}

struct Counts {
  T: u32,
  S: u32,
}

@group(0) @binding(0) var<storage, read> conv: array<act>;          // [T, heads·P + 2·groups·N] x, B, C after the conv and SiLU
@group(0) @binding(1) var<storage, read> zdt: array<act>;           // z [T, heads·P] at 0, dt [T, heads] at dtOff
@group(0) @binding(2) var<storage, read> vecs: array<f32>;          // dt_bias [heads], the decay tensor [heads], D [heads]
@group(0) @binding(3) var<storage, read_write> state: array<f32>;   // [maxSeqs, stride], S [heads, P, N] at sOff
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
  if (s >= counts.S) { return; }
  var first = 0u;
  if (s > 0u) { first = lastToken[s - 1u] + 1u; }
  let last = lastToken[s];
  let P = p.P;
  let N = p.N;
  let inner = p.heads * P;
  let C = inner + 2u * p.groups * N;
  let g = h / (p.heads / p.groups);
  let sb = rowSlot[s] * p.stride + p.sOff + h * P * N;
  var A = -exp(vecs[p.heads + h]);
  if (p.aNeg == 1u) { A = vecs[p.heads + h]; }
  let D = vecs[2u * p.heads + h];
  for (var t = first; t <= last; t++) {
    for (var j = lid; j < N; j += WG) {
      bc[j] = f32(conv[t * C + inner + g * N + j]);
      bc[MAX_STATE + j] = f32(conv[t * C + inner + (p.groups + g) * N + j]);
    }
    workgroupBarrier();
    let u = f32(zdt[p.dtOff + t * p.heads + h]) + vecs[h];
    var dt = u;
    if (u <= 20.0) { dt = log(1.0 + exp(u)); }
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
}
