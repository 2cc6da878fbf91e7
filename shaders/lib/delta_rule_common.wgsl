// What Qwen3.5's gated delta rule kernels share: delta_rule.wgsl (the recurrence) and the chunked
// form's delta_chunk.wgsl and delta_chunk_state.wgsl. src/kernels/delta-net.ts's deltaRuleParams
// packs Params in this order. Counts and the row: lib/step_rows.wgsl. Each kernel declares the
// step's `lastToken` rows itself.

struct Params {
  nk: u32,        // key heads
  nv: u32,        // value heads
  dk: u32,        // key head dim
  dv: u32,        // value head dim
  tiled: u32,     // 1: value head h reads key head h % nk; 0: h / (nv / nk)
  aNeg: u32,      // 1: the decay tensor holds −exp(A_log); 0: A_log
  eps: f32,
  bOff: u32,      // where b's rows [T, nv] start in zba (elements)
  aOff: u32,      // where a's rows [T, nv] start in zba
  stride: u32,    // floats of one slot in state
  sOff: u32,      // where S starts in a slot (after the conv's window, in the layer's slot state)
  chunkFrom: u32, // rows of at least this many tokens take the chunked form (0: none)
  ckpt: u32,      // delta_rule: the first checkpoint row of state (row r's checkpoint is its slot ckpt + r)
  wOff: u32,      // the chunked form's scratch (floats): W [T, nv, dk]
  uOff: u32,      // U [T, nv, dv], then o
  pOff: u32,      // P [T, nv, CH]
  fOff: u32,      // F [T, nv, 4]: gc, rq, rk, unused
}



// The key head value head h reads: h / (nv / nk) (HF's grouped heads) or h % nk (GGUF's tiled ones).
fn delta_key_head(prm: Params, h: u32) -> u32 {
  if (prm.tiled == 1u) { return h % prm.nk; }
  return h / (prm.nv / prm.nk);
}

// A of value head h from the stored decay tensor: exp(A_log), or −(−exp(A_log)).
fn delta_rate(prm: Params, stored: f32) -> f32 {
  if (prm.aNeg == 1u) { return -stored; }
  return exp(stored);
}

// The log decay g = −A·softplus(a + dt_bias) (torch's softplus: linear above 20).
fn delta_log_decay(rate: f32, x: f32) -> f32 {
  var sp = x;
  if (x <= 20.0) { sp = log(1.0 + exp(x)); }
  return -rate * sp;
}
