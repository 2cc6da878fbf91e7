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

/**
 * max over steps of rms(got − want) / std(want): a logit error relative to the logits' spread. RMS
 * rather than max so that one unlucky logit does not decide; uncorrelated logits give about 1.4.
 */
export function relativeError(got: readonly Float32Array[], want: readonly Float32Array[]): number {
  let worst = 0;
  want.forEach((w, t) => {
    const mean = w.reduce((s, v) => s + v, 0) / w.length;
    const std = Math.sqrt(w.reduce((s, v) => s + (v - mean) ** 2, 0) / w.length);
    let sq = 0;
    for (let i = 0; i < w.length; i++) sq += (got[t]![i]! - w[i]!) ** 2;
    worst = Math.max(worst, Math.sqrt(sq / w.length) / std);
  });
  return worst;
}
