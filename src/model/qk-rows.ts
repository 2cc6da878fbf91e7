/**
 * The two row orders of q/k projections. HF checkpoints keep each head's rows in rotate-half
 * order (RoPE pairs row i with row i + headDim/2); llama.cpp's converter permutes the rows of
 * `llama` files into interleaved pairs (2i, 2i+1), and the model then runs interleaved RoPE.
 * Base weights and LoRA B matrices (whose rows are the projection's rows) move the same way.
 */

/**
 * HF's rotate-half order to interleaved pairs: rows viewed as (n_head, 2, head_dim/2) become
 * (n_head, head_dim/2, 2). Works on weights [rows, cols] and biases [rows] (cols = 1).
 */
export function permuteQK(x: Float32Array, rows: number, nHead: number): Float32Array {
  return reorderRows(x, rows, nHead, false);
}

/** The inverse of permuteQK: interleaved pairs back to HF's rotate-half layout. */
export function unpermuteQK(x: Float32Array, rows: number, nHead: number): Float32Array {
  return reorderRows(x, rows, nHead, true);
}

function reorderRows(x: Float32Array, rows: number, nHead: number, inverse: boolean): Float32Array {
  if (rows % (2 * nHead) !== 0) throw new RangeError(`cannot permute ${rows} rows into ${nHead} heads of pairs`);
  const cols = x.length / rows;
  const half = rows / nHead / 2;
  const out = new Float32Array(x.length);
  for (let h = 0; h < nHead; h++)
    for (let i = 0; i < half; i++)
      for (let j = 0; j < 2; j++) {
        const interleaved = h * 2 * half + i * 2 + j; // (h, i, j)
        const halves = h * 2 * half + j * half + i; // (h, j, i)
        const [dst, src] = inverse ? [halves, interleaved] : [interleaved, halves];
        out.set(x.subarray(src * cols, (src + 1) * cols), dst * cols);
      }
  return out;
}
