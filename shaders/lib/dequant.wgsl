// Weight dequantisation in registers, for every weight type, from the GPU layouts of
// src/kernels/weights.ts. Concatenated in front of a kernel that declares
//   @group(0) @binding(?) var<storage, read> w: array<u32>;
// Every function takes `rw`, the word offset of a weight row (row * words per row), so callers
// hoist the row multiply out of their loops, and `k`, the row's length in elements: Q8_0, Q4_0,
// Q5_0, IQ4_NL, MXFP4, Q3_K and Q6_K rows are structure-of-arrays (the quants of every block
// first, 16-byte aligned per block within the row, then the scales: dtypes.ts's `streams`), so
// a block's scale lies k / blockSize blocks of quants past `rw`. Branches on WTYPE fold away at
// pipeline creation.
//
// Two access shapes:
//   dq_quad(rw, k, p)   4 consecutive elements at column p (p % 4 == 0): for tile loaders.
//   dq_chunk(rw, k, c)  chunk c of a row, 8 elements = two quads sharing their loads: for mat-vec
//                    loops. A row has K / 8 chunks; chunk c covers the columns reported in
//                    `pa` and `pb` (each the first of 4). Chunks are numbered so that consecutive
//                    chunks read consecutive words (coalesced loads across a workgroup), which
//                    for the quantised types makes the columns non-contiguous:
//                      F32/F16/BF16: pa = 8c, pb = pa + 4
//                      Q8_0: block b = c/4, j = c%4:      pa = 32b + 8j,  pb = pa + 4
//                      Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4: block b = c/4, qs word j = c%4:
//                            pa = 32b + 4j,  pb = pa + 16
//                      IQ4_XS: the same within each 32-element block (the 8 blocks of a
//                            super-block s = c/32 share one d; qs word v = c%32):
//                            pa = 256s + 32(v/4) + 4(v%4), pb = pa + 16
//                      Q4_K, Q5_K: super-block s = c/32, qs word v = c%32:
//                            pa = 256s + 64(v/8) + 4(v%8), pb = pa + 32 (low / high nibbles)
//                      Q2_K, Q3_K: super-block s = c/32, qs word v = c%16, k = (c/16)%2,
//                            hk h = v/8: pa = 256s + 128h + 64k + 4(v%8), pb = pa + 32
//                      Q6_K: super-block s = c/32, ql word v = c%32, hk h = v/16:
//                            pa = 256s + 128h + 32((v/8)%2) + 4(v%8), pb = pa + 64

// Weight types are ggml type ids (WTYPE in src/kernels/weights.ts).
const WT_F32: u32 = 0u;
const WT_F16: u32 = 1u;
const WT_Q4_0: u32 = 2u;
const WT_Q4_1: u32 = 3u;
const WT_Q5_0: u32 = 6u;
const WT_Q5_1: u32 = 7u;
const WT_Q8_0: u32 = 8u;
const WT_Q2_K: u32 = 10u;
const WT_Q3_K: u32 = 11u;
const WT_Q4_K: u32 = 12u;
const WT_Q5_K: u32 = 13u;
const WT_Q6_K: u32 = 14u;
const WT_IQ4_NL: u32 = 20u;
const WT_IQ4_XS: u32 = 23u;
const WT_BF16: u32 = 30u;
const WT_MXFP4: u32 = 39u;

override WTYPE: u32 = WT_F32;

// Words per block of a row's first stream on the GPU: the whole block for the types kept as
// ggml has them; the quants for the structure-of-arrays ones, whose later streams (per row,
// after the quants of all nb = k / blockSize blocks) are noted beside them.
const Q8_0_WORDS: u32 = 8u;  // qs[32]; then d:f16 × nb, two per word
const Q4_0_WORDS: u32 = 4u;  // qs[16]; then d:f16 × nb
const Q4_1_WORDS: u32 = 5u;  // [d:f16, m:f16], qs[16]
const Q5_0_WORDS: u32 = 4u;  // qs[16]; then qh:u32 × nb; then d:f16 × nb
const Q5_1_WORDS: u32 = 6u;  // [d:f16, m:f16], qh, qs[16]
const Q2_K_WORDS: u32 = 21u; // scales[16], qs[64], [d:f16, dmin:f16]
const Q3_K_WORDS: u32 = 24u; // hmask[32], qs[64]; then scales[12] × nb; then d:f16 × nb
const Q4_K_WORDS: u32 = 36u; // [d:f16, dmin:f16], scales[12], qs[128]
const Q5_K_WORDS: u32 = 44u; // [d:f16, dmin:f16], scales[12], qh[32], qs[128]
const Q6_K_WORDS: u32 = 48u; // ql[128], qh[64]; then scales[16] × nb; then d:f16 × nb
const IQ4_NL_WORDS: u32 = 4u; // qs[16]; then d:f16 × nb
const IQ4_XS_WORDS: u32 = 34u; // [d:f16, scales_h:u16], scales_l[4], qs[128]
const MXFP4_WORDS: u32 = 4u; // qs[16]; then e:u8 × nb, four per word

// The 16 values a 4-bit index selects, as int8 packed four to a word (value n in byte n % 4 of
// word n / 4): ggml's kvalues_iq4nl (IQ4_NL, IQ4_XS) and kvalues_mxfp4 (E2M1 doubled).
const IQ4NL_LUT = vec4u(0xbfad9881u, 0xf6eaddcfu, 0x26190d01u, 0x71594535u);
const MXFP4_LUT = vec4u(0x03020100u, 0x0c080604u, 0xfdfeff00u, 0xf4f8fafcu);

struct Chunk {
  a: vec4f,
  b: vec4f,
  pa: u32, // column of a.x within the row
  pb: u32, // column of b.x within the row
}

fn dq_f32x4(i: u32) -> vec4f {
  return bitcast<vec4f>(vec4u(w[i], w[i + 1u], w[i + 2u], w[i + 3u]));
}

// Two halves of a word (low hk first) as f32: F16 or BF16 by WTYPE.
fn dq_half2(v: u32) -> vec2f {
  if (WTYPE == WT_BF16) {
    return bitcast<vec2f>(vec2u(v << 16u, v & 0xffff0000u));
  }
  return unpack2x16float(v);
}

// f16 number i of those packed two to a word from word `at` on (low hk first): the
// structure-of-arrays rows' block scales.
fn dq_f16_at(at: u32, i: u32) -> f32 {
  return unpack2x16float(w[at + (i >> 1u)] >> (16u * (i & 1u))).x;
}

fn dq_half4(i: u32) -> vec4f {
  return vec4f(dq_half2(w[i]), dq_half2(w[i + 1u]));
}

// The 4 bytes of a word as signed int8, low byte first.
fn dq_i8x4(q: u32) -> vec4f {
  return vec4f(vec4i(bitcast<i32>(q << 24u), bitcast<i32>(q << 16u), bitcast<i32>(q << 8u), bitcast<i32>(q)) >> vec4u(24u));
}

// The low nibbles of the 4 bytes of a word (shift 0) or the high ones (shift 4).
fn dq_nib4(q: u32, shift: u32) -> vec4u {
  return (vec4u(q, q >> 8u, q >> 16u, q >> 24u) >> vec4u(shift)) & vec4u(15u);
}

// Bits shift..shift+3 of a word, one per lane: Q5_0/Q5_1's fifth bits of 4 consecutive elements.
fn dq_bit4(qh: u32, shift: u32) -> vec4u {
  return (vec4u(qh >> shift) >> vec4u(0u, 1u, 2u, 3u)) & vec4u(1u);
}

// The 5-bit quants of Q5_0/Q5_1 elements e..e+3 of a block (e % 4 == 0, and e..e+3 within one
// hk): nibbles from qs word q (low ones for e < 16), bit 4 from bit e.. of qh.
fn dq_q5(q: u32, qh: u32, e: u32) -> vec4f {
  return vec4f(dq_nib4(q, (e & 16u) >> 2u) | (dq_bit4(qh, e) << vec4u(4u)));
}

// Table values of the 4 indices in q (each 0..15).
fn dq_lut4(lut: vec4u, q: vec4u) -> vec4f {
  let words = vec4u(lut[q.x >> 2u], lut[q.y >> 2u], lut[q.z >> 2u], lut[q.w >> 2u]);
  return vec4f(bitcast<vec4i>(words << (vec4u(24u) - 8u * (q & vec4u(3u)))) >> vec4u(24u));
}

// 4 table values from the low (shift 0) or high (shift 4) nibbles of a word: IQ4_NL, IQ4_XS
// and MXFP4 (each with its own lut).
fn dq_lut_nib4(lut: vec4u, q: u32, shift: u32) -> vec4f {
  return dq_lut4(lut, dq_nib4(q, shift));
}

// MXFP4's block scale from its E8M0 byte: 2^(e - 128), hk the power of two e encodes, built
// as f32 bits (e < 2 gives the subnormals 2^-128 and 2^-127, as ggml's GGML_E8M0_TO_FP32_HALF).
fn mxfp4_scale(word: u32) -> f32 {
  let e = word & 255u;
  return bitcast<f32>(select((e - 1u) << 23u, 0x00200000u << e, e < 2u));
}

// IQ4_XS: d * (ls - 32) of 32-element block ib (0..7) of the super-block at word `base`: ls's
// low 4 bits at bit 4ib of word 1 (scales_l), its top 2 at bit 16 + 2ib of word 0 (scales_h).
fn iq4xs_scale(base: u32, ib: u32) -> f32 {
  let w0 = w[base];
  let ls = ((w[base + 1u] >> (4u * ib)) & 15u) | (((w0 >> (16u + 2u * ib)) & 3u) << 4u);
  return unpack2x16float(w0).x * (f32(ls) - 32.0);
}

// Bit `shift` of each byte of a word: Q5_K's fifth bits of 4 consecutive elements.
fn dq_1bit4(q: u32, shift: u32) -> vec4u {
  return (vec4u(q, q >> 8u, q >> 16u, q >> 24u) >> vec4u(shift)) & vec4u(1u);
}

// Bits shift..shift+1 of each byte of a word.
fn dq_2bit4(q: u32, shift: u32) -> vec4u {
  return (vec4u(q, q >> 8u, q >> 16u, q >> 24u) >> vec4u(shift)) & vec4u(3u);
}

// Q4_K: 6-bit scale and min of sub-block j (0..7) from the 12 scale bytes in words s0, s1, s2
// (ggml's get_scale_min_k4). Returns (scale, min).
fn q4k_scale_min(s0: u32, s1: u32, s2: u32, j: u32) -> vec2f {
  let sh = 8u * (j & 3u);
  if (j < 4u) {
    return vec2f(f32((s0 >> sh) & 63u), f32((s1 >> sh) & 63u));
  }
  let lo = s2 >> sh;
  let sc = (lo & 15u) | ((((s0 >> sh) >> 6u) & 3u) << 4u);
  let mn = ((lo >> 4u) & 15u) | ((((s1 >> sh) >> 6u) & 3u) << 4u);
  return vec2f(f32(sc), f32(mn));
}

// Q4_K/Q5_K: the super-block header at word `base` (d, dmin and the 12 scale bytes) decoded for
// the sub-block pair (2i, 2i + 1) of qs's 32-byte run i: (d·scale, dmin·min) of each, as
// (lo.x, lo.y, hi.x, hi.y). dq_chunk and dequant_wide.wgsl's dq_group share it.
fn q4k_header(base: u32, i: u32) -> vec4f {
  let dm = unpack2x16float(w[base]);
  let s0 = w[base + 1u];
  let s1 = w[base + 2u];
  let s2 = w[base + 3u];
  let lo = q4k_scale_min(s0, s1, s2, 2u * i);
  let hi = q4k_scale_min(s0, s1, s2, 2u * i + 1u);
  return vec4f(dm.x * lo.x, dm.y * lo.y, dm.x * hi.x, dm.y * hi.y);
}

// Q4_K/Q5_K: the chunk of qs word q (elements pa.. from its low nibbles, pa + 32.. from its high
// ones) under header h (q4k_header); Q5_K's fifth bits at bits 2i and 2i + 1 of qh's bytes.
fn q4k_chunk(h: vec4f, q: u32, qh: u32, i: u32, q5: bool, pa: u32) -> Chunk {
  var qa = dq_nib4(q, 0u);
  var qb = dq_nib4(q, 4u);
  if (q5) {
    qa |= dq_1bit4(qh, 2u * i) << vec4u(4u);
    qb |= dq_1bit4(qh, 2u * i + 1u) << vec4u(4u);
  }
  return Chunk(h.x * vec4f(qa) - h.y, h.z * vec4f(qb) - h.w, pa, pa + 32u);
}

// Byte b of the words from `at` on.
fn dq_byte(at: u32, b: u32) -> u32 {
  return (w[at + (b >> 2u)] >> (8u * (b & 3u))) & 255u;
}

// Q2_K: (d * scale, dmin * min) of sub-block s (0..15) of the super-block at word `base`.
fn q2k_scale_min(base: u32, s: u32) -> vec2f {
  let sm = dq_byte(base, s);
  return unpack2x16float(w[base + 20u]) * vec2f(f32(sm & 15u), f32(sm >> 4u));
}

// Q3_K: d * (scale - 32) of sub-block s (0..15), from a super-block's 12 scale bytes at word
// `sc`: low 4 bits in byte s % 8 (high nibble for s >= 8), top 2 bits at 2(s / 4) of byte 8 + s % 4.
fn q3k_scale(sc: u32, d: f32, s: u32) -> f32 {
  let lo = (dq_byte(sc, s & 7u) >> (4u * (s >> 3u))) & 15u;
  let hi = (dq_byte(sc, 8u + (s & 3u)) >> (2u * (s >> 2u))) & 3u;
  return d * (f32(lo | (hi << 4u)) - 32.0);
}

// Q6_K: int8 scale idx (0..15) of a super-block whose 16 scale bytes start at word `sc`.
fn q6k_scale(sc: u32, idx: u32) -> f32 {
  let v = w[sc + (idx >> 2u)];
  return f32(bitcast<i32>(v << (24u - 8u * (idx & 3u))) >> 24u);
}

// 4 consecutive elements of the row of k elements at word `rw`, starting at column p (p % 4 == 0).
fn dq_quad(rw: u32, k: u32, p: u32) -> vec4f {
  switch (WTYPE) {
    case WT_F16, WT_BF16: {
      return dq_half4(rw + (p >> 1u));
    }
    case WT_Q8_0: {
      // A block's 8 quant words are 8 consecutive ones of the row: element p's is word p / 4.
      let d = dq_f16_at(rw + (k >> 5u) * Q8_0_WORDS, p >> 5u);
      return d * dq_i8x4(w[rw + (p >> 2u)]);
    }
    case WT_Q4_0: {
      // Byte j holds element j (low nibble) and j + 16 (high nibble).
      let d = dq_f16_at(rw + (k >> 5u) * Q4_0_WORDS, p >> 5u);
      let q = dq_nib4(w[rw + (p >> 5u) * Q4_0_WORDS + ((p & 15u) >> 2u)], (p & 16u) >> 2u);
      return d * (vec4f(q) - 8.0);
    }
    case WT_Q4_1: {
      // As Q4_0, with value = d * q + m.
      let base = rw + (p >> 5u) * Q4_1_WORDS;
      let dm = unpack2x16float(w[base]);
      let q = dq_nib4(w[base + 1u + ((p & 15u) >> 2u)], (p & 16u) >> 2u);
      return dm.x * vec4f(q) + dm.y;
    }
    case WT_Q5_0: {
      // Nibbles as Q4_0; bit e of the block's qh is bit 4 of element e; d * (q - 16).
      let b = p >> 5u;
      let nb = k >> 5u;
      let e = p & 31u;
      let q = dq_q5(w[rw + b * Q5_0_WORDS + ((e & 15u) >> 2u)], w[rw + nb * Q5_0_WORDS + b], e);
      return dq_f16_at(rw + nb * (Q5_0_WORDS + 1u), b) * (q - 16.0);
    }
    case WT_Q5_1: {
      // As Q5_0 inside a block of its own [d:f16, m:f16], qh, qs; d * q + m.
      let base = rw + (p >> 5u) * Q5_1_WORDS;
      let e = p & 31u;
      let dm = unpack2x16float(w[base]);
      let q = dq_q5(w[base + 2u + ((e & 15u) >> 2u)], w[base + 1u], e);
      return dm.x * q + dm.y;
    }
    case WT_IQ4_NL, WT_MXFP4: {
      // Nibbles as Q4_0's, each an index into the type's table; the scale is IQ4_NL's f16 d or
      // MXFP4's E8M0 byte, from the row's stream after its quants.
      let b = p >> 5u;
      let sc = rw + (k >> 5u) * IQ4_NL_WORDS; // == MXFP4_WORDS
      let q = w[rw + b * IQ4_NL_WORDS + ((p & 15u) >> 2u)];
      let shift = (p & 16u) >> 2u;
      if (WTYPE == WT_MXFP4) {
        return mxfp4_scale(dq_byte(sc, b)) * dq_lut_nib4(MXFP4_LUT, q, shift);
      }
      return dq_f16_at(sc, b) * dq_lut_nib4(IQ4NL_LUT, q, shift);
    }
    case WT_IQ4_XS: {
      // Eight IQ4_NL-style blocks of 32 after two words of scales.
      let base = rw + (p >> 8u) * IQ4_XS_WORDS;
      let ib = (p >> 5u) & 7u;
      let q = w[base + 2u + 4u * ib + ((p & 15u) >> 2u)];
      return iq4xs_scale(base, ib) * dq_lut_nib4(IQ4NL_LUT, q, (p & 16u) >> 2u);
    }
    case WT_Q4_K, WT_Q5_K: {
      // 32-byte run i of qs holds sub-block 2i in its low nibbles and 2i + 1 in its high ones.
      // Q5_K: qh (8 words) sits before qs; bit j of qh byte l is bit 4 of element l of sub-block j.
      let q5 = WTYPE == WT_Q5_K;
      let base = rw + (p >> 8u) * select(Q4_K_WORDS, Q5_K_WORDS, q5);
      let e = p & 255u;
      let sub = e >> 5u;
      let l4 = (e & 31u) >> 2u;
      let dm = unpack2x16float(w[base]);
      let sm = q4k_scale_min(w[base + 1u], w[base + 2u], w[base + 3u], sub);
      var q = dq_nib4(w[base + select(4u, 12u, q5) + 8u * (sub >> 1u) + l4], (sub & 1u) * 4u);
      if (q5) {
        q |= dq_1bit4(w[base + 4u + l4], sub) << vec4u(4u);
      }
      return (dm.x * sm.x) * vec4f(q) - dm.y * sm.y;
    }
    case WT_Q2_K, WT_Q3_K: {
      // Half h (128 elements), quarter j (32), index l: 2 bits at 2j of qs[32h + l]; Q3_K's
      // third bit is bit 4h + j of hmask[l]. Sub-block (of 16) e / 16.
      let e = p & 255u;
      let j = (e >> 5u) & 3u;
      let l4 = (e & 31u) >> 2u;
      if (WTYPE == WT_Q2_K) {
        let base = rw + (p >> 8u) * Q2_K_WORDS;
        let sm = q2k_scale_min(base, e >> 4u);
        return sm.x * vec4f(dq_2bit4(w[base + 4u + 8u * (e >> 7u) + l4], 2u * j)) - sm.y;
      }
      let s = p >> 8u;
      let nb = k >> 8u;
      let base = rw + s * Q3_K_WORDS;
      let q = dq_2bit4(w[base + 8u + 8u * (e >> 7u) + l4], 2u * j) | (dq_1bit4(w[base + l4], (e >> 5u) & 7u) << vec4u(2u));
      let d = dq_f16_at(rw + nb * (Q3_K_WORDS + 3u), s);
      return q3k_scale(rw + nb * Q3_K_WORDS + 3u * s, d, e >> 4u) * (vec4f(q) - 4.0);
    }
    case WT_Q6_K: {
      // Half h (128 elements), quarter k (32), index l: low 4 bits in ql[64h + 32(k&1) + l]
      // (low nibble for k < 2), high 2 bits at 2k of qh[32h + l]; scale (e / 16).
      let s = p >> 8u;
      let nb = k >> 8u;
      let base = rw + s * Q6_K_WORDS;
      let e = p & 255u;
      let h = e >> 7u;
      let quarter = (e >> 5u) & 3u;
      let l4 = (e & 31u) >> 2u;
      let lo = dq_nib4(w[base + 16u * h + 8u * (quarter & 1u) + l4], (quarter >> 1u) * 4u);
      let hi = dq_2bit4(w[base + 32u + 8u * h + l4], 2u * quarter);
      let d = dq_f16_at(rw + nb * (Q6_K_WORDS + 4u), s);
      return (d * q6k_scale(rw + nb * Q6_K_WORDS + 4u * s, e >> 4u)) * (vec4f(lo | (hi << vec4u(4u))) - 32.0);
    }
    default: { // WT_F32
      return dq_f32x4(rw + p);
    }
  }
}

// Chunk c (8 elements) of the row of k elements at word `rw`; see the column map at the top of
// this file.
fn dq_chunk(rw: u32, k: u32, c: u32) -> Chunk {
  switch (WTYPE) {
    case WT_F16, WT_BF16: {
      let i = rw + 4u * c;
      return Chunk(dq_half4(i), dq_half4(i + 2u), 8u * c, 8u * c + 4u);
    }
    case WT_Q8_0: {
      // Chunk c is quant words 2c and 2c + 1 of the row.
      let d = dq_f16_at(rw + (k >> 5u) * Q8_0_WORDS, c >> 2u);
      let pa = 8u * c;
      return Chunk(d * dq_i8x4(w[rw + 2u * c]), d * dq_i8x4(w[rw + 2u * c + 1u]), pa, pa + 4u);
    }
    case WT_Q4_0: {
      // Chunk c is quant word c of the row.
      let d = dq_f16_at(rw + (k >> 5u) * Q4_0_WORDS, c >> 2u);
      let q = w[rw + c];
      let pa = 32u * (c >> 2u) + 4u * (c & 3u);
      return Chunk(d * (vec4f(dq_nib4(q, 0u)) - 8.0), d * (vec4f(dq_nib4(q, 4u)) - 8.0), pa, pa + 16u);
    }
    case WT_Q4_1: {
      let base = rw + (c >> 2u) * Q4_1_WORDS;
      let j = c & 3u;
      let dm = unpack2x16float(w[base]);
      let q = w[base + 1u + j];
      let pa = 32u * (c >> 2u) + 4u * j;
      return Chunk(dm.x * vec4f(dq_nib4(q, 0u)) + dm.y, dm.x * vec4f(dq_nib4(q, 4u)) + dm.y, pa, pa + 16u);
    }
    case WT_Q5_0: {
      let b = c >> 2u;
      let nb = k >> 5u;
      let j = c & 3u;
      let d = dq_f16_at(rw + nb * (Q5_0_WORDS + 1u), b);
      let qh = w[rw + nb * Q5_0_WORDS + b];
      let q = w[rw + c];
      let pa = 32u * b + 4u * j;
      return Chunk(d * (dq_q5(q, qh, 4u * j) - 16.0), d * (dq_q5(q, qh, 4u * j + 16u) - 16.0), pa, pa + 16u);
    }
    case WT_Q5_1: {
      let base = rw + (c >> 2u) * Q5_1_WORDS;
      let j = c & 3u;
      let dm = unpack2x16float(w[base]);
      let qh = w[base + 1u];
      let q = w[base + 2u + j];
      let pa = 32u * (c >> 2u) + 4u * j;
      return Chunk(dm.x * dq_q5(q, qh, 4u * j) + dm.y, dm.x * dq_q5(q, qh, 4u * j + 16u) + dm.y, pa, pa + 16u);
    }
    case WT_IQ4_NL, WT_MXFP4: {
      let b = c >> 2u;
      let sc = rw + (k >> 5u) * IQ4_NL_WORDS; // == MXFP4_WORDS
      let q = w[rw + c];
      let pa = 32u * b + 4u * (c & 3u);
      if (WTYPE == WT_MXFP4) {
        let d = mxfp4_scale(dq_byte(sc, b));
        return Chunk(d * dq_lut_nib4(MXFP4_LUT, q, 0u), d * dq_lut_nib4(MXFP4_LUT, q, 4u), pa, pa + 16u);
      }
      let d = dq_f16_at(sc, b);
      return Chunk(d * dq_lut_nib4(IQ4NL_LUT, q, 0u), d * dq_lut_nib4(IQ4NL_LUT, q, 4u), pa, pa + 16u);
    }
    case WT_IQ4_XS: {
      let base = rw + (c >> 5u) * IQ4_XS_WORDS;
      let v = c & 31u;
      let d = iq4xs_scale(base, v >> 2u);
      let q = w[base + 2u + v];
      let pa = 256u * (c >> 5u) + 32u * (v >> 2u) + 4u * (v & 3u);
      return Chunk(d * dq_lut_nib4(IQ4NL_LUT, q, 0u), d * dq_lut_nib4(IQ4NL_LUT, q, 4u), pa, pa + 16u);
    }
    case WT_Q4_K, WT_Q5_K: {
      // Q5_K: qh word v % 8 holds the fifth bits, at bit 2i (low nibbles) and 2i + 1 (high).
      let q5 = WTYPE == WT_Q5_K;
      let base = rw + (c >> 5u) * select(Q4_K_WORDS, Q5_K_WORDS, q5);
      let v = c & 31u;
      let i = v >> 3u;
      let q = w[base + select(4u, 12u, q5) + v];
      var qh = 0u;
      if (q5) { qh = w[base + 4u + (v & 7u)]; }
      return q4k_chunk(q4k_header(base, i), q, qh, i, q5, 256u * (c >> 5u) + 64u * i + 4u * (v & 7u));
    }
    case WT_Q2_K, WT_Q3_K: {
      // qs word v (of 16) holds quarters 0..3 of 4 elements; chunk c takes quarters 2k and 2k + 1.
      let v = c & 15u;
      let hk = (c >> 4u) & 1u;
      let h = v >> 3u;
      let m = v & 7u;
      let sa = 8u * h + 4u * hk + (m >> 2u); // sub-block of pa; pb's is sa + 2
      let pa = 256u * (c >> 5u) + 128u * h + 64u * hk + 4u * m;
      if (WTYPE == WT_Q2_K) {
        let base = rw + (c >> 5u) * Q2_K_WORDS;
        let q = w[base + 4u + v];
        let sm_a = q2k_scale_min(base, sa);
        let sm_b = q2k_scale_min(base, sa + 2u);
        return Chunk(sm_a.x * vec4f(dq_2bit4(q, 4u * hk)) - sm_a.y, sm_b.x * vec4f(dq_2bit4(q, 4u * hk + 2u)) - sm_b.y, pa, pa + 32u);
      }
      let s = c >> 5u;
      let nb = k >> 8u;
      let base = rw + s * Q3_K_WORDS;
      let q = w[base + 8u + v];
      let hm = w[base + m];
      let qa = dq_2bit4(q, 4u * hk) | (dq_1bit4(hm, 4u * h + 2u * hk) << vec4u(2u));
      let qb = dq_2bit4(q, 4u * hk + 2u) | (dq_1bit4(hm, 4u * h + 2u * hk + 1u) << vec4u(2u));
      let sc = rw + nb * Q3_K_WORDS + 3u * s;
      let d = dq_f16_at(rw + nb * (Q3_K_WORDS + 3u), s);
      return Chunk(q3k_scale(sc, d, sa) * (vec4f(qa) - 4.0), q3k_scale(sc, d, sa + 2u) * (vec4f(qb) - 4.0), pa, pa + 32u);
    }
    case WT_Q6_K: {
      // ql word v: hk h = v / 16, quarters k = (v / 8) % 2 (low nibbles) and k + 2 (high).
      let s = c >> 5u;
      let nb = k >> 8u;
      let base = rw + s * Q6_K_WORDS;
      let v = c & 31u;
      let h = v >> 4u;
      let quarter = (v >> 3u) & 1u;
      let m = v & 7u;
      let ql = w[base + v];
      let qh = w[base + 32u + 8u * h + m];
      let d = dq_f16_at(rw + nb * (Q6_K_WORDS + 4u), s);
      let sc = rw + nb * Q6_K_WORDS + 4u * s;
      let sa = 8u * h + 2u * quarter + (m >> 2u);
      let qa = dq_nib4(ql, 0u) | (dq_2bit4(qh, 2u * quarter) << vec4u(4u));
      let qb = dq_nib4(ql, 4u) | (dq_2bit4(qh, 2u * quarter + 4u) << vec4u(4u));
      let pa = 256u * s + 128u * h + 32u * quarter + 4u * m;
      return Chunk(
        (d * q6k_scale(sc, sa)) * (vec4f(qa) - 32.0),
        (d * q6k_scale(sc, sa + 4u)) * (vec4f(qb) - 32.0),
        pa,
        pa + 64u,
      );
    }
    default: { // WT_F32
      let i = rw + 8u * c;
      return Chunk(dq_f32x4(i), dq_f32x4(i + 4u), 8u * c, 8u * c + 4u);
    }
  }
}
