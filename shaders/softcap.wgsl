// Final logits in place: divided, then soft-capped: x[t, i] = tanh((x[t, i] / div) / cap) * cap
// (Gemma 2: cap 30, div 1; Granite: div logits_scaling, no cap), f32 in and out. A 2D grid: x covers the n columns of a row, y is the row (a
// sequence of the step), so the row count rides on the dispatch and the uniform is static.
override WG: u32 = 64;

struct Params {
  n: u32,      // elements per row (the vocabulary)
  cap: f32,    // the soft cap, > 0; 0: none
  div: f32,    // divides x first (1: none)
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.x;
  if (i >= p.n) { return; }
  let j = gid.y * p.n + i;
  let v = x[j] / p.div;
  if (p.cap == 0.0) { x[j] = v; return; }
  // tanh's argument clamped: tanh(±10) is ±1 in f32, and no backend meets exp overflow.
  x[j] = tanh(clamp(v / p.cap, -10.0, 10.0)) * p.cap;
}
