// The GPU sampler: one workgroup per sequence picks the next token from its f32 logits row, so
// only token ids (and logprobs when asked) go back to the CPU. src/kernels/sample.ts has the
// TypeScript reference that mirrors every step below.
//
// Order of work for a sequence (T = temperature):
//  1. One pass: the largest logit (ties -> lowest id) and the raw log-normaliser
//     logZ = log sum exp(l) (online max/sum), for greedy picks and OpenAI's logprobs.
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
// Radix select without sorting: keys are ranked by their top 8 bits with a 256-bin histogram
// (workgroup atomics), the bin where the running count (or mass) from the top crosses the goal
// is found, and the next 8 bits of that bin are ranked in the next pass: at most 4 passes over the
// row, fewer when the crossing bin can be kept whole (its count is exactly what is needed).
// Masses are summed as 64-bit fixed point (2^-31 units of the largest probability) so the
// histogram is exact and deterministic whatever order the atomics land in; a token below 2^-31
// of the top one weighs nothing in the top-p cut (it still can be drawn).
//
// Passes over V per token: 1 (greedy); 2 + top-k (1..4) + top-p (1..4) when sampling (the
// draw is one pass plus a walk of one thread's V / WG ids); top logprobs add 1..4 + 2. A filter
// that is off costs nothing. Known cost on real GPUs: the first histogram pass funnels most of V
// into the few bins of the common exponents, so its atomics contend; subgroup pre-aggregation or
// a first level binned linearly below lmax would spread them if it shows in profiles.

override WG: u32 = 256; // a power of two (the reductions halve)

const BINS: u32 = 256u;
const MAX_TOP: u32 = 20u;
const LP_WORDS: u32 = 42u; // per sequence: chosen logprob, count, then MAX_TOP (id, logprob) pairs
const MASS_ONE: f32 = 2147483648.0; // 2^31: the fixed-point weight of the largest logit
const NONE: u32 = 0xffffffffu;
const LOWEST: f32 = -0x1.fffffep+127f; // the lowest finite f32

struct Params {
  vocab: u32,     // logits per sequence
  rowStride: u32, // elements between sequences' rows (0: every sequence reads row 0)
}

// Per sequence; packed by packSamplingParams in src/kernels/sample.ts.
struct SeqParams {
  temperature: f32,    // <= 0: greedy
  invTemperature: f32, // 1 / temperature, rounded to f32 on the CPU
  topK: u32,           // 0: off
  topP: f32,           // >= 1: off
  logMinP: f32,        // log(min_p) rounded to f32; -inf: off
  seedLo: u32,
  seedHi: u32,
  step: u32,           // RNG counter: the draw of step s is hash(seed, s)
  logprobs: u32,       // 1: write the chosen token's logprob
  topLogprobs: u32,    // n <= MAX_TOP alternatives (with logprobs = 1)
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read> seqs: array<SeqParams>;
@group(0) @binding(2) var<storage, read_write> tokensOut: array<u32>; // [slots]: row r's token at rowSlot[r]
@group(0) @binding(3) var<storage, read_write> logprobsOut: array<u32>; // [S, LP_WORDS]
@group(0) @binding(4) var<uniform> p: Params;
// The sequence slot of each row: a batch's rows change from step to step, a sequence's slot does
// not, so the token lands where the next step's penalties (and the engine's readback) find it.
@group(0) @binding(5) var<storage, read> rowSlot: array<u32>;

var<workgroup> redKey: array<u32, WG>;
var<workgroup> redIdx: array<u32, WG>;
var<workgroup> redM: array<f32, WG>;
var<workgroup> redS: array<f32, WG>;
var<workgroup> hCount: array<atomic<u32>, BINS>;
var<workgroup> hLo: array<atomic<u32>, BINS>;
var<workgroup> hHi: array<atomic<u32>, BINS>;
var<workgroup> sDone: u32;
var<workgroup> sTau: u32;
var<workgroup> sPrefix: u32;
var<workgroup> sAbove: vec2u; // count (x) or 64-bit mass (lo, hi) already known to be above the bin
var<workgroup> sTarget: vec2u;
var<workgroup> sToken: u32;
var<workgroup> sLast: atomic<u32>;
var<workgroup> topKey: array<u32, MAX_TOP>;
var<workgroup> topId: array<u32, MAX_TOP>;

// f32 -> u32 with the same order (-inf < ... < -0 < +0 < ... < inf); NaNs land at the ends.
fn keyOf(v: f32) -> u32 {
  let b = bitcast<u32>(v);
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

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

fn add64(a: vec2u, b: vec2u) -> vec2u {
  let lo = a.x + b.x;
  return vec2u(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

fn ge64(a: vec2u, b: vec2u) -> bool {
  return a.y > b.y || (a.y == b.y && a.x >= b.x);
}

// Fixed-point weight of a logit: exp((l - lmax) / T) in units of 2^-31 (<= 2^31).
fn massOf(l: f32, lmax: f32, invT: f32) -> u32 {
  return u32(exp((l - lmax) * invT) * MASS_ONE);
}

// Mask of the key bits above the 8-bit digit at `shift` (none for the top digit).
fn highMask(shift: u32) -> u32 {
  return select(0u, 0xffffffffu << (shift + 8u), shift < 24u);
}

// Both radix selects start from tauIn with no prefix fixed and nothing counted above it.
fn beginSelect(lid: u32, tauIn: u32) {
  if (lid == 0u) {
    sDone = 0u;
    sTau = tauIn;
    sPrefix = 0u;
    sAbove = vec2u(0u);
  }
}

// The smallest key `t` >= tauIn such that the kept keys (>= tauIn) at or above t number at least
// k, taking the crossing key's ties whole: keys >= the result are the top k. Returns tauIn when
// k or fewer are kept.
fn selectTopCount(base: u32, lid: u32, tauIn: u32, k: u32) -> u32 {
  beginSelect(lid, tauIn);
  for (var level = 0u; level < 4u; level++) {
    let shift = 24u - 8u * level;
    for (var b = lid; b < BINS; b += WG) { atomicStore(&hCount[b], 0u); }
    workgroupBarrier();
    let mask = highMask(shift);
    let prefix = sPrefix;
    for (var i = lid; i < p.vocab; i += WG) {
      let key = keyOf(logits[base + i]);
      if (key >= tauIn && (key & mask) == prefix) { atomicAdd(&hCount[(key >> shift) & 255u], 1u); }
    }
    workgroupBarrier();
    if (lid == 0u) {
      var acc = sAbove.x;
      var total = 0u;
      if (level == 0u) {
        for (var b = 0u; b < BINS; b++) { total += atomicLoad(&hCount[b]); }
      }
      if (level == 0u && total <= k) {
        sDone = 1u; // top-k keeps everything left
      } else {
        var b = BINS - 1u;
        loop {
          let c = atomicLoad(&hCount[b]);
          if (acc + c >= k || b == 0u) {
            let lower = prefix | (b << shift);
            if (acc + c == k || shift == 0u) {
              sDone = 1u; // the bin is wanted whole, or is a single key (its ties kept)
              sTau = max(tauIn, lower);
            } else {
              sPrefix = lower;
              sAbove = vec2u(acc, 0u);
            }
            break;
          }
          acc += c;
          b -= 1u;
        }
      }
    }
    if (workgroupUniformLoad(&sDone) != 0u) { break; }
  }
  return workgroupUniformLoad(&sTau);
}

// The largest key t >= tauIn such that the kept mass (keys >= tauIn) at keys >= t is at least
// topP times the whole kept mass: the nucleus, ties at its edge kept.
fn selectTopMass(base: u32, lid: u32, tauIn: u32, topP: f32, lmax: f32, invT: f32) -> u32 {
  beginSelect(lid, tauIn);
  for (var level = 0u; level < 4u; level++) {
    let shift = 24u - 8u * level;
    for (var b = lid; b < BINS; b += WG) {
      atomicStore(&hCount[b], 0u);
      atomicStore(&hLo[b], 0u);
      atomicStore(&hHi[b], 0u);
    }
    workgroupBarrier();
    let mask = highMask(shift);
    let prefix = sPrefix;
    for (var i = lid; i < p.vocab; i += WG) {
      let l = logits[base + i];
      let key = keyOf(l);
      if (key >= tauIn && (key & mask) == prefix) {
        let bin = (key >> shift) & 255u;
        let m = massOf(l, lmax, invT);
        atomicAdd(&hCount[bin], 1u);
        let old = atomicAdd(&hLo[bin], m);
        if (old + m < old) { atomicAdd(&hHi[bin], 1u); }
      }
    }
    workgroupBarrier();
    if (lid == 0u) {
      if (level == 0u) {
        var total = vec2u(0u);
        for (var b = 0u; b < BINS; b++) { total = add64(total, vec2u(atomicLoad(&hLo[b]), atomicLoad(&hHi[b]))); }
        // goal = topP * total, at least one unit so the crossing bin is never an empty one.
        let t = topP * (f32(total.y) * 4294967296.0 + f32(total.x));
        let hi = floor(t / 4294967296.0);
        var goal = vec2u(u32(max(t - hi * 4294967296.0, 0.0)), u32(hi));
        if (ge64(goal, total)) { goal = total; }
        if (goal.x == 0u && goal.y == 0u) { goal = vec2u(1u, 0u); }
        sTarget = goal;
      }
      let goal = sTarget;
      var acc = sAbove;
      var b = BINS - 1u;
      loop {
        let m = vec2u(atomicLoad(&hLo[b]), atomicLoad(&hHi[b]));
        let next = add64(acc, m);
        if (ge64(next, goal) || b == 0u) {
          let lower = prefix | (b << shift);
          if (atomicLoad(&hCount[b]) == 1u || shift == 0u) {
            sDone = 1u; // one token crosses, or one key (its ties kept)
            sTau = max(tauIn, lower);
          } else {
            sPrefix = lower;
            sAbove = acc;
          }
          break;
        }
        acc = next;
        b -= 1u;
      }
    }
    if (workgroupUniformLoad(&sDone) != 0u) { break; }
  }
  return workgroupUniformLoad(&sTau);
}

// Inclusive prefix sum of redS over the workgroup (Hillis-Steele: a fixed order, deterministic).
fn scanF32(lid: u32, v: f32) -> f32 {
  redS[lid] = v;
  workgroupBarrier();
  for (var off = 1u; off < WG; off *= 2u) {
    let add = select(0.0, redS[lid - min(off, lid)], lid >= off);
    workgroupBarrier();
    redS[lid] += add;
    workgroupBarrier();
  }
  return redS[lid];
}

// Inclusive prefix sums of two u32 counts over the workgroup, in redKey and redIdx.
fn scanU32x2(lid: u32, v: vec2u) -> vec2u {
  redKey[lid] = v.x;
  redIdx[lid] = v.y;
  workgroupBarrier();
  for (var off = 1u; off < WG; off *= 2u) {
    let j = lid - min(off, lid);
    let add = select(vec2u(0u), vec2u(redKey[j], redIdx[j]), lid >= off);
    workgroupBarrier();
    redKey[lid] += add.x;
    redIdx[lid] += add.y;
    workgroupBarrier();
  }
  return vec2u(redKey[lid], redIdx[lid]);
}

// Thread lid's contiguous range of ids, so prefix sums over threads follow id order.
fn chunkOf(lid: u32) -> vec2u {
  let size = (p.vocab + WG - 1u) / WG;
  let start = min(lid * size, p.vocab);
  return vec2u(start, min(start + size, p.vocab));
}

// Draws from the kept tokens (keys >= tau) with weights exp((l - lmax) / T).
fn draw(base: u32, lid: u32, tau: u32, lmax: f32, invT: f32, u: f32) {
  if (lid == 0u) { atomicStore(&sLast, 0u); }
  let range = chunkOf(lid);
  var sum = 0.0;
  for (var i = range.x; i < range.y; i++) {
    let l = logits[base + i];
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
      let l = logits[base + i];
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
fn topLogprobs(base: u32, lid: u32, n: u32, logZ: f32, out: u32) {
  let tau = selectTopCount(base, lid, 0u, n);
  // Keys above tau are all in (fewer than n, or exactly n when the cut fell on a bin edge);
  // keys equal to tau fill the rest in id order.
  let range = chunkOf(lid);
  var counts = vec2u(0u);
  for (var i = range.x; i < range.y; i++) {
    let key = keyOf(logits[base + i]);
    counts += vec2u(u32(key > tau), u32(key == tau));
  }
  let incl = scanU32x2(lid, counts);
  let totalGt = redKey[WG - 1u];
  let totalEq = redIdx[WG - 1u];
  var gt = incl.x - counts.x;
  var eq = totalGt + incl.y - counts.y;
  for (var i = range.x; i < range.y; i++) {
    let key = keyOf(logits[base + i]);
    if (key > tau) {
      topKey[gt] = key;
      topId[gt] = i;
      gt++;
    } else if (key == tau && eq < n) {
      topKey[eq] = key;
      topId[eq] = i;
      eq++;
    }
  }
  workgroupBarrier();
  if (lid == 0u) {
    let m = min(n, totalGt + totalEq);
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

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let row = wg.x;
  if (row >= arrayLength(&seqs)) { return; }
  let sp = seqs[row];
  let base = row * p.rowStride;

  // 1. Largest key (lowest id among ties) and the online max/sum of exp for logZ.
  var bestKey = 0u;
  var bestIdx = NONE;
  var m = LOWEST;
  var s = 0.0;
  for (var i = lid; i < p.vocab; i += WG) {
    let l = logits[base + i];
    let key = keyOf(l);
    if (key > bestKey || bestIdx == NONE) {
      bestKey = key;
      bestIdx = i;
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
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) {
      let o = lid + stride;
      if (redKey[o] > redKey[lid] || (redKey[o] == redKey[lid] && redIdx[o] < redIdx[lid])) {
        redKey[lid] = redKey[o];
        redIdx[lid] = redIdx[o];
      }
      let mm = max(redM[lid], redM[o]);
      redS[lid] = redS[lid] * exp(redM[lid] - mm) + redS[o] * exp(redM[o] - mm);
      redM[lid] = mm;
    }
    workgroupBarrier();
  }
  let argmax = redIdx[0];
  let lmax = logits[base + argmax];
  let logZ = redM[0] + log(redS[0]);
  workgroupBarrier(); // redKey/redIdx/redS are reused below

  // 2-3. The token.
  if (sp.temperature <= 0.0) {
    if (lid == 0u) { sToken = argmax; }
  } else {
    var tau = 0u;
    if (sp.logMinP > LOWEST) { tau = keyOf(lmax + sp.temperature * sp.logMinP); }
    if (sp.topK > 0u) { tau = selectTopCount(base, lid, tau, sp.topK); }
    if (sp.topP < 1.0) { tau = selectTopMass(base, lid, tau, sp.topP, lmax, sp.invTemperature); }
    draw(base, lid, tau, lmax, sp.invTemperature, uniform01(sp.seedLo, sp.seedHi, sp.step));
  }
  let token = workgroupUniformLoad(&sToken);
  if (lid == 0u) { tokensOut[rowSlot[row]] = token; }

  // 4. Logprobs of the raw logits.
  if (sp.logprobs != 0u) {
    let out = row * LP_WORDS;
    if (lid == 0u) {
      logprobsOut[out] = bitcast<u32>(logits[base + token] - logZ);
      logprobsOut[out + 1u] = 0u;
    }
    let n = min(min(sp.topLogprobs, MAX_TOP), p.vocab);
    if (n > 0u) { topLogprobs(base, lid, n, logZ, out); }
  }
}
