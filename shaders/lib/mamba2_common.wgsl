// What Granite 4.0-H's Mamba-2 scan kernels share: mamba2_scan.wgsl (the recurrence) and the chunked
// (SSD) form's mamba2_chunk.wgsl and mamba2_chunk_state.wgsl. src/kernels/mamba2.ts's
// mamba2ScanParams packs Params in this order. Counts and the row: lib/step_rows.wgsl. Each kernel
// declares `conv`, `zdt`, `vecs`, `lastToken`, `counts` and `p` itself.

const MAX_STATE: u32 = 256u;

struct Params {
  heads: u32,
  groups: u32,    // divides heads
  P: u32,         // head dim
  N: u32,         // state size, ≤ MAX_STATE
  aNeg: u32,      // 1: the decay tensor holds −exp(A_log) (GGUF's ssm_a); 0: A_log
  dtOff: u32,     // where dt's rows [T, heads] start in zdt (elements); z's [T, heads·P] start at 0
  stride: u32,    // floats of one slot in state
  sOff: u32,      // where S starts in a slot (after the conv's window, in the layer's slot state)
  chunkFrom: u32, // rows of at least this many tokens take the chunked form (0: none)
  ckpt: u32,      // mamba2_scan: the first checkpoint row of state (row r's checkpoint is its slot ckpt + r)
}



// A = −exp(A_log) of head h, whichever form the decay tensor (vecs[heads + h]) holds.
fn mamba2_a(prm: Params, h: u32) -> f32 {
  if (prm.aNeg == 1u) { return vecs[prm.heads + h]; }
  return -exp(vecs[prm.heads + h]);
}

// dt of head h at token t: softplus(dt + dt_bias) (torch's softplus: linear above 20).
fn mamba2_dt(prm: Params, h: u32, t: u32) -> f32 {
  let u = f32(zdt[prm.dtOff + t * prm.heads + h]) + vecs[h];
  if (u <= 20.0) { return log(1.0 + exp(u)); }
  return u;
}

// Row s's first token and length where the chunked form takes it (chunkFrom tokens or more), else
// length 0, past the step's rows too: a return on it is workgroup-uniform.
fn mamba2_chunk_row(s: u32) -> vec2u {
  if (s >= counts.S || p.chunkFrom == 0u) { return vec2u(0u); }
  let span = step_row(s);
  let len = span.y + 1u - span.x;
  if (len < p.chunkFrom) { return vec2u(0u); }
  return vec2u(span.x, len);
}
