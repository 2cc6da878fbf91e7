// Logit processors before the sampler, in place on the f32 logits [S, V], with the CPU chain's
// order and arithmetic (src/engine/logit-processors.ts, TokenSampler.sample):
//   1. bias:       l += bias[id]   (logit_bias, and -inf for ids banned before min_tokens)
//   2. repetition: seen in prompt or output: l > 0 ? l / r : l * r
//   3. frequency and presence, generated tokens only: l -= count * f + presence
//
// The generated-token counts live on the GPU ([S, V] u32), so the CPU never uploads the history:
// each dispatch first adds the token the sampler wrote at the previous step (`lastToken[s]`,
// NONE right after a request's reset) to its count. The thread that owns that id does it, so no
// barrier is needed. Which ids the prompt holds is a bitset uploaded once per request.
//
// A 2D grid: x covers the vocabulary, y is the batch row; one thread per logit. Logits are by row;
// everything that outlives a step (settings, bias, counts, prompt bits, last token) is by the
// row's sequence slot (`rowSlot`), since a batch's rows change from step to step.

override WG: u32 = 256;

const NONE: u32 = 0xffffffffu;
const HAS_BIAS: u32 = 1u; // read the sequence's bias row
const COUNTS: u32 = 2u;   // keep and use the counts (repetition, frequency or presence is on)

struct Params {
  vocab: u32,     // logits per sequence
  rowStride: u32, // elements between sequences' logits rows
  seenWords: u32, // u32 words per sequence in promptSeen: ceil(vocab / 32)
}

// Per sequence; packed by packPenaltyParams in src/kernels/penalties.ts.
struct SeqPenalties {
  flags: u32,      // HAS_BIAS | COUNTS
  repetition: f32, // 1: off
  frequency: f32,  // per occurrence
  presence: f32,   // once for any occurrence
}

@group(0) @binding(0) var<storage, read_write> logits: array<f32>;  // [S, rowStride]
@group(0) @binding(1) var<storage, read> seqs: array<SeqPenalties>; // [maxSeqs]
@group(0) @binding(2) var<storage, read> bias: array<f32>;          // [maxSeqs, vocab]
@group(0) @binding(3) var<storage, read_write> counts: array<u32>;  // [maxSeqs, vocab] generated-token counts
@group(0) @binding(4) var<storage, read> promptSeen: array<u32>;    // [maxSeqs, seenWords] bit id%32 of word id/32
@group(0) @binding(5) var<storage, read> lastToken: array<u32>;     // [maxSeqs] the sampler's previous output, or NONE
@group(0) @binding(6) var<uniform> p: Params;
@group(0) @binding(7) var<storage, read> rowSlot: array<u32>;       // [S] the slot of each row

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.x;
  let r = gid.y;
  if (i >= p.vocab || r >= arrayLength(&rowSlot)) { return; }
  let s = rowSlot[r];
  if (s >= arrayLength(&seqs)) { return; }
  let sp = seqs[s];
  let at = r * p.rowStride + i;
  let row = s * p.vocab + i;
  var l = logits[at];

  var count = 0u;
  if ((sp.flags & COUNTS) != 0u) {
    count = counts[row];
    if (lastToken[s] == i) {
      count += 1u;
      counts[row] = count;
    }
  }

  if ((sp.flags & HAS_BIAS) != 0u) { l += bias[row]; }

  if (sp.repetition != 1.0) {
    let inPrompt = ((promptSeen[s * p.seenWords + i / 32u] >> (i % 32u)) & 1u) != 0u;
    if (inPrompt || count > 0u) { l = select(l * sp.repetition, l / sp.repetition, l > 0.0); }
  }

  if (count > 0u) { l -= f32(count) * sp.frequency + sp.presence; }
  logits[at] = l;
}
