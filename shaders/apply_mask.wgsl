// Structured output: logits[s, v] = -inf where bit v of sequence s's token bitmask is 0 (the
// grammar forbids the token). The bitmask is xgrammar's: ceil(vocab / 32) u32 words per sequence,
// bit (v & 31) of word (v >> 5). It runs before the penalties and the sampler, so nothing a
// forbidden token's logit goes through can bring it back.

override WG: u32 = 256;

struct Params {
  vocab: u32, // logits per sequence
  words: u32, // bitmask words per sequence
  negInf: f32, // -inf, from the CPU: WGSL rejects a constant-evaluated infinity
}

@group(0) @binding(0) var<storage, read_write> logits: array<f32>;
@group(0) @binding(1) var<storage, read> mask: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let v = gid.x;
  if (v >= p.vocab) { return; }
  let s = gid.y;
  let word = mask[s * p.words + (v >> 5u)];
  if (((word >> (v & 31u)) & 1u) == 0u) {
    // The sampler and the penalties' bans treat -inf as probability 0.
    logits[s * p.vocab + v] = p.negInf;
  }
}
