// dequant.wgsl's layouts read 16 bytes at a time, for the decode matvec (issue #14 part 3, PERF.md
// §3 #4): group g of a row is its chunks 4g..4g+3 (dq_chunk's numbering and columns), whose quant
// words are whole aligned vec4<u32>s, so a thread dequantises 32 weights per one or two 16-byte
// loads and neighbouring threads (consecutive g) read neighbouring vectors. Scales and headers
// stay word loads. Concatenated after dequant.wgsl in front of a kernel that declares
//   @group(0) @binding(?) var<storage, read> w4: array<vec4<u32>>;
// a second binding of w's buffer. Valid only where every row starts on a vec4 (row words % 4 == 0)
// and for the types of dq_group's cases (DTypeInfo.gpu.wide in src/formats/dtypes.ts), whose
// 4 consecutive chunks from a multiple of 4 are 4 consecutive, vec4-aligned quant words.

fn dq_group(rw: u32, k: u32, g: u32) -> array<Chunk, 4> {
  var out: array<Chunk, 4>;
  let r4 = rw >> 2u;
  switch (WTYPE) {
    case WT_Q8_0: {
      // Group g is block g: its 8 quant words, chunk j being words 2j and 2j + 1.
      let d = dq_f16_at(rw + (k >> 5u) * Q8_0_WORDS, g);
      let lo = w4[r4 + 2u * g];
      let hi = w4[r4 + 2u * g + 1u];
      let q = array<u32, 8>(lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);
      for (var j = 0u; j < 4u; j++) {
        let pa = 32u * g + 8u * j;
        out[j] = Chunk(d * dq_i8x4(q[2u * j]), d * dq_i8x4(q[2u * j + 1u]), pa, pa + 4u);
      }
    }
    case WT_Q4_0, WT_Q5_0, WT_IQ4_NL, WT_MXFP4: {
      // Group g is block g: its 4 quant words, chunk j being word j (elements j.., j + 16..).
      let nb = k >> 5u;
      let q = w4[r4 + g];
      var d: f32;
      var qh = 0u;
      switch (WTYPE) {
        case WT_Q4_0: { d = dq_f16_at(rw + nb * Q4_0_WORDS, g); }
        case WT_Q5_0: {
          d = dq_f16_at(rw + nb * (Q5_0_WORDS + 1u), g);
          qh = w[rw + nb * Q5_0_WORDS + g];
        }
        case WT_MXFP4: { d = mxfp4_scale(dq_byte(rw + nb * MXFP4_WORDS, g)); }
        default: { d = dq_f16_at(rw + nb * IQ4_NL_WORDS, g); }
      }
      for (var j = 0u; j < 4u; j++) {
        let pa = 32u * g + 4u * j;
        var a: vec4f;
        var b: vec4f;
        switch (WTYPE) {
          case WT_Q4_0: {
            a = vec4f(dq_nib4(q[j], 0u)) - 8.0;
            b = vec4f(dq_nib4(q[j], 4u)) - 8.0;
          }
          case WT_Q5_0: {
            a = dq_q5(q[j], qh, 4u * j) - 16.0;
            b = dq_q5(q[j], qh, 4u * j + 16u) - 16.0;
          }
          case WT_MXFP4: {
            a = dq_lut_nib4(MXFP4_LUT, q[j], 0u);
            b = dq_lut_nib4(MXFP4_LUT, q[j], 4u);
          }
          default: {
            a = dq_lut_nib4(IQ4NL_LUT, q[j], 0u);
            b = dq_lut_nib4(IQ4NL_LUT, q[j], 4u);
          }
        }
        out[j] = Chunk(d * a, d * b, pa, pa + 16u);
      }
    }
    case WT_Q4_K, WT_Q5_K: {
      // Chunks 4g.. are qs words v.. (v = 4(g % 8)) of super-block g / 8: one 32-byte run i, so
      // one pair of sub-blocks (2i, 2i + 1) and one (scale, min) each. Q5_K: qh words v % 8.. .
      let q5 = WTYPE == WT_Q5_K;
      let s = g >> 3u;
      let gv = g & 7u;
      let i = gv >> 1u;
      let base = rw + s * select(Q4_K_WORDS, Q5_K_WORDS, q5);
      let h = q4k_header(base, i);
      let q = w4[(base >> 2u) + select(1u, 3u, q5) + gv];
      var qh = vec4u(0u);
      if (q5) { qh = w4[(base >> 2u) + 1u + (gv & 1u)]; }
      for (var j = 0u; j < 4u; j++) {
        out[j] = q4k_chunk(h, q[j], qh[j], i, q5, 256u * s + 64u * i + 4u * (4u * (gv & 1u) + j));
      }
    }
    case WT_Q3_K: {
      // Chunks 4g.. are qs words v.. (v = 4(g % 4)) at hk (g / 4) % 2 of super-block g / 8, with
      // hmask words m.. (m = 4(g % 2)); all four share their sub-blocks (sa, sa + 2).
      let s = g >> 3u;
      let nb = k >> 8u;
      let v0 = 4u * (g & 3u);
      let hk = (g >> 2u) & 1u;
      let h = v0 >> 3u;
      let m0 = v0 & 7u;
      let sa = 8u * h + 4u * hk + (m0 >> 2u);
      let base = rw + s * Q3_K_WORDS;
      let q = w4[(base >> 2u) + 2u + (g & 3u)];
      let hm = w4[(base >> 2u) + (g & 1u)];
      let sc = rw + nb * Q3_K_WORDS + 3u * s;
      let d = dq_f16_at(rw + nb * (Q3_K_WORDS + 3u), s);
      let da = q3k_scale(sc, d, sa);
      let db = q3k_scale(sc, d, sa + 2u);
      for (var j = 0u; j < 4u; j++) {
        let qa = dq_2bit4(q[j], 4u * hk) | (dq_1bit4(hm[j], 4u * h + 2u * hk) << vec4u(2u));
        let qb = dq_2bit4(q[j], 4u * hk + 2u) | (dq_1bit4(hm[j], 4u * h + 2u * hk + 1u) << vec4u(2u));
        let pa = 256u * s + 128u * h + 64u * hk + 4u * (m0 + j);
        out[j] = Chunk(da * (vec4f(qa) - 4.0), db * (vec4f(qb) - 4.0), pa, pa + 32u);
      }
    }
    case WT_Q6_K: {
      // Chunks 4g.. are ql words v.. (v = 4(g % 8)) of super-block g / 8, with qh words
      // 32 + 8h + m.. (m = 4(g % 2)); all four share their scales (sa, sa + 4).
      let s = g >> 3u;
      let nb = k >> 8u;
      let v0 = 4u * (g & 7u);
      let h = v0 >> 4u;
      let quarter = (v0 >> 3u) & 1u;
      let m0 = v0 & 7u;
      let base = rw + s * Q6_K_WORDS;
      let ql = w4[(base >> 2u) + (g & 7u)];
      let qh = w4[(base >> 2u) + 8u + 2u * h + (g & 1u)];
      let d = dq_f16_at(rw + nb * (Q6_K_WORDS + 4u), s);
      let sc = rw + nb * Q6_K_WORDS + 4u * s;
      let sa = 8u * h + 2u * quarter + (m0 >> 2u);
      let da = d * q6k_scale(sc, sa);
      let db = d * q6k_scale(sc, sa + 4u);
      for (var j = 0u; j < 4u; j++) {
        let qa = dq_nib4(ql[j], 0u) | (dq_2bit4(qh[j], 2u * quarter) << vec4u(4u));
        let qb = dq_nib4(ql[j], 4u) | (dq_2bit4(qh[j], 2u * quarter + 4u) << vec4u(4u));
        let pa = 256u * s + 128u * h + 32u * quarter + 4u * (m0 + j);
        out[j] = Chunk(da * (vec4f(qa) - 32.0), db * (vec4f(qb) - 32.0), pa, pa + 64u);
      }
    }
    default: {
      // Types without a 16-byte form (never chosen with WIDE: src/kernels/matmul.ts): word loads.
      for (var j = 0u; j < 4u; j++) { out[j] = dq_chunk(rw, k, 4u * g + j); }
    }
  }
  return out;
}
