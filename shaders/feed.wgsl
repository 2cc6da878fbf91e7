// The step's token ids, resolved on the GPU. The CPU writes every id it knows and FEED where a row
// continues from the token the sampler drew for its sequence at the step before: that token is
// still in `sampled` (by sequence slot), so decoding never waits for its readback.
override WG: u32 = 64;

const FEED: u32 = 0xffffffffu;

@group(0) @binding(0) var<storage, read> stepTokens: array<u32>; // [T] ids written by the CPU, or FEED
@group(0) @binding(1) var<storage, read> tokenSeq: array<u32>;   // [T] row of each token
@group(0) @binding(2) var<storage, read> rowSlot: array<u32>;    // [S] sequence slot of each row
@group(0) @binding(3) var<storage, read> sampled: array<u32>;    // [slots] the sampler's last token of each slot
@group(0) @binding(4) var<storage, read_write> ids: array<u32>;  // [T] what the embedding reads
@group(0) @binding(5) var<uniform> counts: vec4u;                // (T, S, -, -)

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let t = gid.x;
  if (t >= counts.x) { return; }
  let id = stepTokens[t];
  ids[t] = select(id, sampled[rowSlot[tokenSeq[t]]], id == FEED);
}
