// Causal attention over the paged KV cache, tiled over query tokens (flash-attention style).
// One workgroup per (query tile, head group): a tile is up to TQ consecutive tokens of one
// sequence, a head group GROUP consecutive query heads sharing one KV head (the whole GQA group
// where workgroup memory allows), so the workgroup has R = TQ·GROUP query rows and reads each K/V
// tile once for all of them. K and V of TK keys stream through workgroup memory together; each
// row keeps an online softmax (running max, sum, unnormalised output). Key j is visible to a row
// at position pos when j <= pos and, under a sliding window, pos - j < p.window; keys before the
// tile's first window (pages included) are never read. Four barriers per key tile. A tile's
// softmax (each row's max and sum over the tile's scores: shaders/lib/attn_softmax.wgsl) is a
// subgroup reduction per row where the device has subgroups (runs of one subgroup's lanes take a
// row each, so every thread works), else one thread per row scans its scores. Params, the window
// and the page lookup: shaders/lib/attn_kv.wgsl; one of shaders/lib/subgroups.wgsl or
// subgroups_off.wgsl (SUBGROUPS) goes in front too (src/kernels/attention.ts).
//
// The step's tokens must be grouped by sequence in slot order (StepBuffers.write does this), so
// sequence s owns tokens lastToken[s-1]+1 ..= lastToken[s]; workgroup x finds its (sequence, tile)
// by walking the sequences. A dispatch of ceil(T/TQ) + min(T, maxSeqs) - 1 tiles covers any batch;
// the surplus workgroups return at once.
alias act = f32;

override WG: u32 = 128;
override HEAD_DIM: u32 = 128;
override TQ: u32 = 16;    // query tokens per tile
override TK: u32 = 16;    // keys per tile
override GROUP: u32 = 1;  // query heads per workgroup
override R: u32 = TQ * GROUP;  // query rows, token-major: row r is (token r / GROUP, head r % GROUP)
override D4: u32 = HEAD_DIM / 4u;
// Output vec4s per thread: thread lid owns (row, column) = divmod(lid + i * WG, D4) for the
// i that keep lid + i * WG below R * D4 (the last round is partial when WG does not divide it,
// as with head dims that are not a multiple of 16: 24, 40, 72, ...).
override OUTS: u32 = (R * D4 + WG - 1u) / WG;
const MAX_OUTS = 8u;
// The online softmax's rows, one per query row (shaders/lib/attn_softmax.wgsl), and the keys of
// a tile (that and shaders/lib/attn_kv.wgsl's kt, vt, keyAt).
override SM_ROWS: u32 = R;
override TILE_KEYS: u32 = TK;

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

var<workgroup> qs: array<vec4f, R * D4>;    // the query rows, pre-scaled
var<workgroup> rowPos: array<u32, TQ>;

// Cache offsets (in vec4s) of keys first .. first + n of (seq, kh) into keyAt[buf * TK ..].
fn lookUp(seq: u32, kh: u32, first: u32, n: u32, buf: u32, lid: u32) {
  for (var j = lid; j < n; j += WG) { keyAt[buf * TK + j] = keyRow(seq, first + j, kh); }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  // With subgroups: the subgroup size and this thread's subgroup-ordered index for the softmax
  // (uniform control flow, every thread active: before any return).
  let sgs = sg_size();
  let v = sg_index(lid, sgs);
  let h0 = wg.y * GROUP;
  let kh = h0 / (p.nHeads / p.nKv);

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

  // Row r = (token tr, head g): the GROUP heads of a token are consecutive in q and out, so a
  // token's rows are one run of GROUP * D4 vec4s from ((first + tr) * nHeads + h0) * D4.
  for (var i = lid; i < R * D4; i += WG) {
    let tr = i / (GROUP * D4);
    if (tr < count) {
      qs[i] = vec4f(q[((first + tr) * p.nHeads + h0) * D4 + i - tr * GROUP * D4]) * p.scale;
    } else {
      qs[i] = vec4f(0.0);
    }
  }
  for (var r = lid; r < TQ; r += WG) { rowPos[r] = select(0u, positions[first + r], r < count); }
  softmax_init(lid);
  lookUp(seq, kh, lo, min(TK, keys - lo), 0u, lid);

  var acc: array<vec4f, MAX_OUTS>;
  var buf = 0u;
  for (var tile = lo; tile < keys; tile += TK) {
    let n = min(TK, keys - tile);
    workgroupBarrier();  // the previous tile is consumed; this tile's offsets are written
    load_tile(n, buf, lid);
    workgroupBarrier();
    for (var i = lid; i < R * TK; i += WG) {
      let r = i / TK;
      let j = i % TK;
      var score = MASKED;
      if (r / GROUP < count && j < n && visible(tile + j, rowPos[r / GROUP])) {
        score = 0.0;
        for (var d = 0u; d < D4; d++) { score += dot(qs[r * D4 + d], kt[j * ROW + d]); }
        score = capScore(score);
      }
      sm_p[i] = score;
    }
    workgroupBarrier();
    // Each row's running softmax takes this tile's scores; then the next tile's keys are looked up.
    softmax_tile(n, lid, v, sgs);
    let next = tile + TK;
    if (next < keys) { lookUp(seq, kh, next, min(TK, keys - next), 1u - buf, lid); }
    workgroupBarrier();
    for (var o = 0u; o < OUTS; o++) {
      let i = lid + o * WG;
      if (i < R * D4) {
        let r = i / D4;
        let col = i % D4;
        var a = acc[o] * sm_alpha[r];
        for (var j = 0u; j < n; j++) { a += sm_p[r * TK + j] * vt[j * D4 + col]; }
        acc[o] = a;
      }
    }
    buf = 1u - buf;
  }

  // sm_sum was completed before the last tile's final barrier.
  for (var o = 0u; o < OUTS; o++) {
    let i = lid + o * WG;
    let tr = i / (GROUP * D4);
    if (i < R * D4 && tr < count) {
      out[((first + tr) * p.nHeads + h0) * D4 + i - tr * GROUP * D4] = vec4<act>(acc[o] / sm_sum[i / D4]);
    }
  }
}
