// Decode linear layer with integer dot products (issue #14 part 3, PERF.md §3 #4): y[t, n] =
// Σ_k x̂[t, k] · W[n, k] (+ bias[n]), where x̂ is x quantised to int8 per block of 32 (scale d =
// max|x| / 127, as llama.cpp's Q8_0/Q8_1 activations) and W's quants are dotted with it four at
// a time by `dot4I8Packed` (shaders/lib/dequant_int.wgsl dq_idot), f32 accumulation per block.
// The same bindings, epilogues and reductions as shaders/matvec.wgsl, one token per pass (the
// engine takes it for one-token steps only: src/kernels/matmul.ts).
//
// Each workgroup first quantises the token's x into workgroup memory (every workgroup reads all
// of x anyway; a thread per block of 32): XK bytes of int8s and 8 bytes per block, so the
// dispatch count is the float matvec's. Where that does not fit the device's workgroup memory the
// float matvec runs instead (integerDotFits). Then the WG / ROWS_PER_WG threads of a row take its
// blocks in turn, two in flight per loop trip, and the row's partial sums meet as in matvec.wgsl.
//
// NORM folds the RMSNorm before the layer: the quantised activation is x ⊙ norm_w (the prologue
// also sums x's squares), and each row's sum is scaled by 1 / rms(x) before the store; scaling
// by a positive constant after quantising is what quantising the normed x would give, but for
// rounding.
//
// Needs, in front: `requires packed_4x8_integer_dot_product;`, shaders/lib/dequant.wgsl,
// dequant_int.wgsl, glu.wgsl, linear.wgsl and one of the subgroup libraries.
alias act = f32;

override NORM: bool = false;
override NORM_EPS: f32 = 1e-6;
@group(0) @binding(6) var<storage, read> norm_w: array<f32>; // [k] (a 4-byte dummy without NORM)

override WIDE: bool = false;
@group(0) @binding(7) var<storage, read> w4: array<vec4<u32>>; // w's buffer again, as vec4s

override WG: u32 = 64;
override ROWS_PER_WG: u32 = 2; // WG / ROWS_PER_WG must be a power of two
override TPR: u32 = WG / ROWS_PER_WG; // threads per row (derived; do not set)
override XK: u32 = 4096; // elements per token of x = p.k (sizes the workgroup arrays; a multiple of 32)

var<workgroup> xq: array<vec4<u32>, XK / 16u>; // the token's int8s, 16 per vec4, in column order
var<workgroup> xs: array<vec2f, XK / 32u>;     // per block of 32: (scale d, sum of its int8s)
var<workgroup> partial: array<f32, WG>;        // the rows' partial sums
var<workgroup> squares: array<f32, WG>;        // NORM: partial sums of x²

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3u,
  @builtin(num_workgroups) nwg: vec3u,
  @builtin(local_invocation_index) lid: u32,
) {
  // Large N spills the row groups into y of the grid (65535 workgroups per dimension).
  let first = (wid.x + wid.y * nwg.x) * ROWS_PER_WG;
  let T = counts.tokens;
  if (first >= p.n) { return; }

  let sgs = sg_size();
  let v = sg_index(lid, sgs);
  let lane = v % TPR;
  let rr = v / TPR; // the row within the workgroup
  let row = first + rr;
  let run = min(TPR, sgs);
  let per = TPR / run;
  // Rows past n (in the last group) still run, on a valid row, to keep the barriers uniform.
  let rw = min(row, p.n - 1u) * p.row_words;
  let nb = p.k >> 5u;
  let k4 = p.k >> 2u;

  for (var t = 0u; t < T; t++) {
    // Quantise token t's x (⊙ norm_w) per block of 32: d = max|x̂| / 127, q = round(x̂ / d).
    var ss = 0.0;
    for (var b = v; b < nb; b += WG) {
      var e: array<vec4f, 8>;
      var amax = 0.0;
      for (var i = 0u; i < 8u; i++) {
        var xv = vec4f(x[t * k4 + 8u * b + i]);
        if (NORM) {
          ss += dot(xv, xv);
          let c = 32u * b + 4u * i;
          xv *= vec4f(norm_w[c], norm_w[c + 1u], norm_w[c + 2u], norm_w[c + 3u]);
        }
        e[i] = xv;
        let a = abs(xv);
        amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
      }
      let d = amax / 127.0;
      let id = select(0.0, 1.0 / d, d > 0.0);
      var sum = vec4i(0);
      var q: array<u32, 8>;
      for (var i = 0u; i < 8u; i++) {
        let qi = vec4i(round(e[i] * id));
        sum += qi;
        q[i] = pack4xI8Clamp(qi);
      }
      xq[2u * b] = vec4u(q[0], q[1], q[2], q[3]);
      xq[2u * b + 1u] = vec4u(q[4], q[5], q[6], q[7]);
      xs[b] = vec2f(d, f32(sum.x + sum.y + sum.z + sum.w));
    }
    if (NORM) {
      if (SUBGROUPS) {
        ss = sg_run_sum(ss, sgs, WG, sgs);
        if (v % sgs == 0u) { squares[v / sgs] = ss; }
      } else {
        squares[lid] = ss;
      }
    }
    workgroupBarrier();
    var inv_rms = 1.0;
    if (NORM) {
      var total = 0.0;
      if (SUBGROUPS) {
        for (var j = 0u; j < WG / sgs; j++) { total += squares[j]; }
      } else {
        for (var s = WG >> 1u; s > 0u; s >>= 1u) {
          if (lid < s) { squares[lid] += squares[lid + s]; }
          workgroupBarrier();
        }
        total = squares[0];
      }
      inv_rms = inverseSqrt(total / f32(p.k) + NORM_EPS);
    }

    // The row's blocks, two a trip: their loads are independent, so both are in flight together.
    var acc = 0.0;
    var g = lane;
    for (; g + TPR < nb; g += 2u * TPR) {
      let h = g + TPR;
      acc += dq_idot(rw, p.k, g, xq[2u * g], xq[2u * g + 1u], xs[g]) + dq_idot(rw, p.k, h, xq[2u * h], xq[2u * h + 1u], xs[h]);
    }
    if (g < nb) { acc += dq_idot(rw, p.k, g, xq[2u * g], xq[2u * g + 1u], xs[g]); }
    acc *= inv_rms;

    if (SUBGROUPS) {
      // Each run of a row's lanes sums itself; the first lane of each run leaves the sum at the
      // row's `per` slots.
      let s = sg_run_sum(acc, run, TPR, sgs);
      if (lane % run == 0u) { partial[v / run] = s; }
      workgroupBarrier();
    } else {
      partial[lid] = acc;
      workgroupBarrier();
      for (var s = TPR >> 1u; s > 0u; s >>= 1u) {
        if (lane < s) { partial[lid] += partial[lid + s]; }
        workgroupBarrier();
      }
    }
    // Lane 0 of each row stores it; under GLU the gate (even) row's lane stores the pair.
    if (row < p.n && lane == 0u) {
      let y0 = row_sum(rr, per);
      if (GLU) {
        if ((row & 1u) == 0u) { store_glu(t, p.row0 + row, y0, row_sum(rr + 1u, per)); }
      } else {
        store_y(t, row, y0);
      }
    }
    // The next token's prologue overwrites xq, xs, squares and partial.
    workgroupBarrier();
  }
}

// Row rr's sum once the reduction is done: with subgroups the sum of its `per` slots, else the
// tree's result in the row's first thread's slot.
fn row_sum(rr: u32, per: u32) -> f32 {
  if (SUBGROUPS) {
    var s = 0.0;
    for (var j = 0u; j < per; j++) { s += partial[rr * per + j]; }
    return s;
  }
  return partial[rr * TPR];
}
