// Subgroup helpers for kernels that reduce across threads (the subgroup variant: its kernel source
// starts `enable subgroups;`, src/kernels/matmul.ts). shaders/lib/subgroups_off.wgsl has the same
// names for devices without the feature, with SUBGROUPS false, so one kernel body serves both.
//
// Size-agnostic: the subgroup size is counted, not assumed (SwiftShader reports 4, lavapipe 8,
// GPUs 8 to 128). WGSL leaves the mapping of invocations to subgroups to the implementation, so a
// kernel does not assume local_invocation_index is contiguous in a subgroup: sg_index numbers the
// subgroups in arrival order (one atomic per subgroup) and gives each invocation a "virtual" index,
// subgroup number · subgroup size + lane, that is.

const SUBGROUPS: bool = true;

var<workgroup> sg_next: atomic<u32>; // zero at the workgroup's start

// The subgroup's size. Call in uniform control flow with every invocation of the workgroup active
// (then the active count is the size, or the workgroup size when that is smaller).
fn sg_size() -> u32 {
  return subgroupAdd(1u);
}

// The invocation's virtual index within the workgroup (the same preconditions as sg_size): the
// invocations of one subgroup get consecutive indices, the first a multiple of `size`.
fn sg_index(lid: u32, size: u32) -> u32 {
  let lane = subgroupExclusiveAdd(1u);
  var n = 0u;
  if (lane == 0u) { n = atomicAdd(&sg_next, 1u); }
  return subgroupBroadcastFirst(n) * size + lane;
}

// The sum of v over aligned runs of `lanes` (a power of two, at most the subgroup size)
// consecutive virtual indices, in every invocation of the run: a butterfly over `steps` (a
// workgroup-uniform power of two at least `lanes`, so that the calls stay in uniform control flow).
fn sg_run_sum(v: f32, lanes: u32, steps: u32, size: u32) -> f32 {
  var s = v;
  for (var m = 1u; m < steps; m <<= 1u) {
    // m % size keeps the mask in the subgroup; the steps at or past `lanes` add nothing.
    let o = subgroupShuffleXor(s, m % size);
    if (m < lanes) { s += o; }
  }
  return s;
}

// The maximum of v over the same runs as sg_run_sum (same preconditions), in every invocation of the run.
fn sg_run_max(v: f32, lanes: u32, steps: u32, size: u32) -> f32 {
  var s = v;
  for (var m = 1u; m < steps; m <<= 1u) {
    let o = subgroupShuffleXor(s, m % size);
    if (m < lanes) { s = max(s, o); }
  }
  return s;
}
