// The sampler's wide pass: workgroup (c, r) reads ids [c * chunk, (c + 1) * chunk) of sequence
// r's logits row once, so the whole GPU streams the vocabulary instead of one workgroup per
// sequence. It writes the chunk's partial (largest key and its lowest id, online max and sum of
// exp for logZ) and, when the sequence needs them (candCount), the chunk's top candCount
// candidates (key descending, ties -> lowest ids), kept in id order. Every token that a top-k of
// k <= candCount, or the top logprobs, keeps overall is among them (a token among the global top
// k has fewer than k tokens ahead of it in its chunk too), except ties at a chunk's cut that did
// not fit: the partial flags those (`dropped`, with the cut `tauC`) so that sample.wgsl can tell
// whether the candidates hold its whole kept set. Needs shaders/lib/sample_select.wgsl in front.

const PART_WORDS: u32 = 8u; // bestKey, bestIdx, m, s, tauC, dropped, sT, 1 unused

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read> seqs: array<SeqParams>;
@group(0) @binding(2) var<uniform> p: Params;
@group(0) @binding(3) var<storage, read_write> part: array<u32>; // [S, chunks, PART_WORDS]
@group(0) @binding(4) var<storage, read_write> cand: array<u32>; // [S, chunks, MAX_CAND, 2]

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let chunk = wg.x;
  let row = wg.y;
  if (row >= arrayLength(&seqs) || chunk >= p.chunks) { return; }
  let sp = seqs[row];
  let start = chunk * p.chunk;
  let src = Src(0u, row * p.rowStride + start, start, min(p.chunk, p.vocab - start));

  var bestKey = 0u;
  var bestIdx = NONE;
  var m = LOWEST;
  var s = 0.0;
  for (var i = lid; i < src.len; i += WG) {
    let l = valAt(src, i);
    let key = keyOf(l);
    if (key > bestKey || bestIdx == NONE) {
      bestKey = key;
      bestIdx = src.idBase + i;
    }
    if (l > m) {
      s = s * exp(m - l) + 1.0;
      m = l;
    } else {
      s += exp(l - m);
    }
  }
  redKey[lid] = bestKey;
  redIdx[lid] = bestIdx;
  redM[lid] = m;
  redS[lid] = s;
  reduceBest(lid);
  let out = (row * p.chunks + chunk) * PART_WORDS;
  if (lid == 0u) {
    part[out] = redKey[0];
    part[out + 1u] = redIdx[0];
    part[out + 2u] = bitcast<u32>(redM[0]);
    part[out + 3u] = bitcast<u32>(redS[0]);
    part[out + 4u] = 0u;
    part[out + 5u] = 0u;
  }
  let chunkMax = redM[0];
  workgroupBarrier(); // redKey/redIdx/redS are reused below

  // Temperature alone: the chunk's mass sT = sum exp((l - m) / T) about its own max m, which the
  // select rescales by exp((m - lmax) / T) once it knows the row's max.
  if (pureTemperature(sp)) {
    var sT = 0.0;
    for (var i = lid; i < src.len; i += WG) { sT += exp((valAt(src, i) - chunkMax) * sp.invTemperature); }
    redS[lid] = sT;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
      if (lid < stride) { redS[lid] += redS[lid + stride]; }
      workgroupBarrier();
    }
    if (lid == 0u) { part[out + 6u] = bitcast<u32>(redS[0]); }
    workgroupBarrier();
  }

  let n = candCount(sp);
  if (n == 0u) { return; }
  let cut = topCut(src, lid, n);
  // Kept: every key above the cut, then the first (n - totalGt) ties in id order; entry i goes
  // to (kept above before it) + (kept ties before it), so the list stays in id order.
  let quota = n - min(cut.totalGt, n);
  // The row's lists are packed at a stride of n per chunk, so sample.wgsl reads chunks * n entries.
  let base = (row * p.chunks * MAX_CAND + chunk * n) * 2u;
  let range = chunkOf(src.len, lid);
  var gt = cut.gtBefore;
  var eq = cut.eqBefore;
  for (var i = range.x; i < range.y; i++) {
    let l = valAt(src, i);
    let key = keyOf(l);
    var at = NONE;
    if (key > cut.tau) {
      at = gt + min(eq, quota);
      gt++;
    } else if (key == cut.tau) {
      if (eq < quota) { at = gt + eq; }
      eq++;
    }
    if (at != NONE) {
      cand[base + 2u * at] = bitcast<u32>(l);
      cand[base + 2u * at + 1u] = src.idBase + i;
    }
  }
  let kept = cut.totalGt + min(cut.totalEq, quota);
  for (var j = kept + lid; j < n; j += WG) {
    cand[base + 2u * j] = PAD;
    cand[base + 2u * j + 1u] = NONE;
  }
  if (lid == 0u) {
    part[out + 4u] = cut.tau;
    part[out + 5u] = u32(cut.totalGt + cut.totalEq > n);
  }
}
