// A ragged step's rows, as the recurrent kernels read them (delta_rule, delta_chunk*, mamba2_*):
// the step's counts and a row's span. Each kernel declares `lastToken` and `counts` itself.

struct Counts {
  T: u32,
  S: u32,
}

// Row s's first and last token in the step.
fn step_row(s: u32) -> vec2u {
  var first = 0u;
  if (s > 0u) { first = lastToken[s - 1u] + 1u; }
  return vec2u(first, lastToken[s]);
}
