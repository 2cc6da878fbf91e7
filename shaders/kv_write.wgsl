// Copies this step's new keys and values ([T, nKv, headDim] each) into one layer's paged cache
// ([numPages, PAGE, nKv, headDim] each) at slotMapping[t] = page * PAGE + offset. A token's row of
// nKv * headDim elements is contiguous on both sides, so this is T row copies of vec4s.
alias act = f32;

override WG: u32 = 64;

struct Params {
  rowVec4s: u32,  // nKv * headDim / 4: vec4s per token row
}

@group(0) @binding(0) var<storage, read> k: array<vec4<act>>;
@group(0) @binding(1) var<storage, read> v: array<vec4<act>>;
@group(0) @binding(2) var<storage, read> slotMapping: array<u32>;  // [T]
@group(0) @binding(3) var<storage, read_write> kCache: array<vec4<act>>;
@group(0) @binding(4) var<storage, read_write> vCache: array<vec4<act>>;
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(workgroup_id) wg: vec3u) {
  let i = gid.x;
  if (i >= p.rowVec4s) { return; }
  let t = wg.y;
  let dst = slotMapping[t] * p.rowVec4s + i;
  let src = t * p.rowVec4s + i;
  kCache[dst] = k[src];
  vCache[dst] = v[src];
}
