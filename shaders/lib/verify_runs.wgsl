// Speculative decoding's verify runs, shared by the recurrent kernels (short_conv, causal_conv_silu,
// delta_rule) and state_rollback (src/kernels/state-rollback.ts). A sequence that verifies k
// proposals is k + 1 consecutive rows of the step on one slot: its tokens, then one row per
// proposal. A recurrent kernel walks such a run in one invocation, row after row over the slot's
// state (rows on one slot cannot run side by side: each continues the state the row before left),
// and after each row but the last writes the state into that row's checkpoint, slot `ckpt + row`
// of the same buffer, from which state_rollback takes the state at the first rejected proposal.
// The including shader declares rowSlot (storage, [maxSeqs] u32) and counts (uniform: S, the rows).

// Whether row s continues the run of the row before it (its tokens are walked there).
fn run_continues(s: u32) -> bool {
  return s > 0u && rowSlot[s - 1u] == rowSlot[s];
}

// The last row of the run that row s starts (s itself for a row alone on its slot).
fn run_end(s: u32) -> u32 {
  var e = s;
  loop {
    if (e + 1u >= counts.S || rowSlot[e + 1u] != rowSlot[s]) { break; }
    e++;
  }
  return e;
}
