import expandSource from '../../shaders/lora_expand.wgsl';
import shrinkSource from '../../shaders/lora_shrink.wgsl';
import { bindBuffers, packParams, UNIFORM, uploadBuffer, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { describeDispatch, elemBytes, type Op, type OpContext, type OpLabel } from './op';

export const loraShrinkKernel: Kernel = { name: 'lora_shrink', source: shrinkSource };
export const loraExpandKernel: Kernel = { name: 'lora_expand', source: expandSource };

/** Workgroup sizes both kernels are specialised and tested at. */
export const LORA_WG = [32, 64, 128] as const;

/** A step row with no adapter (seqAdapter's value). */
export const NO_ADAPTER = 0xffffffff;

/** Words per entry of the pool's table: A's offset, B's offset (floats into the pool), rank, scale's f32 bits. */
export const LORA_ENTRY_WORDS = 4;

/**
 * Where one adapted matrix's input and output live, and which column of the entry table is its:
 * x is [T, xStride] from xOffset (k features read), y is [T, yStride] from yOffset (n written).
 */
export interface LoraLayout {
  k: number;
  n: number;
  xStride?: number; // default k
  xOffset?: number; // default 0
  yStride?: number; // default n
  yOffset?: number; // default 0
  /** The matrix's column of the entry table: layer · LORA_MATS.length + matrix index (engine/lora-pool.ts). */
  mat: number;
  /** Columns of the entry table (entries per adapter). */
  numMats: number;
  /** The pool's largest rank: h's row length. */
  maxRank: number;
}

/** The pool as the kernels see it: f32 weights, and the [adapter · numMats + mat] entry table. */
export interface LoraPoolView {
  weights: Float32Array;
  entries: Uint32Array;
}

/**
 * TypeScript reference: y (copied) + scale · B · (A · x) for every token whose step row has an
 * adapter with a rank on `mat`, the product accumulated as the kernels do (A·x first, in f32).
 */
export function loraRef(
  x: Float32Array,
  y: Float32Array,
  tokens: number,
  layout: LoraLayout,
  pool: LoraPoolView,
  tokenSeq: ArrayLike<number>,
  seqAdapter: ArrayLike<number>,
): Float32Array {
  const { k, n, mat, numMats } = layout;
  const [xs, xo, ys, yo] = [layout.xStride ?? k, layout.xOffset ?? 0, layout.yStride ?? n, layout.yOffset ?? 0];
  const out = y.slice();
  const f32 = new Float32Array(pool.entries.buffer, pool.entries.byteOffset, pool.entries.length);
  for (let t = 0; t < tokens; t++) {
    const adapter = seqAdapter[tokenSeq[t]!]!;
    if (adapter === NO_ADAPTER) continue;
    const e = (adapter * numMats + mat) * LORA_ENTRY_WORDS;
    const [aOff, bOff, rank] = [pool.entries[e]!, pool.entries[e + 1]!, pool.entries[e + 2]!];
    const scale = f32[e + 3]!;
    if (rank === 0) continue;
    const h = new Float64Array(rank);
    for (let r = 0; r < rank; r++) for (let i = 0; i < k; i++) h[r] += pool.weights[aOff + r * k + i]! * x[xo + t * xs + i]!;
    for (let o = 0; o < n; o++) {
      let s = 0;
      for (let r = 0; r < rank; r++) s += pool.weights[bOff + o * rank + r]! * h[r]!;
      out[yo + t * ys + o] += scale * s;
    }
  }
  return out;
}

/**
 * The low-rank update of one base matrix for a ragged batch: after the base matrix wrote y, adds
 * each token's own adapter's scale · B · A · x (two dispatches: shrink into h, expand onto y).
 * `h` is f32 scratch of [maxTokens, maxRank], shared by every matrix (each op's shrink and expand
 * run back to back). `seqAdapter` holds each step row's adapter, or NO_ADAPTER.
 */
export async function createLoraOp(
  ctx: OpContext,
  args: LoraLayout & {
    x: BufferRef;
    y: BufferRef;
    weights: BufferRef;
    entries: BufferRef;
    tokenSeq: BufferRef;
    seqAdapter: BufferRef;
    h: BufferRef;
    /** x (y) is the residual stream, f32 at every precision. */
    xF32?: boolean;
    yF32?: boolean;
    wg?: number;
    /** The adapted matrix (its role is suffixed `.lora_shrink` / `.lora_expand` for the bench). */
    label?: OpLabel;
  },
): Promise<Op> {
  const wg = args.wg ?? 64;
  const { k, n, mat, numMats, maxRank } = args;
  const spec = { precision: ctx.precision, constants: { WG: wg } };
  const [shrink, expand] = await Promise.all([
    ctx.cache.get(loraShrinkKernel, { ...spec, f32: args.xF32 ? ['x_t'] : [] }),
    ctx.cache.get(loraExpandKernel, { ...spec, f32: args.yF32 ? ['y_t'] : [] }),
  ]);
  const shrinkParams = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', k], ['u32', args.xStride ?? k], ['u32', args.xOffset ?? 0], ['u32', mat], ['u32', numMats], ['u32', maxRank]])), UNIFORM, 'lora shrink params');
  const expandParams = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', n], ['u32', args.yStride ?? n], ['u32', args.yOffset ?? 0], ['u32', mat], ['u32', numMats], ['u32', maxRank]])), UNIFORM, 'lora expand params');
  // Bytes at the pool's largest rank (each row's adapter, and so its rank, is only known on the GPU).
  const role = (r: string): OpLabel => ({ ...args.label, role: `${args.label?.role ?? 'lora'}.${r}` });
  const shrinkGroup = describeDispatch(bindBuffers(ctx.device, shrink, [args.x, args.weights, args.entries, args.tokenSeq, args.seqAdapter, args.h, shrinkParams]), role('lora_shrink'), 'lora_shrink', (rows) => rows * (k * elemBytes(ctx.precision, args.xF32) + maxRank * (k + 1) * 4));
  const expandGroup = describeDispatch(bindBuffers(ctx.device, expand, [args.weights, args.entries, args.tokenSeq, args.seqAdapter, args.h, args.y, expandParams]), role('lora_expand'), 'lora_expand', (rows) => rows * (maxRank * (n + 1) * 4 + 2 * n * elemBytes(ctx.precision, args.yF32)));
  const expandX = Math.ceil(n / wg);
  return {
    destroy: () => {
      shrinkParams.destroy();
      expandParams.destroy();
    },
    encode(pass, tokens) {
      pass.setPipeline(shrink);
      pass.setBindGroup(0, shrinkGroup);
      pass.dispatchWorkgroups(maxRank, tokens);
      pass.setPipeline(expand);
      pass.setBindGroup(0, expandGroup);
      pass.dispatchWorkgroups(expandX, tokens);
    },
  };
}
