// LFM2's gated short convolution over a ragged step, with each sequence's state (src/kernels/short-conv.ts):
//   u[t, c] = B[t, c] · x[t, c]                     (in_proj's rows B, C, x of token t)
//   y[t, c] = C[t, c] · Σ_j w[c, j] · u[t − (taps − 1) + j, c]
// where the inputs before the step are the sequence's state (its last taps − 1 inputs u, oldest
// first, zero for a new sequence), which the step then advances. One invocation per (channel, row
// of the step): it walks the row's tokens in order with the window in registers, so a prefill
// chunk and a one-token decode are the same dispatch; a verify run (several rows on one slot) is
// walked by its first row's invocation, checkpointing the window after each of its rows but the
// last (shaders/lib/verify_runs.wgsl). u, the sums and the state stay f32.
alias act = f32;

override WG: u32 = 64;
// MAX_TAPS and conv_window_step: shaders/lib/conv_window.wgsl; run_continues and run_end:
// shaders/lib/verify_runs.wgsl; both prepended.

struct Params {
  n: u32,     // channels (the hidden size)
  taps: u32,  // kernel taps, 1 ..= MAX_TAPS
  ckpt: u32,  // the first checkpoint row of state: row r's checkpoint is its slot ckpt + r
}

struct Counts {
  T: u32,  // tokens in the step
  S: u32,  // rows (sequences) in the step
}

@group(0) @binding(0) var<storage, read> bcx: array<act>;           // [T, 3n] B, C, x per token
@group(0) @binding(1) var<storage, read> w: array<f32>;             // [n, taps]
@group(0) @binding(2) var<storage, read_write> state: array<f32>;   // [slots, taps − 1, n] per sequence slot, then per checkpoint row
@group(0) @binding(3) var<storage, read_write> y: array<act>;       // [T, n]
@group(0) @binding(4) var<storage, read> lastToken: array<u32>;     // [maxSeqs] each row's last token in the step
@group(0) @binding(5) var<storage, read> rowSlot: array<u32>;       // [maxSeqs] each row's sequence slot
@group(0) @binding(6) var<uniform> counts: Counts;
@group(0) @binding(7) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let c = gid.x;
  let s = gid.y;
  if (c >= p.n || s >= counts.S || run_continues(s)) { return; }
  // A row's tokens are contiguous in the step, after the previous row's.
  var t = 0u;
  if (s > 0u) { t = lastToken[s - 1u] + 1u; }
  let end = run_end(s);
  let k = p.taps - 1u;
  let base = rowSlot[s] * k * p.n + c;
  var wk: array<f32, MAX_TAPS>;
  var win: array<f32, MAX_TAPS>;
  for (var j = 0u; j < p.taps; j++) { wk[j] = w[c * p.taps + j]; }
  for (var j = 0u; j < k; j++) { win[j] = state[base + j * p.n]; }
  let n3 = 3u * p.n;
  for (var r = s; r <= end; r++) {
    for (; t <= lastToken[r]; t++) {
      let u = f32(bcx[t * n3 + c]) * f32(bcx[t * n3 + 2u * p.n + c]);
      let acc = conv_window_step(&wk, &win, k, u);
      y[t * p.n + c] = act(f32(bcx[t * n3 + p.n + c]) * acc);
    }
    if (r < end) {
      let cb = (p.ckpt + r) * k * p.n + c;
      for (var j = 0u; j < k; j++) { state[cb + j * p.n] = win[j]; }
    }
  }
  for (var j = 0u; j < k; j++) { state[base + j * p.n] = win[j]; }
}
