// The online softmax of the attention kernels (attn_decode, attn_prefill): SM_ROWS rows (a decode
// workgroup's query heads, a prefill workgroup's tokens × heads) each keep a running max and sum
// over the key tiles. A kernel writes a tile's scores into sm_p (TILE_KEYS per row) and calls
// softmax_tile, which turns them into probabilities relative to each row's new max and leaves in
// sm_alpha the factor by which the row's output so far must be scaled; sm_sum is the row's
// denominator once the last tile is in. Concatenated in front of a kernel that declares
//   override WG;       threads per workgroup
//   override SM_ROWS;  softmax rows
//   override TILE_KEYS;  keys per tile, the row stride of sm_p
// together with shaders/lib/attn_kv.wgsl (NO_MAX) and one of shaders/lib/subgroups.wgsl or
// subgroups_off.wgsl (SUBGROUPS, sg_run_max, sg_run_sum).

var<workgroup> sm_p: array<f32, SM_ROWS * TILE_KEYS>;  // a tile's scores, then probabilities
var<workgroup> sm_max: array<f32, SM_ROWS>;
var<workgroup> sm_sum: array<f32, SM_ROWS>;
var<workgroup> sm_alpha: array<f32, SM_ROWS>;

// Every row starts empty (a barrier must follow before softmax_tile).
fn softmax_init(lid: u32) {
  for (var r = lid; r < SM_ROWS; r += WG) {
    sm_max[r] = NO_MAX;
    sm_sum[r] = 0.0;
  }
}

// Each row's running softmax takes the tile's first n scores. Between barriers: the scores are
// written before, and sm_p and sm_alpha are read after. Call in uniform control flow with every
// thread of the workgroup; v and sgs are the thread's sg_index and the sg_size, taken before any
// return (unused without subgroups).
fn softmax_tile(n: u32, lid: u32, v: u32, sgs: u32) {
  if (SUBGROUPS) {
    // A run of L lanes of one subgroup per row (L a power of two, at most the subgroup and the
    // tile): each lane a strided share of the keys, then the run's max and sum by shuffles. Every
    // thread takes every trip (rows past SM_ROWS add nothing), so the shuffles see their whole
    // subgroup.
    let L = 1u << firstLeadingBit(min(sgs, TILE_KEYS));
    for (var r0 = 0u; r0 < SM_ROWS; r0 += WG / L) {
      let r = r0 + v / L;
      let live = r < SM_ROWS;
      let row = min(r, SM_ROWS - 1u) * TILE_KEYS;
      var mOld = NO_MAX;
      if (live) { mOld = sm_max[r]; }
      var m = NO_MAX;
      if (live) {
        for (var j = v % L; j < n; j += L) { m = max(m, sm_p[row + j]); }
      }
      let mNew = max(mOld, sg_run_max(m, L, TILE_KEYS, sgs));
      var sum = 0.0;
      if (live) {
        for (var j = v % L; j < n; j += L) {
          let e = exp(sm_p[row + j] - mNew);
          sm_p[row + j] = e;
          sum += e;
        }
      }
      sum = sg_run_sum(sum, L, TILE_KEYS, sgs);
      // The run's first lane writes after the shuffles, which needed every lane's read of mOld.
      if (live && v % L == 0u) {
        let alpha = exp(mOld - mNew);
        sm_alpha[r] = alpha;
        sm_max[r] = mNew;
        sm_sum[r] = sm_sum[r] * alpha + sum;
      }
    }
  } else {
    // One thread per row scans its scores.
    for (var r = lid; r < SM_ROWS; r += WG) {
      let row = r * TILE_KEYS;
      let mOld = sm_max[r];
      var mNew = mOld;
      for (var j = 0u; j < n; j++) { mNew = max(mNew, sm_p[row + j]); }
      var sum = 0.0;
      for (var j = 0u; j < n; j++) {
        let e = exp(sm_p[row + j] - mNew);
        sm_p[row + j] = e;
        sum += e;
      }
      let alpha = exp(mOld - mNew);
      sm_alpha[r] = alpha;
      sm_max[r] = mNew;
      sm_sum[r] = sm_sum[r] * alpha + sum;
    }
  }
}
