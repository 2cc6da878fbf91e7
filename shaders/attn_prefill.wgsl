// Causal attention over the paged KV cache, tiled over query tokens (flash-attention style).
// One workgroup per (query tile, query head): a tile is up to TQ consecutive tokens of one
// sequence. K and V stream through workgroup memory in tiles of TK keys; each query row keeps an
// online softmax (running max, sum, unnormalised output). Key j is visible to a row at position
// pos when j <= pos and, under a sliding window, pos - j < p.window; keys before the tile's
// first window (pages included) are never read. Params, the window and the tile loads:
// shaders/lib/attn_kv.wgsl.
//
// The step's tokens must be grouped by sequence in slot order (StepBuffers.write does this), so
// sequence s owns tokens lastToken[s-1]+1 ..= lastToken[s]; workgroup x finds its (sequence, tile)
// by walking the sequences. A dispatch of ceil(T/TQ) + min(T, maxSeqs) - 1 tiles covers any batch;
// the surplus workgroups return at once.
alias act = f32;

override WG: u32 = 64;
override HEAD_DIM: u32 = 128;
override TQ: u32 = 16;  // query tokens per tile
override TK: u32 = 16;  // keys per tile
override D4: u32 = HEAD_DIM / 4u;
// Tile rows padded by one vec4 so the QK dots of neighbouring keys fall in different banks.
override ROW: u32 = D4 + 1u;
// Output vec4s per thread: thread lid owns (row, column) = divmod(lid + i * WG, D4) for the
// i that keep lid + i * WG below TQ * D4 (the last round is partial when WG does not divide it,
// as with head dims that are not a multiple of 16: 24, 40, 72, ...).
override OUTS: u32 = (TQ * D4 + WG - 1u) / WG;
const MAX_OUTS = 8u;

struct Counts {
  T: u32,  // tokens in this step
  S: u32,  // sequences in this step
}

@group(0) @binding(0) var<storage, read> q: array<vec4<act>>;       // [T, nHeads, D4]
@group(0) @binding(1) var<storage, read> kCache: array<vec4<act>>;  // [numPages, PAGE, nKv, D4]
@group(0) @binding(2) var<storage, read> vCache: array<vec4<act>>;
@group(0) @binding(3) var<storage, read> positions: array<u32>;     // [T]
@group(0) @binding(4) var<storage, read> blockTable: array<u32>;    // [S, maxPagesPerSeq]
@group(0) @binding(5) var<storage, read> lastToken: array<u32>;     // [S] last token of each sequence
@group(0) @binding(6) var<uniform> counts: Counts;
@group(0) @binding(7) var<storage, read_write> out: array<vec4<act>>;  // [T, nHeads, D4]
@group(0) @binding(8) var<uniform> p: Params;

const MASKED = -3.0e38;  // a hidden key's score: exp(MASKED - m) is 0 for any running max, NO_MAX included

var<workgroup> qs: array<vec4f, TQ * D4>;   // the query rows, pre-scaled
var<workgroup> kv: array<vec4f, TK * ROW>;  // a K tile, then the V tile of the same keys
var<workgroup> s: array<f32, TQ * TK>;      // scores, then probabilities
var<workgroup> rowPos: array<u32, TQ>;
var<workgroup> rowMax: array<f32, TQ>;
var<workgroup> rowAlpha: array<f32, TQ>;
var<workgroup> rowSum: array<f32, TQ>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let h = wg.y;
  let kh = h / (p.nHeads / p.nKv);

  // Which sequence and which of its tiles this workgroup takes.
  var rest = wg.x;
  var seq = 0u;
  var first = 0u;
  var count = 0u;
  for (; seq < counts.S; seq++) {
    let begin = select(0u, lastToken[seq - 1u] + 1u, seq > 0u);
    let tiles = (lastToken[seq] + 1u - begin + TQ - 1u) / TQ;
    if (rest < tiles) {
      first = begin + rest * TQ;
      count = min(TQ, lastToken[seq] + 1u - first);
      break;
    }
    rest -= tiles;
  }
  if (count == 0u) { return; }

  // Keys from the earliest row's first visible key to the latest row's position: masking hides
  // what a row does not see.
  var lo = 0xffffffffu;
  var keys = 0u;
  for (var r = 0u; r < count; r++) {
    lo = min(lo, firstKey(positions[first + r]));
    keys = max(keys, positions[first + r] + 1u);
  }

  for (var i = lid; i < TQ * D4; i += WG) {
    let r = i / D4;
    if (r < count) {
      qs[i] = vec4f(q[((first + r) * p.nHeads + h) * D4 + i % D4]) * p.scale;
    } else {
      qs[i] = vec4f(0.0);
    }
  }
  for (var r = lid; r < TQ; r += WG) {
    rowPos[r] = select(0u, positions[first + r], r < count);
    rowMax[r] = NO_MAX;
    rowSum[r] = 0.0;
  }

  var acc: array<vec4f, MAX_OUTS>;
  for (var tile = lo; tile < keys; tile += TK) {
    let n = min(TK, keys - tile);
    workgroupBarrier();  // the previous tile's V and probabilities are consumed
    loadKeys(seq, kh, tile, n, lid);
    workgroupBarrier();
    for (var i = lid; i < TQ * TK; i += WG) {
      let r = i / TK;
      let j = i % TK;
      var score = MASKED;
      if (r < count && j < n && visible(tile + j, rowPos[r])) {
        score = 0.0;
        for (var d = 0u; d < D4; d++) { score += dot(qs[r * D4 + d], kv[j * ROW + d]); }
        score = capScore(score);
      }
      s[i] = score;
    }
    workgroupBarrier();
    for (var r = lid; r < TQ; r += WG) {
      var mNew = rowMax[r];
      for (var j = 0u; j < n; j++) { mNew = max(mNew, s[r * TK + j]); }
      rowAlpha[r] = exp(rowMax[r] - mNew);
      rowMax[r] = mNew;
    }
    workgroupBarrier();
    for (var i = lid; i < TQ * TK; i += WG) { s[i] = exp(s[i] - rowMax[i / TK]); }
    // K is consumed (scores are written): the same tile memory takes V.
    loadValues(seq, kh, tile, n, lid);
    workgroupBarrier();
    for (var r = lid; r < TQ; r += WG) {
      var sum = 0.0;
      for (var j = 0u; j < n; j++) { sum += s[r * TK + j]; }
      rowSum[r] = rowSum[r] * rowAlpha[r] + sum;
    }
    for (var o = 0u; o < OUTS; o++) {
      let i = lid + o * WG;
      if (i < TQ * D4) {
        let r = i / D4;
        let col = i % D4;
        var a = acc[o] * rowAlpha[r];
        for (var j = 0u; j < n; j++) { a += s[r * TK + j] * kv[j * ROW + col]; }
        acc[o] = a;
      }
    }
  }

  workgroupBarrier();  // rowSum is complete
  for (var o = 0u; o < OUTS; o++) {
    let i = lid + o * WG;
    let r = i / D4;
    if (i < TQ * D4 && r < count) {
      out[((first + r) * p.nHeads + h) * D4 + i % D4] = vec4<act>(acc[o] / rowSum[r]);
    }
  }
}

// Keys first .. first + n of (seq, kh) into tile rows 0 .. n, all WG threads sharing the work.
// The caller puts a barrier between a load and the reads of the tile, and before reusing it.
fn loadKeys(seq: u32, kh: u32, first: u32, n: u32, lid: u32) {
  for (var i = lid; i < n * D4; i += WG) {
    kv[(i / D4) * ROW + i % D4] = vec4f(kCache[keyRow(seq, first + i / D4, kh) + i % D4]);
  }
}

// The values of the same keys, as loadKeys.
fn loadValues(seq: u32, kh: u32, first: u32, n: u32, lid: u32) {
  for (var i = lid; i < n * D4; i += WG) {
    kv[(i / D4) * ROW + i % D4] = vec4f(vCache[keyRow(seq, first + i / D4, kh) + i % D4]);
  }
}
