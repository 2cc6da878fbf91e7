/**
 * Speculative decoding's rollback of recurrent state on the GPU (shaders/state_rollback.wgsl): after
 * the sampler drew a step's rows, each verify run's slot takes the checkpoint of the row where its
 * proposals stopped being accepted (the recurrent kernels wrote one per row: verify_runs.wgsl), so
 * the state holds exactly the tokens the sequence keeps, with no readback in between.
 */
import runsLib from '../../shaders/lib/verify_runs.wgsl';
import source from '../../shaders/state_rollback.wgsl';
import { bindBuffers, packParams, UNIFORM, uploadBuffer, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { describeDispatch, rowGridOp, type Op, type OpContext, type OpLabel } from './op';

export const stateRollbackKernel: Kernel = { name: 'state_rollback', source: runsLib + source };

/** Workgroups along a slot's floats at most (each invocation strides over the rest): within any dispatch limit. */
const MAX_GROUPS = 256;

/**
 * The rows of a step as verify runs: [first, last] row of each run of consecutive rows on one slot
 * (a sequence verifying k proposals is k + 1 such rows), as shaders/lib/verify_runs.wgsl reads them.
 */
export function verifyRuns(rowSlot: readonly number[]): Array<[number, number]> {
  const runs: Array<[number, number]> = [];
  rowSlot.forEach((slot, r) => {
    const last = runs[runs.length - 1];
    if (last && rowSlot[last[1]] === slot) last[1] = r;
    else runs.push([r, r]);
  });
  return runs;
}

/**
 * TypeScript reference: `state` holds `floats` per slot, checkpoint row r at slot `ckpt + r`; for
 * each run of rows s..end, a = the proposals accepted (row s + i's one token equals the draw of row
 * s + i − 1, in order), and a < end − s puts row s + a's checkpoint in the run's slot. Returns a.
 */
export function stateRollbackRef(state: Float32Array, floats: number, ckpt: number, step: { tokens: readonly number[]; lastToken: readonly number[]; rowSlot: readonly number[] }, draws: readonly number[]): number[] {
  return verifyRuns(step.rowSlot).map(([s, end]) => {
    let a = 0;
    while (s + a < end && draws[s + a] === step.tokens[step.lastToken[s + a + 1]!]) a++;
    if (s + a < end) state.copyWithin(step.rowSlot[s]! * floats, (ckpt + s + a) * floats, (ckpt + s + a + 1) * floats);
    return a;
  });
}

export async function createStateRollbackOp(
  ctx: OpContext,
  args: {
    state: GPUBuffer; // f32 [slots + checkpoint rows, floats]
    floats: number;
    ckpt: number; // the first checkpoint row (the slot count)
    tokens: BufferRef; // step buffer, [maxTokens] u32
    lastToken: BufferRef; // step buffer, [maxSeqs] u32
    rowSlot: BufferRef; // step buffer, [maxSeqs] u32
    drawSlot: BufferRef; // step buffer, [maxSeqs] u32
    sampled: BufferRef; // the sampler's draws
    counts: BufferRef; // step buffer, uniform { T, S }
    wg?: number;
    label?: OpLabel;
  },
): Promise<Op> {
  const wg = args.wg ?? 64;
  const pipeline = await ctx.cache.get(stateRollbackKernel, { constants: { WG: wg } });
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', args.floats], ['u32', args.ckpt]])), UNIFORM, 'state_rollback params');
  // Per row: its run's draws and proposals; a rolled-back slot's floats read and written (f32).
  const group = describeDispatch(
    bindBuffers(ctx.device, pipeline, [args.state, args.tokens, args.lastToken, args.rowSlot, args.drawSlot, args.sampled, args.counts, params]),
    args.label,
    'state_rollback',
    (_, shape) => 4 * 4 * shape.seqs + 2 * args.floats * 4 * shape.seqs,
  );
  // `encode` takes the step's row count (a row of workgroups each).
  return rowGridOp(pipeline, group, params, Math.min(MAX_GROUPS, Math.ceil(args.floats / wg)));
}
