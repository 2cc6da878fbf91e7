// Bandwidth probe: dst[i] = src[i] over 16-byte vec4<u32> words. A grid-stride loop, so a buffer
// of any size fits the dispatch limits; (bytes read + bytes written) / time is the memory bandwidth
// a plain streaming kernel achieves on this device, the yardstick for the decode step.
override WG: u32 = 256;

struct Params {
  n: u32,      // vec4 words to copy
  stride: u32, // invocations in the whole grid (workgroups × WG)
}

@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  // The loop bound is the bounds check: invocations past n copy nothing.
  for (var i = gid.x; i < p.n; i += p.stride) {
    dst[i] = src[i];
  }
}
