/** Comparisons the engine tests share. */

/** Largest minus second-largest value: below a test's tolerance, greedy picks are a near-tie. */
export function top2Margin(logits: ArrayLike<number>): number {
  let a = -Infinity;
  let b = -Infinity;
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i]!;
    if (v > a) [a, b] = [v, a];
    else if (v > b) b = v;
  }
  return a - b;
}

/** Largest |a - b| over every step's logits. */
export function maxAbsDiffAll(a: readonly Float32Array[], b: readonly Float32Array[]): number {
  let d = 0;
  a.forEach((row, i) => row.forEach((v, j) => (d = Math.max(d, Math.abs(v - b[i]![j]!)))));
  return d;
}
