// Split-K attention over the paged KV cache (flash-decoding), pass 1 of 2.
// One workgroup per (split, query head, token). Token t attends causally to keys
// firstKey(positions[t]) ..= positions[t] of its own sequence (tokenSeq[t], through blockTable):
// all keys from 0, or the last p.window of them under a sliding window. Split s covers keys
// [s * splitKeys, (s + 1) * splitKeys) of that range, so splits wholly before the window return
// at once and pages there are never read. Keys stream through workgroup memory in tiles of KB
// with an online softmax; the split's unnormalised output and its (max, sum) go to the partial
// buffers, which attn_combine merges. Any token count works, so this is also a (slow but
// correct) prefill path. Params, the window and the tile loads: shaders/lib/attn_kv.wgsl.
alias act = f32;

override WG: u32 = 64;
override HEAD_DIM: u32 = 128;
override KB: u32 = 16;  // keys per tile
// The PV product: thread (group g, column d) sums keys g, g + NG, ... of a tile into column d.
override D4: u32 = HEAD_DIM / 4u;
override NG: u32 = WG / D4;
// Tile rows are padded by one vec4 so that threads reading different keys' rows (the QK dots)
// hit different memory banks.
override ROW: u32 = D4 + 1u;

@group(0) @binding(0) var<storage, read> q: array<vec4<act>>;       // [T, nHeads, D4]
@group(0) @binding(1) var<storage, read> kCache: array<vec4<act>>;  // [numPages, PAGE, nKv, D4]
@group(0) @binding(2) var<storage, read> vCache: array<vec4<act>>;
@group(0) @binding(3) var<storage, read> positions: array<u32>;     // [T]
@group(0) @binding(4) var<storage, read> tokenSeq: array<u32>;      // [T]
@group(0) @binding(5) var<storage, read> blockTable: array<u32>;    // [S, maxPagesPerSeq]
@group(0) @binding(6) var<storage, read_write> partialO: array<vec4f>;   // [T, nHeads, nSplits, D4]
@group(0) @binding(7) var<storage, read_write> partialML: array<vec2f>;  // [T, nHeads, nSplits] (max, sum)
@group(0) @binding(8) var<uniform> p: Params;

var<workgroup> qs: array<vec4f, D4>;        // the query row, pre-scaled
var<workgroup> kv: array<vec4f, KB * ROW>;   // a K tile, then the V tile of the same keys
var<workgroup> scores: array<f32, KB>;
var<workgroup> probs: array<f32, KB>;
var<workgroup> reduce: array<vec4f, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let split = wg.x;
  let h = wg.y;
  let t = wg.z;
  let kh = h / (p.nHeads / p.nKv);
  let seq = tokenSeq[t];
  let pos = positions[t];
  let start = max(split * p.splitKeys, firstKey(pos));
  let end = min((split + 1u) * p.splitKeys, pos + 1u);
  let out = (t * p.nHeads + h) * p.nSplits + split;
  if (start >= end) {
    // Past this token's context or before its window: an empty split, which the combine weighs zero.
    if (lid == 0u) { partialML[out] = vec2f(NO_MAX, 0.0); }
    if (lid < D4) { partialO[out * D4 + lid] = vec4f(0.0); }
    return;
  }

  for (var d = lid; d < D4; d += WG) { qs[d] = vec4f(q[(t * p.nHeads + h) * D4 + d]) * p.scale; }

  let g = lid / D4;
  let col = lid % D4;
  var m = NO_MAX;
  var l = 0.0;
  var acc = vec4f(0.0);
  for (var tile = start; tile < end; tile += KB) {
    let n = min(KB, end - tile);
    workgroupBarrier();  // the previous tile's V and probabilities are consumed
    loadKeys(seq, kh, tile, n, lid);
    workgroupBarrier();
    for (var j = lid; j < n; j += WG) {
      var s = 0.0;
      for (var d = 0u; d < D4; d++) { s += dot(qs[d], kv[j * ROW + d]); }
      scores[j] = capScore(s);
    }
    workgroupBarrier();
    // Every thread derives the same running max; only the exps are shared out.
    var mNew = m;
    for (var j = 0u; j < n; j++) { mNew = max(mNew, scores[j]); }
    for (var j = lid; j < n; j += WG) { probs[j] = exp(scores[j] - mNew); }
    // K is consumed (scores are written): the same tile memory takes V.
    loadValues(seq, kh, tile, n, lid);
    workgroupBarrier();
    let alpha = exp(m - mNew);
    var sum = 0.0;
    for (var j = 0u; j < n; j++) { sum += probs[j]; }
    l = l * alpha + sum;
    m = mNew;
    acc *= alpha;
    if (g < NG) {
      for (var j = g; j < n; j += NG) { acc += probs[j] * kv[j * ROW + col]; }
    }
  }

  // Sum the NG key groups' partial columns.
  reduce[lid] = acc;
  workgroupBarrier();
  if (lid < D4) {
    var o = vec4f(0.0);
    for (var k = 0u; k < NG; k++) { o += reduce[k * D4 + lid]; }
    partialO[out * D4 + lid] = o;
  }
  if (lid == 0u) { partialML[out] = vec2f(m, l); }
}
