// The routed slots of a step sorted by expert (a stable counting sort), for the grouped routed
// linear layer of a prefill (moe_grouped.wgsl): offsets[e] .. offsets[e + 1] index the slots
// t·K + j routed to expert e in `order`, ascending. One workgroup: each thread counts, then
// places, the slots of its experts; thread 0 makes the offsets in between. A step of T tokens
// reads its T·K ids 2·E / WG times per thread: small next to the experts' weights.

override WG: u32 = 64;
override E: u32 = 4; // experts
override K: u32 = 2; // experts per token

struct Step {
  tokens: u32,
  seqs: u32,
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<storage, read> ids: array<u32>;            // [T·K]
@group(0) @binding(1) var<storage, read_write> order: array<u32>;    // [T·K] slots, by expert
@group(0) @binding(2) var<storage, read_write> offsets: array<u32>;  // [E + 1]
@group(0) @binding(3) var<uniform> counts: Step;

var<workgroup> start: array<u32, E>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
  let slots = counts.tokens * K;
  for (var e = lid; e < E; e += WG) {
    var c = 0u;
    for (var s = 0u; s < slots; s++) {
      if (ids[s] == e) { c++; }
    }
    start[e] = c;
  }
  workgroupBarrier();
  if (lid == 0u) {
    var run = 0u;
    for (var e = 0u; e < E; e++) {
      let c = start[e];
      start[e] = run;
      offsets[e] = run;
      run += c;
    }
    offsets[E] = run;
  }
  workgroupBarrier();
  for (var e = lid; e < E; e += WG) {
    var at = start[e];
    for (var s = 0u; s < slots; s++) {
      if (ids[s] == e) {
        order[at] = s;
        at++;
      }
    }
  }
}
