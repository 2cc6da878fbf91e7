// Shared by the sampler's two kernels (shaders/sample_partial.wgsl, shaders/sample.wgsl): the key
// order, the radix selects and their workgroup memory, over a `Src` — either a slice of a logits
// row or a row's candidate list written by sample_partial. The including file declares
// `logits` (f32), `cand` (u32 pairs: logit bits, token id), `seqs` and `p`.
//
// Radix select without sorting: keys are ranked by their top 8 bits with a 256-bin histogram
// (workgroup atomics), the bin where the running count (or mass) from the top crosses the goal
// is found, and the next 8 bits of that bin are ranked in the next pass: at most 4 passes over the
// source, fewer when the crossing bin can be kept whole (its count is exactly what is needed).
// Masses are summed as 64-bit fixed point (2^-31 units of the largest probability) so the
// histogram is exact and deterministic whatever order the atomics land in; a token below 2^-31
// of the top one weighs nothing in the top-p cut (it still can be drawn).
//
// Key 0 is the NaN with every bit set; logits are never NaN, so the selects start at key 1 and a
// candidate list pads its unused slots with key 0, which no threshold keeps.

override WG: u32 = 256; // a power of two (the reductions halve)

const BINS: u32 = 256u;
const MAX_TOP: u32 = 20u;
// Candidates per vocabulary chunk and sequence: top-k up to this runs on the candidates alone
// (40 and 50 are the common defaults); a larger k streams the row (see sample.wgsl).
const MAX_CAND: u32 = 64u;
const MASS_ONE: f32 = 2147483648.0; // 2^31: the fixed-point weight of the largest logit
const NONE: u32 = 0xffffffffu;
const LOWEST: f32 = -0x1.fffffep+127f; // the lowest finite f32
const PAD: u32 = 0xffffffffu; // the bits of a candidate pad: keyOf gives 0

struct Params {
  vocab: u32,     // logits per sequence
  rowStride: u32, // elements between sequences' rows (0: every sequence reads row 0)
  chunk: u32,     // ids per sample_partial workgroup
  chunks: u32,    // ceil(vocab / chunk): sample_partial workgroups per sequence
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

// What a sequence's values are read from: mode 0, logits[base + i] with id idBase + i; mode 1,
// the candidate pairs at cand[base + 2i]. `len` entries, in id order either way.
struct Src {
  mode: u32,
  base: u32,
  idBase: u32,
  len: u32,
}

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

fn valAt(s: Src, i: u32) -> f32 {
  if (s.mode == 0u) { return logits[s.base + i]; }
  return bitcast<f32>(cand[s.base + 2u * i]);
}

fn idAt(s: Src, i: u32) -> u32 {
  if (s.mode == 0u) { return s.idBase + i; }
  return cand[s.base + 2u * i + 1u];
}

// Candidates sample_partial keeps per chunk for a sequence: enough for its top-k (when at most
// MAX_CAND) and its top logprobs; 0 for greedy without them, whose final select needs none.
fn candCount(sp: SeqParams) -> u32 {
  var n = 0u;
  if (sp.logprobs != 0u) { n = min(sp.topLogprobs, MAX_TOP); }
  if (sp.temperature > 0.0 && sp.topK > 0u && sp.topK <= MAX_CAND) { n = max(n, sp.topK); }
  return n;
}

// Temperature alone (no top-k, top-p or min-p): every token is kept, so the draw needs only each
// chunk's mass, which sample_partial sums and sample.wgsl walks chunk by chunk.
fn pureTemperature(sp: SeqParams) -> bool {
  return sp.temperature > 0.0 && sp.topK == 0u && sp.topP >= 1.0 && !(sp.logMinP > LOWEST);
}

// f32 -> u32 with the same order (-inf < ... < -0 < +0 < ... < inf); NaNs land at the ends.
fn keyOf(v: f32) -> u32 {
  let b = bitcast<u32>(v);
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

// Online (max, sum of exp) of two partials.
fn mergeMS(m1: f32, s1: f32, m2: f32, s2: f32) -> vec2f {
  let mm = max(m1, m2);
  return vec2f(mm, s1 * exp(m1 - mm) + s2 * exp(m2 - mm));
}

// Tree-reduces the per-thread (key, idx, m, s) in red*: the largest key (lowest idx among ties)
// and the online max/sum, all in slot 0.
fn reduceBest(lid: u32) {
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) {
      let o = lid + stride;
      if (redKey[o] > redKey[lid] || (redKey[o] == redKey[lid] && redIdx[o] < redIdx[lid])) {
        redKey[lid] = redKey[o];
        redIdx[lid] = redIdx[o];
      }
      let ms = mergeMS(redM[lid], redS[lid], redM[o], redS[o]);
      redM[lid] = ms.x;
      redS[lid] = ms.y;
    }
    workgroupBarrier();
  }
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
fn selectTopCount(src: Src, lid: u32, tauIn: u32, k: u32) -> u32 {
  beginSelect(lid, tauIn);
  for (var level = 0u; level < 4u; level++) {
    let shift = 24u - 8u * level;
    for (var b = lid; b < BINS; b += WG) { atomicStore(&hCount[b], 0u); }
    workgroupBarrier();
    let mask = highMask(shift);
    let prefix = sPrefix;
    for (var i = lid; i < src.len; i += WG) {
      let key = keyOf(valAt(src, i));
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
fn selectTopMass(src: Src, lid: u32, tauIn: u32, topP: f32, lmax: f32, invT: f32) -> u32 {
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
    for (var i = lid; i < src.len; i += WG) {
      let l = valAt(src, i);
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

// Thread lid's contiguous range of entries, so prefix sums over threads follow id order.
fn chunkOf(len: u32, lid: u32) -> vec2u {
  let size = (len + WG - 1u) / WG;
  let start = min(lid * size, len);
  return vec2u(start, min(start + size, len));
}

struct TopCut {
  tau: u32,      // keys > tau are all in, keys == tau fill the rest in id order
  totalGt: u32,  // entries with key > tau
  totalEq: u32,  // entries with key == tau
  gtBefore: u32, // this thread's: entries > tau before its range
  eqBefore: u32, // this thread's: entries == tau before its range
}

// Where the n largest keys of `src` are cut (ties -> lowest ids), with this thread's prefix
// counts so it can place its range's kept entries in id order.
fn topCut(src: Src, lid: u32, n: u32) -> TopCut {
  let tau = selectTopCount(src, lid, 1u, n);
  let range = chunkOf(src.len, lid);
  var counts = vec2u(0u);
  for (var i = range.x; i < range.y; i++) {
    let key = keyOf(valAt(src, i));
    counts += vec2u(u32(key > tau), u32(key == tau));
  }
  let incl = scanU32x2(lid, counts);
  let totals = vec2u(redKey[WG - 1u], redIdx[WG - 1u]);
  workgroupBarrier(); // redKey/redIdx are reused by the caller
  return TopCut(tau, totals.x, totals.y, incl.x - counts.x, incl.y - counts.y);
}
