/**
 * state_rollback against its reference: one step of verify runs (a run that took one of two
 * proposals, a row alone on its slot, a run that took its proposal, a run that took none), every
 * slot and checkpoint row holding distinct values: each run's slot takes the checkpoint of the row
 * where its proposals stopped being accepted, or keeps its state when all were; nothing else moves.
 */
import { describe, expect, it } from 'vitest';
import { readBuffer, STORAGE, UNIFORM, uploadBuffer } from '../gpu/buffers';
import { testGPU } from '../testing/gpu';
import { opContext, random } from '../testing/kernel-helpers';
import { createStateRollbackOp, stateRollbackRef, verifyRuns } from './state-rollback';

const MAX_SEQS = 8;
// 300 floats a slot: more than one workgroup of 64 and not a multiple of it.
const FLOATS = 300;

describe('state_rollback kernel', () => {
  it('puts the checkpoint at the first rejected proposal in each run, as the reference', async () => {
    const { device } = await testGPU();
    // Rows: slot 5 (two tokens, then proposals 40, 41), slot 1, slot 3 (proposal 60), slot 0 (proposal 70).
    const step = { tokens: [7, 8, 40, 41, 9, 10, 60, 11, 70], lastToken: [1, 2, 3, 4, 5, 6, 7, 8], rowSlot: [5, 5, 5, 1, 3, 3, 0, 0] };
    expect(verifyRuns(step.rowSlot)).toEqual([[0, 2], [3, 3], [4, 5], [6, 7]]);
    // Each row's draw: row 0 drew 40 (proposal 1 taken), row 1 drew 99 (proposal 2 rejected); row 4 drew 60; row 6 drew 71.
    const draws = [40, 99, 5, 33, 60, 12, 71, 13];
    const drawSlot = step.rowSlot.map((slot, r) => (r > 0 && step.rowSlot[r - 1] === slot ? MAX_SEQS + r : slot));
    const sampled = new Uint32Array(2 * MAX_SEQS);
    draws.forEach((d, r) => (sampled[drawSlot[r]!] = d));
    const initial = random(2 * MAX_SEQS * FLOATS, 3, 1);
    const state = uploadBuffer(device, initial, STORAGE);
    const u32 = (xs: readonly number[]) => uploadBuffer(device, Uint32Array.from(xs), STORAGE);
    const op = await createStateRollbackOp(opContext(device, 'f32'), {
      state,
      floats: FLOATS,
      ckpt: MAX_SEQS,
      tokens: u32(step.tokens),
      lastToken: u32(step.lastToken),
      rowSlot: u32(step.rowSlot),
      drawSlot: u32(drawSlot),
      sampled: uploadBuffer(device, sampled, STORAGE),
      counts: uploadBuffer(device, Uint32Array.from([step.tokens.length, step.rowSlot.length, 0, 0]), UNIFORM),
    });
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    op.encode(pass, step.rowSlot.length);
    pass.end();
    device.queue.submit([encoder.finish()]);
    const got = new Float32Array(await readBuffer(device, state, initial.length * 4));
    const want = initial.slice();
    expect(stateRollbackRef(want, FLOATS, MAX_SEQS, step, draws)).toEqual([1, 0, 1, 0]);
    // The reference moved what it should: slot 5 holds row 1's checkpoint, slot 0 row 6's; slot 3 (all taken) and slot 1 kept theirs.
    const slot = (a: Float32Array, i: number) => Array.from(a.subarray(i * FLOATS, (i + 1) * FLOATS));
    expect(slot(want, 5)).toEqual(slot(initial, MAX_SEQS + 1));
    expect(slot(want, 0)).toEqual(slot(initial, MAX_SEQS + 6));
    expect(slot(want, 3)).toEqual(slot(initial, 3));
    expect(slot(want, 1)).toEqual(slot(initial, 1));
    expect(Array.from(got)).toEqual(Array.from(want));
    op.destroy();
  });
});
