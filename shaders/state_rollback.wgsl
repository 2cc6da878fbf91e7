// Speculative decoding's rollback of a recurrent layer's state (src/kernels/state-rollback.ts),
// after the sampler drew every row of the step. A verify run (rows s..end on one slot,
// shaders/lib/verify_runs.wgsl) left its slot's state after all its proposals; the output takes
// its proposals up to the first one that differs from the draw of the row before it (row s + i
// feeds proposal i, row s + i − 1 drew the token it must equal). With a accepted and a < end − s,
// the slot takes the checkpoint of row s + a: the state after the tokens the sequence kept. The
// CPU records the same count (Sequence.verify), so no state waits for the step's readback.
// One invocation per (float of the slot, row); rows that start no run, or whose run took every
// proposal, return at once.

override WG: u32 = 64;
// run_continues and run_end: shaders/lib/verify_runs.wgsl, prepended.

struct Params {
  floats: u32,  // floats of one slot
  ckpt: u32,    // the first checkpoint row of state: row r's checkpoint is its slot ckpt + r
}

struct Counts {
  T: u32,
  S: u32,
}

@group(0) @binding(0) var<storage, read_write> state: array<f32>;  // [slots + checkpoint rows, floats]
@group(0) @binding(1) var<storage, read> tokens: array<u32>;        // [maxTokens] the step's tokens (a verify row's one token is its proposal)
@group(0) @binding(2) var<storage, read> lastToken: array<u32>;     // [maxSeqs]
@group(0) @binding(3) var<storage, read> rowSlot: array<u32>;       // [maxSeqs]
@group(0) @binding(4) var<storage, read> drawSlot: array<u32>;      // [maxSeqs] where each row's draw is in sampled
@group(0) @binding(5) var<storage, read> sampled: array<u32>;       // the sampler's draws (src/engine/step.ts's drawSlot)
@group(0) @binding(6) var<uniform> counts: Counts;
@group(0) @binding(7) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let s = gid.y;
  if (s >= counts.S || run_continues(s)) { return; }
  let end = run_end(s);
  var a = 0u;
  loop {
    if (s + a >= end || sampled[drawSlot[s + a]] != tokens[lastToken[s + a + 1u]]) { break; }
    a++;
  }
  if (s + a >= end) { return; }
  let dst = rowSlot[s] * p.floats;
  let src = (p.ckpt + s + a) * p.floats;
  for (var f = gid.x; f < p.floats; f += groups.x * WG) { state[dst + f] = state[src + f]; }
}
