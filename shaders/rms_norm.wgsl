// RMSNorm over the last dimension: y[r, i] = x[r, i] / sqrt(mean(x[r, :]^2) + eps) * w[i], or with
// wRows > 1 each row its group's weights, w[(r % wRows)·n + i] (Mamba-2's grouped norm: a token's
// rows are its groups).
// With ADD the normed row is added into y instead (y[r, i] += scale · that, summed in f32): a
// post-norm block's output norm and its residual add in one dispatch (Gemma 2/3, OLMo 2).
// One workgroup per row; the sum of squares is accumulated in f32 whatever `act` is.
alias act = f32;
// x's element type: f32 when x is the residual stream or a branch output before its post-norm,
// at every precision (Specialisation.f32).
alias x_t = act;
// y's element type: f32 when y is the residual stream (ADD), at every precision.
alias y_t = act;

override WG: u32 = 64;
override ADD: bool = false;

struct Params {
  rows: u32,  // rows in x and y
  n: u32,     // elements per row
  eps: f32,
  scale: f32, // ADD: multiplies the normed row (Granite's residual_multiplier, else 1)
  wRows: u32, // rows of n weights in w, row r using row r % wRows; 0 or 1: one row shared by all
}

@group(0) @binding(0) var<storage, read> x: array<x_t>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<y_t>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let row = wg.x;
  if (row >= p.rows) { return; }
  let base = row * p.n;

  var ss = 0.0;
  for (var i = lid; i < p.n; i += WG) {
    let v = f32(x[base + i]);
    ss += v * v;
  }
  partial[lid] = ss;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) { partial[lid] += partial[lid + stride]; }
    workgroupBarrier();
  }
  let scale = inverseSqrt(partial[0] / f32(p.n) + p.eps);
  var wBase = 0u;
  if (p.wRows > 1u) { wBase = (row % p.wRows) * p.n; }

  for (var i = lid; i < p.n; i += WG) {
    let v = f32(x[base + i]) * scale * w[wBase + i];
    if (ADD) {
      y[base + i] = y_t(f32(y[base + i]) + p.scale * v);
    } else {
      y[base + i] = y_t(v);
    }
  }
}
