// A causal depthwise convolution then SiLU over a ragged step, with each sequence's state
// (Qwen3.5's DeltaNet conv over q, k, v; Granite 4.0-H's Mamba-2 conv over x, B, C, biased;
// src/kernels/delta-net.ts):
//   y[t, c] = silu(Σ_j w[c, j] · x[t − (taps − 1) + j, c] + bias[c])   (bias 0 unless p.bias)
// the inputs before the step being the sequence's state (its last taps − 1 inputs, oldest first,
// zero for a new sequence), which the step advances. One invocation per (channel, row of the
// step), walking the row's tokens in order: prefill chunks and one-token decode alike; a verify run
// is walked by its first row's invocation, checkpointing the window after each of its rows but the
// last (shaders/lib/verify_runs.wgsl). The sums and the state stay f32.
alias act = f32;

override WG: u32 = 64;
// MAX_TAPS and conv_window_step: shaders/lib/conv_window.wgsl; run_continues and run_end:
// shaders/lib/verify_runs.wgsl; both prepended.

struct Params {
  n: u32,       // channels
  taps: u32,    // 1 ..= MAX_TAPS
  stride: u32,  // floats of one slot in state (at least (taps − 1)·n: the layer's slot state may hold more after it)
  bias: u32,    // 1: w holds the bias [n] after the taps (Mamba-2's conv1d.bias); 0: no bias
  ckpt: u32,    // the first checkpoint row of state: row r's checkpoint is its slot ckpt + r
}

struct Counts {
  T: u32,
  S: u32,
}

@group(0) @binding(0) var<storage, read> x: array<act>;             // [T, n]
@group(0) @binding(1) var<storage, read> w: array<f32>;             // [n, taps], then the bias [n] if p.bias
@group(0) @binding(2) var<storage, read_write> state: array<f32>;   // [slots + checkpoint rows, stride], the window first: [taps − 1, n]
@group(0) @binding(3) var<storage, read_write> y: array<act>;       // [T, n]
@group(0) @binding(4) var<storage, read> lastToken: array<u32>;     // [maxSeqs]
@group(0) @binding(5) var<storage, read> rowSlot: array<u32>;       // [maxSeqs]
@group(0) @binding(6) var<uniform> counts: Counts;
@group(0) @binding(7) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let c = gid.x;
  let s = gid.y;
  if (c >= p.n || s >= counts.S || run_continues(s)) { return; }
  var t = 0u;
  if (s > 0u) { t = lastToken[s - 1u] + 1u; }
  let end = run_end(s);
  let k = p.taps - 1u;
  let base = rowSlot[s] * p.stride + c;
  var wk: array<f32, MAX_TAPS>;
  var win: array<f32, MAX_TAPS>;
  for (var j = 0u; j < p.taps; j++) { wk[j] = w[c * p.taps + j]; }
  for (var j = 0u; j < k; j++) { win[j] = state[base + j * p.n]; }
  var bias = 0.0;
  if (p.bias == 1u) { bias = w[p.n * p.taps + c]; }
  for (var r = s; r <= end; r++) {
    for (; t <= lastToken[r]; t++) {
      let acc = conv_window_step(&wk, &win, k, f32(x[t * p.n + c])) + bias;
      y[t * p.n + c] = act(acc / (1.0 + exp(-acc)));
    }
    if (r < end) {
      let cb = (p.ckpt + r) * p.stride + c;
      for (var j = 0u; j < k; j++) { state[cb + j * p.n] = win[j]; }
    }
  }
  for (var j = 0u; j < k; j++) { state[base + j * p.n] = win[j]; }
}
