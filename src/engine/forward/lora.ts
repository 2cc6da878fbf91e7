/**
 * The LoRA updates of every adaptable matrix, made on the first adapter load over the pool
 * (../lora-pool.ts): its two pipelines and each matrix's bind groups; later loads only write the
 * pool. Each update adds its rows' adapter's scale·B·A·x onto the base matrix's output, before
 * anything reads it (q/k norms, RoPE, the GLU, the residual add), so the base weights are never
 * modified. The blocks say where (their hook points, Block.lora) and record the update right after
 * the matrix (StepPlan.lora.after).
 */
import { createBuffer, STORAGE } from '../../gpu/buffers';
import { createLoraOp } from '../../kernels/lora';
import type { Op, OpContext } from '../../kernels/op';
import { LORA_MATS, loraMat, type LoraMat, type LoraPool } from '../lora-pool';
import type { StepBuffers } from '../step';
import type { LoraHooks, LoraPoints } from './block';

export class LoraUpdates implements LoraHooks {
  private constructor(
    readonly pool: LoraPool,
    /** [layer][matrix in LORA_MATS order]; none for a matrix no block offers (the experts). */
    private readonly ops: (Op | undefined)[][],
    private readonly h: GPUBuffer,
  ) {}

  /** `points`: per layer, the hook points of its blocks. */
  static async create(ctx: OpContext, pool: LoraPool, step: StepBuffers, points: readonly LoraPoints[], maxTokens: number): Promise<LoraUpdates> {
    const maxRank = pool.limits.maxRank;
    // Each token's A·x, [maxTokens, maxRank] f32, shared by every update (they run one after another).
    const h = createBuffer(ctx.device, maxTokens * maxRank * 4, STORAGE, 'lora h');
    const { tokenSeq, seqAdapter } = step;
    const ops = await Promise.all(
      points.map((targets, l) =>
        Promise.all(
          LORA_MATS.map((t) => {
            const io = targets[t];
            return io && createLoraOp(ctx, { ...io, label: { role: t, layer: l }, mat: loraMat(l, t), numMats: pool.numMats, maxRank, weights: pool.weights, entries: pool.entries, tokenSeq, seqAdapter, h });
          }),
        ),
      ),
    );
    return new LoraUpdates(pool, ops, h);
  }

  adapts(layer: number, target: LoraMat): boolean {
    return this.pool.adapts(loraMat(layer, target));
  }

  after(pass: GPUComputePassEncoder, tokens: number, layer: number, target: LoraMat): void {
    if (this.adapts(layer, target)) this.ops[layer]![LORA_MATS.indexOf(target)]?.encode(pass, tokens);
  }

  /** Frees the updates' ops, the scratch and the pool. */
  destroy(): void {
    for (const op of this.ops.flat()) op?.destroy();
    this.h.destroy();
    this.pool.destroy();
  }
}
