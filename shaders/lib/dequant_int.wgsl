// The weight types' integer quants, for the integer dot-product matvec (shaders/matvec_dot.wgsl,
// issue #14 part 3): dq_idot dots 32 consecutive columns of a weight row (block b: columns
// 32b..32b+31, a ggml block of 32 or a 32-column sub-block of a super-block) with the activation
// quantised the same way (int8, 16 to a vec4<u32> in column order, one f32 scale d per block and the
// sum of its int8s), with `dot4I8Packed` (WGSL `packed_4x8_integer_dot_product`): four products per
// instruction instead of a dequantise and an FMA per weight. Each type's quants are unpacked into
// signed bytes in column order (nibbles masked, fifth/sixth bits or bits of hmask/qh merged,
// table types looked up); an offset the type subtracts (Q4_0's 8, Q5_0's 16) or a min it adds
// (Q4_1, Q5_1, Q4_K, Q5_K, Q2_K) becomes one term of the activation's block sum; Q3_K's and Q6_K's
// offsets are subtracted bytewise, their 16-column sub-blocks having scales of their own.
//
// Concatenated after shaders/lib/dequant.wgsl (WTYPE, the layouts, the scale helpers) in front of
// a kernel that declares WIDE and w4 as shaders/matvec.wgsl does: with WIDE the 16-byte-aligned
// quant runs of the gpu.wide types are read as vec4 loads. The types covered are those with
// DTypeInfo.gpu.intDot (src/formats/dtypes.ts): every quantised type; F32, F16 and BF16 keep the
// float matvec.

const BYTES_1 = 0x01010101u;
const NIB_LO = 0x0F0F0F0Fu;

// 4 consecutive quant words from word `at`: one 16-byte load under WIDE (then `at` % 4 == 0: the
// gpu.wide types' quant runs, in rows of whole vec4s), else four word loads.
fn ld4(at: u32) -> vec4u {
  if (WIDE) { return w4[at >> 2u]; }
  return vec4u(w[at], w[at + 1u], w[at + 2u], w[at + 3u]);
}

// Four word loads, for the array-of-structs types whose blocks are not whole vec4s.
fn ldw4(at: u32) -> vec4u {
  return vec4u(w[at], w[at + 1u], w[at + 2u], w[at + 3u]);
}

// Σ of the 16 products of signed bytes of a and b.
fn idot16(a: vec4u, b: vec4u) -> i32 {
  return dot4I8Packed(a.x, b.x) + dot4I8Packed(a.y, b.y) + dot4I8Packed(a.z, b.z) + dot4I8Packed(a.w, b.w);
}

// Every byte minus c, for bytes under 128 and c ≤ 127: as signed bytes, with no borrow between
// them (bit 7 set first, so no byte goes below zero; then flipped back).
fn sub_bytes(q: vec4u, c: u32) -> vec4u {
  return ((q | vec4u(0x80808080u)) - vec4u(c * BYTES_1)) ^ vec4u(0x80808080u);
}

// Bits 0..3 of t, one to bit 0 of each byte (Q5_0/Q5_1's fifth bits of 4 consecutive columns).
fn spread4(t: u32) -> u32 {
  return (t & 1u) | ((t & 2u) << 7u) | ((t & 4u) << 14u) | ((t & 8u) << 21u);
}

// The fifth bits of columns 16h..16h+15 of a Q5 block (bit e of qh is column e's), at bit 4 of
// their bytes.
fn q5_high(qh: u32, h: u32) -> vec4u {
  let t = qh >> (16u * h);
  return vec4u(spread4(t), spread4(t >> 4u), spread4(t >> 8u), spread4(t >> 12u)) << vec4u(4u);
}

// The table's int8 values of the 4 indices (each 0..15) in the bytes of q, packed the same way.
fn lut_word(lut: vec4u, q: u32) -> u32 {
  let i = vec4u(q, q >> 8u, q >> 16u, q >> 24u) & vec4u(15u);
  let words = vec4u(lut[i.x >> 2u], lut[i.y >> 2u], lut[i.z >> 2u], lut[i.w >> 2u]);
  let b = (words >> (8u * (i & vec4u(3u)))) & vec4u(255u);
  return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}

fn lut_words(lut: vec4u, q: vec4u) -> vec4u {
  return vec4u(lut_word(lut, q.x), lut_word(lut, q.y), lut_word(lut, q.z), lut_word(lut, q.w));
}

// Σ w[c] · x̂[c] over block b's 32 columns of the row of k elements at word `rw`: xa and xb the
// activation's int8s of columns 0..15 and 16..31 of the block, xs its (scale, sum of int8s).
fn dq_idot(rw: u32, k: u32, b: u32, xa: vec4u, xb: vec4u, xs: vec2f) -> f32 {
  let nb = k >> 5u;
  switch (WTYPE) {
    case WT_Q8_0: {
      // The block's 8 quant words are columns 0..31 in order.
      let d = dq_f16_at(rw + nb * Q8_0_WORDS, b);
      return d * xs.x * f32(idot16(ld4(rw + 8u * b), xa) + idot16(ld4(rw + 8u * b + 4u), xb));
    }
    case WT_Q4_0, WT_Q5_0, WT_IQ4_NL, WT_MXFP4: {
      // Word j's low nibbles are columns 4j.., its high ones 16 + 4j.. .
      let q = ld4(rw + 4u * b);
      var lo = q & vec4u(NIB_LO);
      var hi = (q >> vec4u(4u)) & vec4u(NIB_LO);
      var d: f32;
      var off = 0.0;
      switch (WTYPE) {
        case WT_Q4_0: {
          d = dq_f16_at(rw + nb * Q4_0_WORDS, b);
          off = 8.0;
        }
        case WT_Q5_0: {
          d = dq_f16_at(rw + nb * (Q5_0_WORDS + 1u), b);
          let qh = w[rw + nb * Q5_0_WORDS + b];
          lo |= q5_high(qh, 0u);
          hi |= q5_high(qh, 1u);
          off = 16.0;
        }
        case WT_MXFP4: {
          d = mxfp4_scale(dq_byte(rw + nb * MXFP4_WORDS, b));
          lo = lut_words(MXFP4_LUT, lo);
          hi = lut_words(MXFP4_LUT, hi);
        }
        default: {
          d = dq_f16_at(rw + nb * IQ4_NL_WORDS, b);
          lo = lut_words(IQ4NL_LUT, lo);
          hi = lut_words(IQ4NL_LUT, hi);
        }
      }
      return d * xs.x * (f32(idot16(lo, xa) + idot16(hi, xb)) - off * xs.y);
    }
    case WT_Q4_1, WT_Q5_1: {
      // Blocks as they are: [d:f16, m:f16], (Q5_1: qh,) qs[4]; value d·q + m.
      let q5 = WTYPE == WT_Q5_1;
      let base = rw + b * select(Q4_1_WORDS, Q5_1_WORDS, q5);
      let dm = unpack2x16float(w[base]);
      let q = ldw4(base + select(1u, 2u, q5));
      var lo = q & vec4u(NIB_LO);
      var hi = (q >> vec4u(4u)) & vec4u(NIB_LO);
      if (q5) {
        let qh = w[base + 1u];
        lo |= q5_high(qh, 0u);
        hi |= q5_high(qh, 1u);
      }
      return xs.x * (dm.x * f32(idot16(lo, xa) + idot16(hi, xb)) + dm.y * xs.y);
    }
    case WT_IQ4_XS: {
      // Eight IQ4_NL-style blocks of 32 per super-block, after its two words of scales.
      let base = rw + (b >> 3u) * IQ4_XS_WORDS;
      let ib = b & 7u;
      let q = ldw4(base + 2u + 4u * ib);
      let lo = lut_words(IQ4NL_LUT, q & vec4u(NIB_LO));
      let hi = lut_words(IQ4NL_LUT, (q >> vec4u(4u)) & vec4u(NIB_LO));
      return iq4xs_scale(base, ib) * xs.x * f32(idot16(lo, xa) + idot16(hi, xb));
    }
    case WT_Q4_K, WT_Q5_K: {
      // Sub-block j = b % 8 of super-block b / 8: the low (j even) or high nibbles of qs run j / 2
      // (8 words, columns in order); Q5_K's fifth bits are bit j of the bytes of qh (8 words).
      let q5 = WTYPE == WT_Q5_K;
      let j = b & 7u;
      let base = rw + (b >> 3u) * select(Q4_K_WORDS, Q5_K_WORDS, q5);
      let dm = unpack2x16float(w[base]);
      let sm = q4k_scale_min(w[base + 1u], w[base + 2u], w[base + 3u], j);
      let at = base + select(4u, 12u, q5) + 8u * (j >> 1u);
      let sh = vec4u(4u * (j & 1u));
      var qa = (ld4(at) >> sh) & vec4u(NIB_LO);
      var qb = (ld4(at + 4u) >> sh) & vec4u(NIB_LO);
      if (q5) {
        qa |= ((ld4(base + 4u) >> vec4u(j)) & vec4u(BYTES_1)) << vec4u(4u);
        qb |= ((ld4(base + 8u) >> vec4u(j)) & vec4u(BYTES_1)) << vec4u(4u);
      }
      return xs.x * (dm.x * sm.x * f32(idot16(qa, xa) + idot16(qb, xb)) - dm.y * sm.y * xs.y);
    }
    case WT_Q6_K: {
      // Quarter q4 of half h of super-block s: low 4 bits in ql words 16h + 8(q4 % 2).. (high
      // nibbles for q4 ≥ 2), top 2 at bit 2·q4 of qh words 32 + 8h..; value d·scale·(q − 32), a
      // scale per 16 columns.
      let s = b >> 3u;
      let t = b & 7u;
      let h = t >> 2u;
      let q4 = t & 3u;
      let nb256 = k >> 8u;
      let base = rw + s * Q6_K_WORDS;
      let ql = base + 16u * h + 8u * (q4 & 1u);
      let qh = base + 32u + 8u * h;
      let shl = vec4u(4u * (q4 >> 1u));
      let shh = vec4u(2u * q4);
      let qa = sub_bytes(((ld4(ql) >> shl) & vec4u(NIB_LO)) | (((ld4(qh) >> shh) & vec4u(0x03030303u)) << vec4u(4u)), 32u);
      let qb = sub_bytes(((ld4(ql + 4u) >> shl) & vec4u(NIB_LO)) | (((ld4(qh + 4u) >> shh) & vec4u(0x03030303u)) << vec4u(4u)), 32u);
      let d = dq_f16_at(rw + nb256 * (Q6_K_WORDS + 4u), s);
      let sc = rw + nb256 * Q6_K_WORDS + 4u * s;
      let sa = 8u * h + 2u * q4;
      return d * xs.x * (q6k_scale(sc, sa) * f32(idot16(qa, xa)) + q6k_scale(sc, sa + 1u) * f32(idot16(qb, xb)));
    }
    case WT_Q3_K: {
      // Quarter j of half h: 2 bits at 2j of qs words 8 + 8h.., the third at bit 4h + j of hmask
      // words 0..7; value d·(scale − 32)·(q − 4), a scale per 16 columns.
      let s = b >> 3u;
      let t = b & 7u;
      let h = t >> 2u;
      let j = t & 3u;
      let nb256 = k >> 8u;
      let base = rw + s * Q3_K_WORDS;
      let sq = vec4u(2u * j);
      let sm = vec4u(4u * h + j);
      let qa = sub_bytes(((ld4(base + 8u + 8u * h) >> sq) & vec4u(0x03030303u)) | (((ld4(base) >> sm) & vec4u(BYTES_1)) << vec4u(2u)), 4u);
      let qb = sub_bytes(((ld4(base + 12u + 8u * h) >> sq) & vec4u(0x03030303u)) | (((ld4(base + 4u) >> sm) & vec4u(BYTES_1)) << vec4u(2u)), 4u);
      let d = dq_f16_at(rw + nb256 * (Q3_K_WORDS + 3u), s);
      let sc = rw + nb256 * Q3_K_WORDS + 3u * s;
      let sa = 8u * h + 2u * j;
      return xs.x * (q3k_scale(sc, d, sa) * f32(idot16(qa, xa)) + q3k_scale(sc, d, sa + 1u) * f32(idot16(qb, xb)));
    }
    case WT_Q2_K: {
      // Blocks as they are: scales[16], qs[64], [d, dmin]. Quarter j of half h: 2 bits at 2j of qs
      // words 4 + 8h..; value d·sc·q − dmin·m per 16 columns, so the mins take the activation's
      // sums per 16 (a dot with ones).
      let s = b >> 3u;
      let t = b & 7u;
      let h = t >> 2u;
      let j = t & 3u;
      let base = rw + s * Q2_K_WORDS;
      let sq = vec4u(2u * j);
      let qa = (ldw4(base + 4u + 8u * h) >> sq) & vec4u(0x03030303u);
      let qb = (ldw4(base + 8u + 8u * h) >> sq) & vec4u(0x03030303u);
      let sa = 8u * h + 2u * j;
      let ma = q2k_scale_min(base, sa);
      let mb = q2k_scale_min(base, sa + 1u);
      let ones = vec4u(BYTES_1);
      return xs.x * (ma.x * f32(idot16(qa, xa)) - ma.y * f32(idot16(ones, xa)) + mb.x * f32(idot16(qb, xb)) - mb.y * f32(idot16(ones, xb)));
    }
    default: {
      // Float types never take this kernel (no gpu.intDot).
      return 0.0;
    }
  }
}
