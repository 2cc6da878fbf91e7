// Split-K attention over the paged KV cache (flash-decoding), grouped by KV head.
// One workgroup per (split, head group, token): a head group is GROUP query heads that share one
// KV head (all of a GQA group where workgroup memory allows), so each K/V tile is read from the
// cache once for all of them instead of once per query head. Token t attends causally to keys
// firstKey(positions[t]) ..= positions[t] of its own sequence (tokenSeq[t], through blockTable):
// all keys from 0, or the last p.window of them under a sliding window. The splits of a dispatch
// (num_workgroups.x of them) divide that range evenly, in whole key tiles, so every split has work
// at any context and pages before the window are never read. Keys stream through workgroup
// memory in tiles of KB, K and V of a tile loaded together, with an online softmax per head.
// With one split the workgroup normalises and writes the output itself (no combine pass);
// otherwise each split's unnormalised output and (max, sum) go to the partial buffers, which
// attn_combine merges. Any token count works, so this is also a (slow but correct) prefill path.
// Each tile's softmax (a head's max and sum over the tile's scores) is one subgroup reduction per
// head where the device has subgroups (runs of lanes of one subgroup take a head each), else one
// thread per head scans its scores serially from workgroup memory: shaders/lib/attn_softmax.wgsl,
// one row per head. Params, the window and the page lookup: shaders/lib/attn_kv.wgsl; one of
// shaders/lib/subgroups.wgsl or subgroups_off.wgsl (SUBGROUPS) goes in front too
// (src/kernels/attention.ts).
alias act = f32;

override WG: u32 = 128;
override HEAD_DIM: u32 = 128;
override KB: u32 = 32;    // keys per tile
override GROUP: u32 = 1;  // query heads per workgroup: consecutive heads of one KV head
override D4: u32 = HEAD_DIM / 4u;
// The PV product has SLOTS output vec4s (head, column). Where they are fewer than the threads, NG
// groups of SLOTS threads split a tile's keys (key group k takes keys k, k + NG, ...) and sum at
// the end (NG > 1, OUTS = 1); otherwise thread lid owns slots lid + o * WG for o < OUTS (NG = 1).
override SLOTS: u32 = GROUP * D4;
override NG: u32 = 1;
override OUTS: u32 = 1;
const MAX_OUTS = 8u;
// The online softmax's rows, one per head (shaders/lib/attn_softmax.wgsl), and the keys of a
// tile (that and shaders/lib/attn_kv.wgsl's kt, vt, keyAt).
override SM_ROWS: u32 = GROUP;
override TILE_KEYS: u32 = KB;

@group(0) @binding(0) var<storage, read> q: array<vec4<act>>;       // [T, nHeads, D4]
@group(0) @binding(1) var<storage, read> kCache: array<vec4<act>>;  // [numPages, PAGE, nKv, D4]
@group(0) @binding(2) var<storage, read> vCache: array<vec4<act>>;
@group(0) @binding(3) var<storage, read> positions: array<u32>;     // [T]
@group(0) @binding(4) var<storage, read> tokenSeq: array<u32>;      // [T]
@group(0) @binding(5) var<storage, read> blockTable: array<u32>;    // [S, maxPagesPerSeq]
@group(0) @binding(6) var<storage, read_write> partialO: array<vec4f>;   // [T, nHeads, p.nSplits, D4]
@group(0) @binding(7) var<storage, read_write> partialML: array<vec2f>;  // [T, nHeads, p.nSplits] (max, sum)
@group(0) @binding(8) var<storage, read_write> out: array<vec4<act>>;    // [T, nHeads, D4] (one split)
@group(0) @binding(9) var<uniform> p: Params;

var<workgroup> qs: array<vec4f, SLOTS>;       // the group's query rows, pre-scaled
var<workgroup> red: array<vec4f, WG>;         // the key groups' partial outputs (NG > 1)

// Cache offsets (in vec4s) of keys first .. first + n of (seq, kh) into keyAt[buf * KB ..]: one
// block-table read per page the keys touch (a thread per page writes its keys' offsets), not one
// per key.
fn lookUp(seq: u32, kh: u32, first: u32, n: u32, buf: u32, lid: u32) {
  let p0 = first / p.pageSize;
  let pages = (first + n - 1u) / p.pageSize - p0 + 1u;
  for (var i = lid; i < pages; i += WG) {
    let page = blockTable[seq * p.maxPagesPerSeq + p0 + i];
    let lo = max(first, (p0 + i) * p.pageSize);
    let hi = min(first + n, (p0 + i + 1u) * p.pageSize);
    for (var key = lo; key < hi; key++) {
      keyAt[buf * KB + key - first] = ((page * p.pageSize + key % p.pageSize) * p.nKv + kh) * D4;
    }
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  // With subgroups: the subgroup size and this thread's subgroup-ordered index for the softmax
  // (uniform control flow, every thread active: before any return).
  let sgs = sg_size();
  let v = sg_index(lid, sgs);
  let split = wg.x;
  let nSplits = nwg.x;
  let h0 = wg.y * GROUP;  // first query head of the group
  let kh = h0 / (p.nHeads / p.nKv);
  let t = wg.z;
  let seq = tokenSeq[t];
  let pos = positions[t];
  let first = firstKey(pos);
  // Keys per split: the visible range divided evenly, rounded up to whole tiles.
  let per = ((pos + 1u - first + nSplits - 1u) / nSplits + KB - 1u) / KB * KB;
  let start = first + split * per;
  let end = min(start + per, pos + 1u);
  let head = t * p.nHeads + h0;  // (token, first head) row
  if (start >= end) {
    // Past this token's context: an empty split, which the combine weighs zero. (With one split
    // the range is never empty: a token sees at least itself.)
    for (var g = lid; g < GROUP; g += WG) { partialML[(head + g) * p.nSplits + split] = vec2f(NO_MAX, 0.0); }
    for (var i = lid; i < SLOTS; i += WG) { partialO[((head + i / D4) * p.nSplits + split) * D4 + i % D4] = vec4f(0.0); }
    return;
  }

  for (var i = lid; i < SLOTS; i += WG) { qs[i] = vec4f(q[head * D4 + i]) * p.scale; }
  softmax_init(lid);
  lookUp(seq, kh, start, min(KB, end - start), 0u, lid);

  var acc: array<vec4f, MAX_OUTS>;
  var buf = 0u;
  for (var tile = start; tile < end; tile += KB) {
    let n = min(KB, end - tile);
    workgroupBarrier();  // the previous tile is consumed; this tile's offsets are written
    load_tile(n, buf, lid);
    workgroupBarrier();
    for (var i = lid; i < GROUP * n; i += WG) {
      let g = i / n;
      let j = i % n;
      var s = 0.0;
      for (var d = 0u; d < D4; d++) { s += dot(qs[g * D4 + d], kt[j * ROW + d]); }
      sm_p[g * KB + j] = capScore(s);
    }
    workgroupBarrier();
    // Each head's running softmax takes this tile's scores; then the next tile's keys are looked up.
    softmax_tile(n, lid, v, sgs);
    let next = tile + KB;
    if (next < end) { lookUp(seq, kh, next, min(KB, end - next), 1u - buf, lid); }
    workgroupBarrier();
    for (var o = 0u; o < OUTS; o++) {
      let i = lid + o * WG;
      if (i < NG * SLOTS) {
        let slot = i % SLOTS;
        let g = slot / D4;
        let c = slot % D4;
        var a = acc[o] * sm_alpha[g];
        for (var j = i / SLOTS; j < n; j += NG) { a += sm_p[g * KB + j] * vt[j * D4 + c]; }
        acc[o] = a;
      }
    }
    buf = 1u - buf;
  }

  if (NG > 1u) {
    // Sum the key groups' partial columns.
    red[lid] = acc[0];
    workgroupBarrier();
    var o = vec4f(0.0);
    for (var k = 0u; k < NG; k++) { o += red[k * SLOTS + lid % SLOTS]; }
    acc[0] = o;
  }
  for (var o = 0u; o < OUTS; o++) {
    let i = lid + o * WG;
    if (i < SLOTS) {
      let g = i / D4;
      if (nSplits == 1u) {
        out[head * D4 + i] = vec4<act>(acc[o] / sm_sum[g]);
      } else {
        partialO[((head + g) * p.nSplits + split) * D4 + i % D4] = acc[o];
      }
    }
  }
  if (nSplits > 1u) {
    for (var g = lid; g < GROUP; g += WG) { partialML[(head + g) * p.nSplits + split] = vec2f(sm_max[g], sm_sum[g]); }
  }
}
