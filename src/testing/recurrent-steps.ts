/**
 * The ragged steps the recurrent kernels' GPU tests run (delta-net.gpu.test.ts for Qwen3.5's
 * DeltaNet, mamba2.gpu.test.ts for Granite 4.0-H's Mamba-2): the same rows for every recurrent
 * mixer, as the engine's step runner lays them out, so each kernel meets the same prefill, decode
 * and verify-run cases.
 */
import { STORAGE, UNIFORM, uploadBuffer } from '../gpu/buffers';

/** Two steps on the same slots: rows of 5, 1 and 2 tokens, then a verify run (three rows on slot 2, checkpointed after rows 0 and 1) and slot 0. */
export const STEPS = [
  { lastToken: [4, 5, 7], rowSlot: [2, 0, 3] },
  { lastToken: [2, 3, 4, 6], rowSlot: [2, 2, 2, 0] },
];
/**
 * Rows of 11, 1 and 9 tokens, then 1, 13, 1 and 1: with chunks of 8 from 4 tokens, two chunks each
 * for the long ones; but the 13 start a verify run (a one-token row on their slot after them),
 * which the recurrence takes whole, checkpointed after the 13.
 */
export const CHUNK_STEPS = [
  { lastToken: [10, 11, 20], rowSlot: [2, 0, 3] },
  { lastToken: [0, 13, 14, 15], rowSlot: [3, 2, 2, 0] },
];
export const MAX_SEQS = 4;
/** State rows: the slots, then a checkpoint row per step row (from row MAX_SEQS on), as the engine's layer caches. */
export const ROWS = 2 * MAX_SEQS;

/** A step's row buffers as the kernels bind them: lastToken and rowSlot padded to MAX_SEQS, and the counts uniform. */
export function stepRows(device: GPUDevice, step: (typeof STEPS)[number]) {
  const meta = (xs: number[]) => uploadBuffer(device, Uint32Array.from([...xs, ...new Array(MAX_SEQS - xs.length).fill(0)]), STORAGE);
  const T = step.lastToken[step.lastToken.length - 1]! + 1;
  return { T, lastToken: meta(step.lastToken), rowSlot: meta(step.rowSlot), counts: uploadBuffer(device, Uint32Array.from([T, step.lastToken.length, 0, 0]), UNIFORM) };
}
