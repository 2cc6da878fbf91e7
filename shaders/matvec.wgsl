// Decode-oriented linear layer: y[t, n] = sum_k x[t, k] * W[n, k] (+ bias[n]) for a few tokens.
// Each workgroup owns ROWS_PER_WG weight rows; the WG / ROWS_PER_WG threads of a row split its
// K / 8 chunks (shaders/lib/dequant.wgsl), so neighbouring threads read neighbouring words. Each
// chunk is dequantised once and dotted with up to MAX_T tokens held in registers; more tokens
// take further passes over the weights. Each thread has two chunks' loads in flight per loop trip.
// Accumulation is f32 whatever `act` is. A row's partial sums meet by subgroup shuffles where the
// device has subgroups (shaders/lib/subgroups.wgsl: a butterfly within the subgroup, then one
// workgroup-memory step across a row's subgroups: two barriers a pass), else by a shared-memory
// tree (shaders/lib/subgroups_off.wgsl: log2(threads per row) barriers). Needs
// shaders/lib/dequant.wgsl (WTYPE, dq_chunk), shaders/lib/glu.wgsl, shaders/lib/linear.wgsl
// (bindings, HAS_BIAS, store_y, GLU) and one of the subgroup libraries in front. GLU needs an even
// ROWS_PER_WG (and even row0): a (gate, up) row pair meets in one workgroup.
//
// WIDE reads the quants as 16-byte vectors (shaders/lib/dequant_wide.wgsl dq_group, through w4,
// a second binding of w's buffer): a thread takes groups of 4 chunks (32 weights, one or two
// vec4 loads), neighbouring threads neighbouring groups, two groups in flight per loop trip. Set
// only for the types and rows dq_group covers (src/kernels/matmul.ts wideLoads); else the chunk
// loop reads words. The engine leaves it off (LinearSpecs.wide): a thread's group spans 32
// columns, so a subgroup's x and norm_w loads stride 128 bytes a lane.
//
// NORM folds the RMSNorm before the layer into it: y = W · (x / rms(x) ⊙ norm_w), with
// rms(x) = sqrt(mean(x²) + NORM_EPS) per token. Every workgroup recomputes its tokens' sums of
// squares from x (a few KB, in cache after the first), the weight chunks are scaled by norm_w
// and each token's dot products by 1 / rms(x) before the store; so the norm costs no dispatch
// and its output no round trip through memory (nor, in f16, a rounding).
alias act = f32;

override NORM: bool = false;
override NORM_EPS: f32 = 1e-6;
// As vec4s: a chunk's 4-element runs start at multiples of 4, so two 16-byte loads a chunk (as
// for x) instead of eight word loads, the load unit being what the folded-norm ops wait on.
@group(0) @binding(6) var<storage, read> norm_w: array<vec4<f32>>; // [k / 4] (a 16-byte dummy without NORM)

override WIDE: bool = false;
@group(0) @binding(7) var<storage, read> w4: array<vec4<u32>>; // w's buffer again, as vec4s

override WG: u32 = 64;
override ROWS_PER_WG: u32 = 2;  // WG / ROWS_PER_WG must be a power of two, at least MAX_T
override MAX_T: u32 = 1;        // tokens per pass over the weights, 1..T_CAP
override TPR: u32 = WG / ROWS_PER_WG; // threads per row (derived; do not set)
override PARTIALS: u32 = WG * MAX_T;  // workgroup floats (derived; do not set)

const T_CAP: u32 = 8u; // register accumulators per thread

var<workgroup> partial: array<f32, PARTIALS>; // [MAX_T][WG]
var<workgroup> inv_rms: array<f32, T_CAP>;    // NORM: 1 / rms(x) of the pass's tokens

// Adds one dequantised chunk's dot products with the pass's tokens t0.. (fewer than MAX_T at the
// end of the step) into acc.
fn add_chunk(acc: ptr<function, array<f32, T_CAP>>, chunk: Chunk, t0: u32, T: u32, k4: u32) {
  var q = chunk;
  let ia = q.pa >> 2u;
  let ib = q.pb >> 2u;
  if (NORM) {
    q.a *= norm_w[ia];
    q.b *= norm_w[ib];
  }
  for (var t = 0u; t < MAX_T; t++) {
    if (t0 + t < T) {
      let xo = (t0 + t) * k4;
      (*acc)[t] += dot(q.a, vec4f(x[xo + ia])) + dot(q.b, vec4f(x[xo + ib]));
    }
  }
}

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

  // The thread's index within the workgroup: lid, or with subgroups its subgroup-ordered index, so
  // that a row's threads fill whole runs of a subgroup.
  let sgs = sg_size();
  let v = sg_index(lid, sgs);
  let lane = v % TPR;
  let rr = v / TPR; // the row within the workgroup
  let row = first + rr;
  // With subgroups: a row's lanes within one subgroup, and its subgroups.
  let run = min(TPR, sgs);
  let per = TPR / run;
  // Rows past n (in the last group) still run the loop, on a valid row, to keep the barriers
  // uniform; they write nothing.
  let rw = min(row, p.n - 1u) * p.row_words;
  let chunks = p.k >> 3u;
  let k4 = p.k >> 2u;

  for (var t0 = 0u; t0 < T; t0 += MAX_T) {
    if (NORM) {
      // The whole workgroup sums each token's squares (WG is a power of two).
      for (var t = 0u; t < MAX_T; t++) {
        var ss = 0.0;
        if (t0 + t < T) {
          for (var i = v; i < k4; i += WG) {
            let xv = vec4f(x[(t0 + t) * k4 + i]);
            ss += dot(xv, xv);
          }
        }
        if (SUBGROUPS) {
          ss = sg_run_sum(ss, sgs, WG, sgs);
          if (v % sgs == 0u) { partial[t * WG + v / sgs] = ss; }
        } else {
          partial[t * WG + lid] = ss;
        }
      }
      workgroupBarrier();
      if (SUBGROUPS) {
        if (lid < MAX_T) {
          var ss = 0.0;
          for (var j = 0u; j < WG / sgs; j++) { ss += partial[lid * WG + j]; }
          inv_rms[lid] = inverseSqrt(ss / f32(p.k) + NORM_EPS);
        }
      } else {
        for (var s = WG >> 1u; s > 0u; s >>= 1u) {
          if (lid < s) {
            for (var t = 0u; t < MAX_T; t++) { partial[t * WG + lid] += partial[t * WG + lid + s]; }
          }
          workgroupBarrier();
        }
        if (lid < MAX_T) { inv_rms[lid] = inverseSqrt(partial[lid * WG] / f32(p.k) + NORM_EPS); }
      }
      workgroupBarrier();
    }
    var acc = array<f32, T_CAP>(); // explicitly zeroed per pass (SwiftShader kept the last pass's values)
    if (WIDE) {
      // Two groups a trip, as the chunks below.
      let groups = chunks >> 2u;
      var g = lane;
      for (; g + TPR < groups; g += 2u * TPR) {
        let q0 = dq_group(rw, p.k, g);
        let q1 = dq_group(rw, p.k, g + TPR);
        for (var j = 0u; j < 4u; j++) { add_chunk(&acc, q0[j], t0, T, k4); }
        for (var j = 0u; j < 4u; j++) { add_chunk(&acc, q1[j], t0, T, k4); }
      }
      if (g < groups) {
        let q0 = dq_group(rw, p.k, g);
        for (var j = 0u; j < 4u; j++) { add_chunk(&acc, q0[j], t0, T, k4); }
      }
    } else {
      // Two chunks a trip: their loads are independent, so both are in flight together.
      var c = lane;
      for (; c + TPR < chunks; c += 2u * TPR) {
        let q0 = dq_chunk(rw, p.k, c);
        let q1 = dq_chunk(rw, p.k, c + TPR);
        add_chunk(&acc, q0, t0, T, k4);
        add_chunk(&acc, q1, t0, T, k4);
      }
      if (c < chunks) { add_chunk(&acc, dq_chunk(rw, p.k, c), t0, T, k4); }
    }
    if (NORM) {
      for (var t = 0u; t < MAX_T; t++) { acc[t] *= inv_rms[t]; }
    }
    if (SUBGROUPS) {
      // Each run of a row's lanes sums itself; the first lane of each run leaves the sum at the
      // row's per slots: [MAX_T][WG / run].
      for (var t = 0u; t < MAX_T; t++) {
        let s = sg_run_sum(acc[t], run, TPR, sgs);
        if (lane % run == 0u) { partial[t * WG + v / run] = s; }
      }
      workgroupBarrier();
    } else {
      for (var t = 0u; t < MAX_T; t++) { partial[t * WG + lid] = acc[t]; }
      workgroupBarrier();
      for (var s = TPR >> 1u; s > 0u; s >>= 1u) {
        if (lane < s) {
          for (var t = 0u; t < MAX_T; t++) { partial[t * WG + lid] += partial[t * WG + lid + s]; }
        }
        workgroupBarrier();
      }
    }
    // Lane t of each row writes token t0 + t; under GLU the gate (even) row's lanes write the
    // pair, the up row's sum being the next row's.
    if (row < p.n && lane < MAX_T && t0 + lane < T) {
      let g = row_sum(lane, rr, per);
      if (GLU) {
        if ((row & 1u) == 0u) { store_glu(t0 + lane, p.row0 + row, g, row_sum(lane, rr + 1u, per)); }
      } else {
        store_y(t0 + lane, row, g);
      }
    }
    workgroupBarrier();
  }
}

// Token t's sum of workgroup row rr once the reduction is done: with subgroups the sum of the
// row's `per` slots, else the tree's result in the row's first thread's slot.
fn row_sum(t: u32, rr: u32, per: u32) -> f32 {
  if (SUBGROUPS) {
    var s = 0.0;
    for (var j = 0u; j < per; j++) { s += partial[t * WG + rr * per + j]; }
    return s;
  }
  return partial[t * WG + rr * TPR];
}
