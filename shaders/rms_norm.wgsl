// RMSNorm over the last dimension: y[r, i] = x[r, i] / sqrt(mean(x[r, :]^2) + eps) * w[i].
// One workgroup per row; the sum of squares is accumulated in f32 whatever `act` is.
alias act = f32;
// x's element type: f32 when x is the residual stream, at every precision (Specialisation.f32).
alias x_t = act;

override WG: u32 = 64;

struct Params {
  rows: u32,  // rows in x and y
  n: u32,     // elements per row
  eps: f32,
}

@group(0) @binding(0) var<storage, read> x: array<x_t>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<act>;
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

  for (var i = lid; i < p.n; i += WG) {
    y[base + i] = act(f32(x[base + i]) * scale * w[i]);
  }
}
