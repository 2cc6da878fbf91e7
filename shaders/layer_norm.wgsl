// LayerNorm over the last dimension, with a bias (BERT's, SigLIP's):
//   y[r, i] = (x[r, i] - mean(x[r, :])) / sqrt(var(x[r, :]) + eps) * w[i] + b[i]
// the variance the biased one (over n, as PyTorch's LayerNorm). One workgroup per row; the mean,
// then the squared deviations from it, are two f32 reductions whatever `act` is (two passes: no
// cancellation of E[x²] - E[x]² on rows with a large mean).
alias act = f32;
// x's element type: f32 when x is the residual stream, at every precision (Specialisation.f32).
alias x_t = act;
// y's element type: f32 when y is the residual stream, at every precision.
alias y_t = act;

override WG: u32 = 64;

struct Params {
  rows: u32,  // rows in x and y
  n: u32,     // elements per row
  eps: f32,
}

@group(0) @binding(0) var<storage, read> x: array<x_t>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<y_t>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> partial: array<f32, WG>;

// The sum of every thread's `v` (all threads of the workgroup call it).
fn workgroupSum(v: f32, lid: u32) -> f32 {
  workgroupBarrier();  // an earlier sum's result was read
  partial[lid] = v;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) { partial[lid] += partial[lid + stride]; }
    workgroupBarrier();
  }
  return partial[0];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let row = wg.x;
  if (row >= p.rows) { return; }
  let base = row * p.n;

  var s = 0.0;
  for (var i = lid; i < p.n; i += WG) { s += f32(x[base + i]); }
  let mean = workgroupSum(s, lid) / f32(p.n);
  var ss = 0.0;
  for (var i = lid; i < p.n; i += WG) {
    let d = f32(x[base + i]) - mean;
    ss += d * d;
  }
  let scale = inverseSqrt(workgroupSum(ss, lid) / f32(p.n) + p.eps);

  for (var i = lid; i < p.n; i += WG) {
    y[base + i] = y_t((f32(x[base + i]) - mean) * scale * w[i] + b[i]);
  }
}
