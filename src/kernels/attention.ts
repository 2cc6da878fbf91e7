import combineSource from '../../shaders/attn_combine.wgsl';
import decodeBody from '../../shaders/attn_decode.wgsl';
import prefillBody from '../../shaders/attn_prefill.wgsl';
import attnKvLib from '../../shaders/lib/attn_kv.wgsl';
import { createBuffer, packParams, STORAGE, UNIFORM, uploadBuffer, bindBuffers, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { actBytes, describeDispatch, type OpContext, type OpLabel, type StepShape } from './op';

export { attentionRef, type AttentionRefArgs } from './attention-ref';

// Both passes over the paged cache share their Params, window and K/V tile loads (the lib).
export const attnDecodeKernel: Kernel = { name: 'attn_decode', source: attnKvLib + decodeBody };
export const attnCombineKernel: Kernel = { name: 'attn_combine', source: combineSource };
export const attnPrefillKernel: Kernel = { name: 'attn_prefill', source: attnKvLib + prefillBody };

/** `Params.window` when there is no sliding window: every causal key is within it. */
const NO_WINDOW = 0xffffffff;

/** Query tiles × key tiles the prefill kernel is tested at (the op's default is 16 × 16). */
export const PREFILL_TILES = [
  { tq: 4, tk: 8 },
  { tq: 16, tk: 16 },
] as const;
/** Keys per workgroup-memory tile of the decode kernel tested (the default is 16). */
export const DECODE_KEY_TILES = [8, 16] as const;

/**
 * `decode`: split-K over the context (attn_decode + attn_combine), best for few query tokens.
 * `prefill`: query-tiled (attn_prefill), best for long runs of tokens.
 * Both are exact for any batch.
 */
export type AttentionMode = 'decode' | 'prefill';

export interface AttentionOp {
  /** Scratch for the decode path's splits, in bytes (0 when there is none). */
  readonly scratchBytes: number;
  readonly nSplits: number;
  encode(pass: GPUComputePassEncoder, tokens: number, mode: AttentionMode): void;
  /** Frees the split scratch and the params. */
  destroy(): void;
}

export interface AttentionArgs {
  q: BufferRef; // [maxTokens, nHeads, headDim] act, after RoPE
  kCache: GPUBuffer; // one layer: [numPages, pageSize, nKv, headDim] act, this step's keys already written
  vCache: GPUBuffer;
  out: GPUBuffer; // [maxTokens, nHeads, headDim] act
  // Step buffers (src/engine/step.ts).
  positions: BufferRef;
  tokenSeq: BufferRef;
  blockTable: BufferRef;
  lastToken: BufferRef;
  /** Uniform `{ T, S, pad, pad }`. */
  counts: BufferRef;
  nHeads: number;
  nKv: number;
  headDim: number;
  pageSize: number;
  maxTokens: number;
  maxSeqs: number;
  maxPagesPerSeq: number;
  /**
   * Sliding window of this layer: a token at position p sees keys p - window < j <= p only, and
   * pages wholly before that are not read. null/absent: full causal attention.
   */
  window?: number | null;
  /** What q·k is multiplied by. Default 1/sqrt(headDim). */
  scale?: number;
  /** Scores s (scaled) become tanh(s / softcap) * softcap before the softmax (Gemma 2). null/absent: none. */
  softcap?: number | null;
  decode?: {
    /** KV pages per split. Default: 256 keys' worth, more if that would make over 32 splits. */
    splitPages?: number;
    /** Most tokens a decode-mode step may have; sizes the split scratch. Default: maxSeqs. */
    maxTokens?: number;
    /** Keys per workgroup-memory tile. Default 16. */
    keyTile?: number;
    wg?: number;
  };
  prefill?: { tq?: number; tk?: number; wg?: number };
  label?: OpLabel;
}

/** Workgroup memory of the prefill kernel at a tile shape, in bytes (see attn_prefill.wgsl). */
export function prefillWorkgroupBytes(headDim: number, tq: number, tk: number): number {
  const d4 = headDim / 4;
  return 16 * (tq * d4 + tk * (d4 + 1)) + 4 * tq * tk + 16 * tq;
}

/** Split count and keys per split of the decode path. */
export function decodeSplits(maxPagesPerSeq: number, pageSize: number, splitPages?: number): { nSplits: number; splitKeys: number } {
  const pages = splitPages ?? Math.max(Math.ceil(256 / pageSize), Math.ceil(maxPagesPerSeq / 32));
  return { nSplits: Math.ceil(maxPagesPerSeq / pages), splitKeys: pages * pageSize };
}

/** The shared Params of attn_decode and attn_prefill (shaders/lib/attn_kv.wgsl), field by field. */
function kvParams(a: AttentionArgs, split: { nSplits: number; splitKeys: number }): ArrayBuffer {
  return packParams([
    ['u32', a.nHeads],
    ['u32', a.nKv],
    ['u32', a.pageSize],
    ['u32', a.maxPagesPerSeq],
    ['u32', a.window ?? NO_WINDOW],
    ['u32', split.nSplits],
    ['u32', split.splitKeys],
    ['f32', a.scale ?? 1 / Math.sqrt(a.headDim)],
    ['f32', a.softcap ?? 0],
  ]);
}

/** Prefill workgroups along x that cover any batch of `tokens` (see attn_prefill.wgsl). */
export function prefillTiles(tokens: number, maxSeqs: number, tq: number): number {
  return Math.ceil(tokens / tq) + Math.min(tokens, maxSeqs) - 1;
}

/**
 * Causal (optionally sliding-window) paged attention of this step's queries. Creates both
 * paths' pipelines, bind groups and the split scratch once; `encode` only dispatches.
 */
export async function createAttentionOp(ctx: OpContext, a: AttentionArgs): Promise<AttentionOp> {
  const { device } = ctx;
  const { nHeads, nKv, headDim, pageSize, maxPagesPerSeq } = a;
  if (headDim % 4 !== 0) throw new RangeError(`attention reads vec4s: headDim must be a multiple of 4, got ${headDim}`);
  if (nHeads % nKv !== 0) throw new RangeError(`nHeads (${nHeads}) must be a multiple of nKv (${nKv})`);
  if (a.window != null && !(Number.isInteger(a.window) && a.window > 0 && a.window < NO_WINDOW)) {
    throw new RangeError(`attention window must be a positive integer key count, got ${a.window}`);
  }
  if (a.softcap != null && !(a.softcap > 0)) throw new RangeError(`attention softcap must be positive, got ${a.softcap}`);
  const d4 = headDim / 4;
  const limit = device.limits.maxComputeWorkgroupStorageSize;

  // Decode: split-K, then combine.
  const decodeWg = a.decode?.wg ?? Math.max(64, d4);
  if (decodeWg < d4) throw new RangeError(`attn_decode needs a workgroup of at least headDim/4 = ${d4} threads, got ${decodeWg}`);
  const keyTile = a.decode?.keyTile ?? 16;
  const { nSplits, splitKeys } = decodeSplits(maxPagesPerSeq, pageSize, a.decode?.splitPages);
  const decodeTokens = Math.min(a.decode?.maxTokens ?? a.maxSeqs, a.maxTokens);
  const partialO = createBuffer(device, decodeTokens * nHeads * nSplits * headDim * 4, STORAGE, 'attn partial out');
  const partialML = createBuffer(device, decodeTokens * nHeads * nSplits * 8, STORAGE, 'attn partial max/sum');
  const combineWg = Math.min(64, Math.ceil(d4 / 32) * 32);
  const [decodePipeline, combinePipeline] = await Promise.all([
    ctx.cache.get(attnDecodeKernel, { precision: ctx.precision, constants: { WG: decodeWg, HEAD_DIM: headDim, KB: keyTile } }),
    ctx.cache.get(attnCombineKernel, { precision: ctx.precision, constants: { WG: combineWg, NSPLITS: nSplits } }),
  ]);
  const decodeParams = uploadBuffer(device, new Uint8Array(kvParams(a, { nSplits, splitKeys })), UNIFORM, 'attn_decode params');
  const combineParams = uploadBuffer(device, new Uint8Array(packParams([['u32', nHeads], ['u32', d4]])), UNIFORM, 'attn_combine params');
  // Bytes: q read and the output written per token, and each sequence's K and V read once (at
  // most a window of keys): the least a step must move. Decode adds its split partials (f32 out,
  // max and sum per split), written by attn_decode and read by attn_combine.
  const act = actBytes(ctx.precision);
  const headRow = nHeads * headDim * act;
  const kvBytes = (s: StepShape) => s.keys.reduce((n, keys) => n + Math.min(keys, a.window ?? keys), 0) * 2 * nKv * headDim * act;
  const partialBytes = (rows: number) => rows * nHeads * nSplits * (headDim * 4 + 8);
  const label = a.label ?? { role: 'attention' };
  const decodeGroup = describeDispatch(
    bindBuffers(device, decodePipeline, [a.q, a.kCache, a.vCache, a.positions, a.tokenSeq, a.blockTable, partialO, partialML, decodeParams]),
    label,
    'attention',
    (rows, s) => rows * headRow + kvBytes(s) + partialBytes(rows),
  );
  const combineGroup = describeDispatch(
    bindBuffers(device, combinePipeline, [partialO, partialML, a.out, combineParams]),
    label,
    'attention',
    (rows) => partialBytes(rows) + rows * headRow,
  );

  // Prefill: query tiles; the tile shrinks until its workgroup memory fits the device.
  let tq = a.prefill?.tq ?? 16;
  const tk = a.prefill?.tk ?? 16;
  while (!a.prefill?.tq && tq > 1 && prefillWorkgroupBytes(headDim, tq, tk) > limit) tq /= 2;
  if (prefillWorkgroupBytes(headDim, tq, tk) > limit) {
    throw new RangeError(`attn_prefill tile ${tq}×${tk} at headDim ${headDim} needs ${prefillWorkgroupBytes(headDim, tq, tk)} B of workgroup memory; the device has ${limit}`);
  }
  // Each thread owns up to 8 output vec4s of the tile (MAX_OUTS): wide heads (256) get a wider
  // workgroup; any head dim works, the last round of outputs partial when WG does not divide it.
  const maxWg = device.limits.maxComputeInvocationsPerWorkgroup;
  const prefillWg = a.prefill?.wg ?? Math.min(maxWg, Math.max(Math.min(64, tq * d4), Math.ceil((tq * d4) / 8 / 32) * 32));
  const outs = Math.ceil((tq * d4) / prefillWg);
  if (outs > 8 || prefillWg > maxWg) {
    throw new RangeError(`attn_prefill: a ${tq}-token tile at headDim ${headDim} needs ${outs} outputs per thread of ${prefillWg} (at most 8 of at most ${maxWg})`);
  }
  const prefillPipeline = await ctx.cache.get(attnPrefillKernel, {
    precision: ctx.precision,
    constants: { WG: prefillWg, HEAD_DIM: headDim, TQ: tq, TK: tk },
  });
  // The split fields are attn_decode's; attn_prefill ignores them.
  const prefillParams = uploadBuffer(device, new Uint8Array(kvParams(a, { nSplits: 0, splitKeys: 0 })), UNIFORM, 'attn_prefill params');
  const prefillGroup = describeDispatch(
    bindBuffers(device, prefillPipeline, [a.q, a.kCache, a.vCache, a.positions, a.blockTable, a.lastToken, a.counts, a.out, prefillParams]),
    label,
    'attention',
    (rows, s) => 2 * rows * headRow + kvBytes(s),
  );

  return {
    destroy() {
      for (const b of [partialO, partialML, decodeParams, combineParams, prefillParams]) b.destroy();
    },
    scratchBytes: partialO.size + partialML.size,
    nSplits,
    encode(pass, tokens, mode) {
      if (tokens > a.maxTokens) throw new RangeError(`attention: ${tokens} tokens exceed maxTokens ${a.maxTokens}`);
      if (mode === 'prefill') {
        pass.setPipeline(prefillPipeline);
        pass.setBindGroup(0, prefillGroup);
        pass.dispatchWorkgroups(prefillTiles(tokens, a.maxSeqs, tq), nHeads);
        return;
      }
      if (tokens > decodeTokens) {
        throw new RangeError(`attention: a decode-mode step takes at most ${decodeTokens} tokens (decode.maxTokens), got ${tokens}; use 'prefill'`);
      }
      pass.setPipeline(decodePipeline);
      pass.setBindGroup(0, decodeGroup);
      pass.dispatchWorkgroups(nSplits, nHeads, tokens);
      pass.setPipeline(combinePipeline);
      pass.setBindGroup(0, combineGroup);
      pass.dispatchWorkgroups(nHeads, tokens);
    },
  };
}
