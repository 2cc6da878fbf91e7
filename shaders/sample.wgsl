// The GPU sampler's final select: one workgroup per sequence picks the next token from the
// partials and candidates that shaders/sample_partial.wgsl wrote (and, in the cases below, its
// f32 logits row), so only token ids (and logprobs when asked) go back to the CPU.
// src/kernels/sample.ts has the TypeScript reference that mirrors every step below. Needs
// shaders/lib/sample_select.wgsl in front.
//
// Order of work for a sequence (T = temperature):
//  1. The chunks' partials give the largest logit (ties -> lowest id) and the raw log-normaliser
//     logZ = log sum exp(l), for greedy picks and OpenAI's logprobs.
//  2. T <= 0: greedy, the argmax. Otherwise the kept set is {i : key(l_i) >= tau}, where key()
//     maps an f32 to a u32 with the same order, and tau is the largest of three thresholds:
//       min-p: l >= lmax + T * log(min_p)           (p_i >= min_p * p_max; no pass needed)
//       top-k: the k-th largest key among the kept  (radix select on counts)
//       top-p: the largest key whose kept mass at or above it is >= top_p * (kept mass)
//              (radix select on masses; after top-k and min-p, as vLLM orders them)
//     Ties at a threshold are all kept (so top-k may keep more than k tokens when logits tie).
//  3. Draw u in [0, 1) from a counter-based hash of (seed, step) and pick the first kept token,
//     in id order, whose cumulative mass exp((l - lmax) / T) exceeds u * (kept mass).
//  4. Logprobs (log-softmax of the raw, unscaled, unfiltered logits): the chosen token's, and
//     the n largest (ties -> lowest ids), found by the same radix select with k = n.
//
// Where steps 2-4 read: with top-k of at most MAX_CAND, the selects and the draw run on the
// chunks' candidate lists (chunks x k entries, in id order), which hold every kept token unless a
// chunk dropped ties at or above the top-k cut; then, and for top-k off or above MAX_CAND, they
// stream the whole row as before (2 + top-k 1..4 + top-p 1..4 passes in this one workgroup).
// Temperature alone (no filter) draws from the chunks' masses, then within one chunk. Top
// logprobs always come from the candidates. The result is the same kept set and the same draw
// u either way; the draw's f32 running sums add in a different order than a single pass over
// the row, so a u within rounding of a boundary could pick a neighbour (the reference sums in f64).

const PART_WORDS: u32 = 8u;
const LP_WORDS: u32 = 42u; // per sequence: chosen logprob, count, then MAX_TOP (id, logprob) pairs

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read> seqs: array<SeqParams>;
@group(0) @binding(2) var<storage, read_write> tokensOut: array<u32>; // [slots]: row r's token at rowSlot[r]
@group(0) @binding(3) var<storage, read_write> logprobsOut: array<u32>; // [S, LP_WORDS]
@group(0) @binding(4) var<uniform> p: Params;
// The sequence slot of each row: a batch's rows change from step to step, a sequence's slot does
// not, so the token lands where the next step's penalties (and the engine's readback) find it.
@group(0) @binding(5) var<storage, read> rowSlot: array<u32>;
@group(0) @binding(6) var<storage, read> part: array<u32>; // [S, chunks, PART_WORDS]
@group(0) @binding(7) var<storage, read> cand: array<u32>; // [S, chunks, MAX_CAND, 2]

var<workgroup> sToken: u32;
var<workgroup> sChunk: u32;
var<workgroup> sU: f32;
var<workgroup> sLast: atomic<u32>;
var<workgroup> topKey: array<u32, MAX_TOP>;
var<workgroup> topId: array<u32, MAX_TOP>;

// PCG hash (Jarzynski & Olano, "Hash functions for GPU rendering", 2020).
fn pcg(x: u32) -> u32 {
  let state = x * 747796405u + 2891336453u;
  let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
  return (word >> 22u) ^ word;
}

// u in [0, 1) with 24 random bits, from (seed, step) alone: same seed and step, same draw.
fn uniform01(seedLo: u32, seedHi: u32, step: u32) -> f32 {
  let h = pcg(seedLo ^ pcg(seedHi ^ pcg(step)));
  return f32(h >> 8u) * (1.0 / 16777216.0);
}

// Draws from the kept entries (keys >= tau) with weights exp((l - lmax) / T); sToken gets the
// entry's index in `src`.
fn draw(src: Src, lid: u32, tau: u32, lmax: f32, invT: f32, u: f32) {
  if (lid == 0u) { atomicStore(&sLast, 0u); }
  let range = chunkOf(src.len, lid);
  var sum = 0.0;
  for (var i = range.x; i < range.y; i++) {
    let l = valAt(src, i);
    if (keyOf(l) >= tau) { sum += exp((l - lmax) * invT); }
  }
  let incl = scanF32(lid, sum);
  let excl = select(0.0, redS[lid - min(1u, lid)], lid > 0u);
  let total = redS[WG - 1u];
  if (sum > 0.0) { atomicMax(&sLast, lid); }
  workgroupBarrier();
  let goal = u * total;
  // Exactly one thread owns the crossing: the one whose [excl, incl) holds goal, or the last
  // one with mass if rounding pushed goal to the total.
  let owns = (excl <= goal && goal < incl) || (goal >= total && lid == atomicLoad(&sLast));
  if (owns) {
    let local = goal - excl;
    var acc = 0.0;
    var chosen = NONE;
    var last = range.x;
    for (var i = range.x; i < range.y; i++) {
      let l = valAt(src, i);
      if (keyOf(l) >= tau) {
        acc += exp((l - lmax) * invT);
        last = i;
        if (acc > local) {
          chosen = i;
          break;
        }
      }
    }
    sToken = select(chosen, last, chosen == NONE);
  }
}

// Writes the n largest logits' ids and logprobs (ties -> lowest ids) to `out`.
fn topLogprobs(src: Src, lid: u32, n: u32, logZ: f32, out: u32, base: u32) {
  let cut = topCut(src, lid, n);
  // Keys above the cut are all in (fewer than n, or exactly n when the cut fell on a bin edge);
  // keys at it fill the rest in id order.
  var gt = cut.gtBefore;
  var eq = cut.totalGt + cut.eqBefore;
  let range = chunkOf(src.len, lid);
  for (var i = range.x; i < range.y; i++) {
    let key = keyOf(valAt(src, i));
    if (key > cut.tau) {
      topKey[gt] = key;
      topId[gt] = idAt(src, i);
      gt++;
    } else if (key == cut.tau && eq < n) {
      topKey[eq] = key;
      topId[eq] = idAt(src, i);
      eq++;
    }
  }
  workgroupBarrier();
  if (lid == 0u) {
    let m = min(n, cut.totalGt + cut.totalEq);
    // Insertion sort of at most 20: key descending, id ascending.
    for (var a = 1u; a < m; a++) {
      let key = topKey[a];
      let id = topId[a];
      var j = a;
      while (j > 0u && (topKey[j - 1u] < key || (topKey[j - 1u] == key && topId[j - 1u] > id))) {
        topKey[j] = topKey[j - 1u];
        topId[j] = topId[j - 1u];
        j--;
      }
      topKey[j] = key;
      topId[j] = id;
    }
    logprobsOut[out + 1u] = m;
    for (var j = 0u; j < m; j++) {
      logprobsOut[out + 2u + 2u * j] = topId[j];
      logprobsOut[out + 3u + 2u * j] = bitcast<u32>(logits[base + topId[j]] - logZ);
    }
  }
}

// Chunk c's mass at temperature T relative to the row's max: sT * exp((m - lmax) / T).
fn chunkMass(row: u32, c: u32, lmax: f32, invT: f32) -> f32 {
  let at = (row * p.chunks + c) * PART_WORDS;
  return bitcast<f32>(part[at + 6u]) * exp((bitcast<f32>(part[at + 2u]) - lmax) * invT);
}

// Whether a chunk left out a tie at or above tau: then the candidates miss part of the kept set.
fn candidatesMiss(row: u32, tau: u32) -> bool {
  var miss = false;
  for (var c = 0u; c < p.chunks; c++) {
    let at = (row * p.chunks + c) * PART_WORDS;
    miss = miss || (part[at + 5u] != 0u && part[at + 4u] >= tau);
  }
  return miss;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let row = wg.x;
  if (row >= arrayLength(&seqs)) { return; }
  let sp = seqs[row];
  let base = row * p.rowStride;

  // 1. The chunks' partials, merged: largest key (lowest id among ties) and logZ.
  var bestKey = 0u;
  var bestIdx = NONE;
  var m = LOWEST;
  var s = 0.0;
  for (var c = lid; c < p.chunks; c += WG) {
    let at = (row * p.chunks + c) * PART_WORDS;
    let key = part[at];
    let idx = part[at + 1u];
    if (key > bestKey || (key == bestKey && idx < bestIdx)) {
      bestKey = key;
      bestIdx = idx;
    }
    let ms = mergeMS(m, s, bitcast<f32>(part[at + 2u]), bitcast<f32>(part[at + 3u]));
    m = ms.x;
    s = ms.y;
  }
  redKey[lid] = bestKey;
  redIdx[lid] = bestIdx;
  redM[lid] = m;
  redS[lid] = s;
  reduceBest(lid);
  let argmax = redIdx[0];
  let lmax = logits[base + argmax];
  let logZ = redM[0] + log(redS[0]);
  workgroupBarrier(); // redKey/redIdx/redS are reused below

  let full = Src(0u, base, 0u, p.vocab);
  let cands = Src(1u, row * p.chunks * MAX_CAND * 2u, 0u, p.chunks * candCount(sp));

  // 2-3. The token.
  var token = argmax;
  if (sp.temperature > 0.0) {
    var tau = 1u;
    if (sp.logMinP > LOWEST) { tau = max(tau, keyOf(lmax + sp.temperature * sp.logMinP)); }
    var src = full;
    var u = uniform01(sp.seedLo, sp.seedHi, sp.step);
    if (pureTemperature(sp)) {
      // Every token is kept: pick the chunk where u * (row mass) falls from the chunks' masses
      // (in id order, as the reference's running sum), then draw within that chunk alone with u
      // rescaled to its share. The same walk as one pass over the row, in two levels.
      if (lid == 0u) {
        var total = 0.0;
        for (var c = 0u; c < p.chunks; c++) { total += chunkMass(row, c, lmax, sp.invTemperature); }
        let goal = u * total;
        var acc = 0.0;
        var pick = 0u;
        var local = 0.0;
        for (var c = 0u; c < p.chunks; c++) {
          let w = chunkMass(row, c, lmax, sp.invTemperature);
          if (w > 0.0) {
            pick = c; // the last chunk with mass, if rounding pushed goal to the total
            local = 0x1.fffffep-1f;
            if (acc + w > goal) {
              local = min((goal - acc) / w, 0x1.fffffep-1f);
              break;
            }
          }
          acc += w;
        }
        sChunk = pick;
        sU = max(local, 0.0);
      }
      let c = workgroupUniformLoad(&sChunk);
      u = workgroupUniformLoad(&sU);
      src = Src(0u, base + c * p.chunk, c * p.chunk, min(p.chunk, p.vocab - c * p.chunk));
    } else if (sp.topK > 0u && sp.topK <= MAX_CAND) {
      let t = selectTopCount(cands, lid, tau, sp.topK);
      if (candidatesMiss(row, t)) {
        tau = selectTopCount(full, lid, tau, sp.topK);
      } else {
        src = cands;
        tau = t;
      }
    } else if (sp.topK > 0u) {
      tau = selectTopCount(full, lid, tau, sp.topK);
    }
    if (sp.topP < 1.0) { tau = selectTopMass(src, lid, tau, sp.topP, lmax, sp.invTemperature); }
    draw(src, lid, tau, lmax, sp.invTemperature, u);
    token = idAt(src, workgroupUniformLoad(&sToken));
  }
  if (lid == 0u) { tokensOut[rowSlot[row]] = token; }

  // 4. Logprobs of the raw logits.
  if (sp.logprobs != 0u) {
    let out = row * LP_WORDS;
    if (lid == 0u) {
      logprobsOut[out] = bitcast<u32>(logits[base + token] - logZ);
      logprobsOut[out + 1u] = 0u;
    }
    let n = min(min(sp.topLogprobs, MAX_TOP), p.vocab);
    if (n > 0u) { topLogprobs(cands, lid, n, logZ, out, base); }
  }
}
