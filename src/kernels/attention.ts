import combineSource from '../../shaders/attn_combine.wgsl';
import decodeBody from '../../shaders/attn_decode.wgsl';
import prefillBody from '../../shaders/attn_prefill.wgsl';
import attnKvLib from '../../shaders/lib/attn_kv.wgsl';
import attnSoftmaxLib from '../../shaders/lib/attn_softmax.wgsl';
import subgroupsLib from '../../shaders/lib/subgroups.wgsl';
import subgroupsOffLib from '../../shaders/lib/subgroups_off.wgsl';
import { createBuffer, packParams, STORAGE, UNIFORM, uploadBuffer, bindBuffers, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { actBytes, describeDispatch, type OpContext, type OpLabel, type StepShape } from './op';

export { attentionRef, type AttentionRefArgs } from './attention-ref';

// Both passes over the paged cache share their Params, window and page lookup (attn_kv) and their
// online softmax (attn_softmax), by subgroup shuffles or one thread per row (the subgroups libs).
const attnLibs = attnKvLib + attnSoftmaxLib;
/** Decode whose per-tile softmax scans each head's scores in one thread: for devices without subgroups. */
export const attnDecodeKernel: Kernel = { name: 'attn_decode', source: attnLibs + subgroupsOffLib + decodeBody };
/** Decode whose per-tile softmax reduces each head's scores by subgroup shuffles (the `subgroups` feature). */
export const attnDecodeSubgroupKernel: Kernel = { name: 'attn_decode_subgroups', source: 'enable subgroups;\n' + attnLibs + subgroupsLib + decodeBody };
/** Prefill whose per-tile softmax scans each row's scores in one thread: for devices without subgroups. */
export const attnPrefillKernel: Kernel = { name: 'attn_prefill', source: attnLibs + subgroupsOffLib + prefillBody };
/** Prefill whose per-tile softmax reduces each row's scores by subgroup shuffles (the `subgroups` feature). */
export const attnPrefillSubgroupKernel: Kernel = { name: 'attn_prefill_subgroups', source: 'enable subgroups;\n' + attnLibs + subgroupsLib + prefillBody };

/**
 * Whether an attention kernel of `wg` threads takes its subgroup variant: where the device has the
 * feature (unless told not to) and the threads are a power of two, so that runs of a subgroup's
 * lanes tile them (a workgroup of 160 threads would end in a partial subgroup of another size).
 */
function useSubgroups(device: GPUDevice, wg: number, subgroups = true): boolean {
  return subgroups && device.features.has('subgroups') && (wg & (wg - 1)) === 0;
}

/** The decode variant for a device (see useSubgroups). */
export function attnDecodeKernelFor(device: GPUDevice, wg: number, subgroups = true): Kernel {
  return useSubgroups(device, wg, subgroups) ? attnDecodeSubgroupKernel : attnDecodeKernel;
}

/** The prefill variant for a device (see useSubgroups). */
export function attnPrefillKernelFor(device: GPUDevice, wg: number, subgroups = true): Kernel {
  return useSubgroups(device, wg, subgroups) ? attnPrefillSubgroupKernel : attnPrefillKernel;
}
export const attnCombineKernel: Kernel = { name: 'attn_combine', source: combineSource };

/** `Params.window` when there is no sliding window: every causal key is within it. */
const NO_WINDOW = 0xffffffff;

/** Query tiles × key tiles the prefill kernel is tested at (the op's default: see prefillLayout). */
export const PREFILL_TILES = [
  { tq: 4, tk: 8 },
  { tq: 16, tk: 16 },
] as const;
/** Keys per workgroup-memory tile of the decode kernel tested (the default is 32, less where memory is short). */
export const DECODE_KEY_TILES = [8, 16] as const;

/**
 * Workgroups a multi-split decode step aims for: WebGPU does not tell the compute-unit count, so a
 * fixed figure that fills a large GPU (about twice an H100's 132 SMs is 264; 128 already keeps
 * every SM busy with one workgroup of 128 threads, and more splits add combine traffic).
 */
export const DECODE_TARGET_WORKGROUPS = 128;
/** The fewest keys worth a split of their own: below this, splitting costs more than it saves. */
export const MIN_SPLIT_KEYS = 64;

/**
 * `decode`: one workgroup per KV head's query heads and split of the context (attn_decode, plus
 * attn_combine when a step runs several splits), best for few query tokens.
 * `prefill`: query-tiled (attn_prefill), best for long runs of tokens.
 * Both are exact for any batch.
 */
export type AttentionMode = 'decode' | 'prefill';

export interface AttentionOp {
  /** Scratch for the decode path's splits, in bytes (0 when there is none). */
  readonly scratchBytes: number;
  /** Splits of a long-context decode step (a short one takes one: stepSplits). */
  readonly nSplits: number;
  /** Query heads per decode workgroup, and keys per decode tile. */
  readonly decodeGroup: number;
  /** Whether the decode softmax reduces by subgroups. */
  readonly decodeSubgroups: boolean;
  readonly keyTile: number;
  /** Query tokens × heads per prefill workgroup. */
  readonly prefillTile: { tq: number; group: number };
  /** Whether the prefill softmax reduces by subgroups. */
  readonly prefillSubgroups: boolean;
  /**
   * `maxKeys`: the longest context in the step (keys after it), which lets a decode step with a
   * short one run a single split and no combine pass; absent, decode runs every split.
   */
  encode(pass: GPUComputePassEncoder, tokens: number, mode: AttentionMode, maxKeys?: number): void;
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
    /**
     * Splits of a long-context decode step (see decodeSplits). Default: enough that splits × head
     * groups reach DECODE_TARGET_WORKGROUPS for one sequence, each split at least MIN_SPLIT_KEYS.
     */
    splits?: number;
    /** Most tokens a decode-mode step may have; sizes the split scratch. Default: maxSeqs. */
    maxTokens?: number;
    /** Keys per workgroup-memory tile. Default 32, halved until the workgroup memory fits. */
    keyTile?: number;
    /** Query heads per workgroup, a divisor of nHeads / nKv. Default: the whole GQA group, or the largest divisor that fits. */
    group?: number;
    wg?: number;
    /** false: the one-thread-per-head softmax even where the device has subgroups (tests force the fallback). */
    subgroups?: boolean;
  };
  /**
   * Tokens and query heads per workgroup, keys per tile, threads (see prefillLayout); `subgroups`
   * false: the one-thread-per-row softmax even where the device has subgroups (tests force the fallback).
   */
  prefill?: { tq?: number; tk?: number; group?: number; wg?: number; subgroups?: boolean };
  label?: OpLabel;
}

/** Workgroup memory of the prefill kernel at a tile shape, in bytes (see attn_prefill.wgsl; with the subgroup variant's counter). */
export function prefillWorkgroupBytes(headDim: number, tq: number, tk: number, group = 1): number {
  const d4 = headDim / 4;
  const rows = tq * group;
  return 16 * (rows * d4 + tk * (d4 + 1) + tk * d4) + 4 * (rows * tk + 2 * tk + tq + 3 * rows + 1);
}

/** Query rows (tokens × heads) a prefill workgroup aims for by default. */
export const PREFILL_ROWS = 32;

/**
 * The prefill kernel's shape: `tq` tokens × `group` query heads of one KV head per workgroup (as
 * many rows as fit, up to PREFILL_ROWS, preferring whole GQA groups), `tk` keys per tile, and `wg`
 * threads (128–256) that each own at most 8 of the rows' output vec4s.
 */
export function prefillLayout(
  headDim: number,
  nHeads: number,
  nKv: number,
  limits: { bytes: number; threads: number },
  o: { tq?: number; tk?: number; group?: number; wg?: number } = {},
): { tq: number; tk: number; group: number; wg: number } {
  const d4 = headDim / 4;
  const perKv = nHeads / nKv;
  const threads = (rows: number) => o.wg ?? Math.min(limits.threads, Math.max(128, Math.min(256, Math.ceil((rows * d4) / 8 / 32) * 32)));
  const fits = (tq: number, g: number, tk: number) => prefillWorkgroupBytes(headDim, tq, tk, g) <= limits.bytes && tq * g * d4 <= 8 * threads(tq * g);
  // The largest key tile that fits, then the largest head group (a divisor of the GQA group),
  // then the most tokens (a power of two up to PREFILL_ROWS rows, or the one given).
  for (const tk of o.tk ? [o.tk] : [16, 8, 4]) {
    for (let g = o.group ?? perKv; g >= 1; g = o.group ? 0 : g - 1) {
      if (perKv % g !== 0) continue;
      for (let tq = o.tq ?? 2 ** Math.floor(Math.log2(Math.max(1, PREFILL_ROWS / g))); tq >= 1; tq = o.tq ? 0 : tq / 2) {
        if (fits(tq, g, tk)) return { tq, tk, group: g, wg: threads(tq * g) };
      }
    }
  }
  throw new RangeError(`attn_prefill: no tile of ${o.tq ?? 'any'} tokens × ${o.group ?? 'any'} of ${perKv} heads with ${o.tk ?? 'any'}-key tiles fits headDim ${headDim} in ${limits.bytes} B of workgroup memory and 8 outputs per thread of at most ${limits.threads}`);
}

/** Workgroup memory of the decode kernel (see attn_decode.wgsl; with the subgroup variant's counter), in bytes. */
export function decodeWorkgroupBytes(headDim: number, group: number, keyTile: number, wg: number): number {
  const d4 = headDim / 4;
  return 16 * (group * d4 + keyTile * (d4 + 1) + keyTile * d4 + wg) + 4 * (group * keyTile + 2 * keyTile + 3 * group + 1);
}

/**
 * The decode kernel's shape: `group` query heads per workgroup (the whole GQA group where it fits,
 * so K/V are read once per KV head), `keyTile` keys per tile, and how the PV product's group·headDim/4
 * output vec4s spread over `wg` threads (`ng` key groups, or `outs` outputs per thread; at most 8).
 */
export function decodeLayout(
  headDim: number,
  nHeads: number,
  nKv: number,
  limits: { bytes: number; threads: number },
  o: { keyTile?: number; group?: number; wg?: number } = {},
): { group: number; keyTile: number; wg: number; ng: number; outs: number } {
  const d4 = headDim / 4;
  const perKv = nHeads / nKv;
  const wg = o.wg ?? Math.min(128, limits.threads);
  const fits = (g: number, kb: number) => decodeWorkgroupBytes(headDim, g, kb, wg) <= limits.bytes && g * d4 <= 8 * wg;
  const minTile = o.keyTile ?? 8;
  const divisors = Array.from({ length: perKv }, (_, i) => perKv - i).filter((g) => perKv % g === 0);
  const group = o.group ?? divisors.find((g) => fits(g, minTile)) ?? 1;
  if (perKv % group !== 0) throw new RangeError(`attn_decode: a group of ${group} query heads does not divide the ${perKv} per KV head`);
  let keyTile = o.keyTile ?? 32;
  while (o.keyTile === undefined && keyTile > 4 && !fits(group, keyTile)) keyTile /= 2;
  if (!fits(group, keyTile)) {
    throw new RangeError(`attn_decode: ${group} heads × ${keyTile}-key tiles at headDim ${headDim} need ${decodeWorkgroupBytes(headDim, group, keyTile, wg)} B of workgroup memory and ${Math.ceil((group * d4) / wg)} outputs per thread; the device has ${limits.bytes} B, and a thread takes at most 8`);
  }
  const slots = group * d4;
  const ng = slots < wg ? Math.floor(wg / slots) : 1;
  return { group, keyTile, wg, ng, outs: ng > 1 ? 1 : Math.ceil(slots / wg) };
}

/**
 * The most splits a decode step uses: enough that splits × head groups reach
 * DECODE_TARGET_WORKGROUPS for a single sequence, with at least MIN_SPLIT_KEYS keys each at the
 * longest context. `splits` overrides it.
 */
export function decodeSplits(headGroups: number, maxKeys: number, splits?: number): number {
  if (splits !== undefined) return splits;
  return Math.max(1, Math.min(Math.ceil(DECODE_TARGET_WORKGROUPS / headGroups), Math.ceil(maxKeys / MIN_SPLIT_KEYS)));
}

/**
 * Splits a decode step of `tokens` tokens dispatches: one (the kernel writes the output itself and
 * there is no combine pass) when the longest context in the step is short or the tokens alone fill
 * the device; else all `nSplits`, which the kernel spreads evenly over each token's keys.
 * Without `maxKeys` the step's context is unknown: all splits.
 */
export function stepSplits(nSplits: number, headGroups: number, tokens: number, maxKeys?: number): number {
  if (nSplits === 1 || maxKeys === undefined) return nSplits;
  const useful = Math.min(Math.ceil(maxKeys / MIN_SPLIT_KEYS), Math.ceil(DECODE_TARGET_WORKGROUPS / (headGroups * tokens)));
  return useful <= 1 ? 1 : nSplits;
}

/** The shared Params of attn_decode and attn_prefill (shaders/lib/attn_kv.wgsl), field by field. */
function kvParams(a: AttentionArgs, nSplits: number): ArrayBuffer {
  return packParams([
    ['u32', a.nHeads],
    ['u32', a.nKv],
    ['u32', a.pageSize],
    ['u32', a.maxPagesPerSeq],
    ['u32', a.window ?? NO_WINDOW],
    ['u32', nSplits],
    ['u32', 0],
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

  // Decode: grouped by KV head, split-K over long contexts (then combined).
  const layout = decodeLayout(headDim, nHeads, nKv, { bytes: limit, threads: device.limits.maxComputeInvocationsPerWorkgroup }, a.decode ?? {});
  const headGroups = nHeads / layout.group;
  const nSplits = decodeSplits(headGroups, maxPagesPerSeq * pageSize, a.decode?.splits);
  if (!(Number.isInteger(nSplits) && nSplits >= 1)) throw new RangeError(`attn_decode: splits must be a positive integer, got ${nSplits}`);
  const decodeTokens = Math.min(a.decode?.maxTokens ?? a.maxSeqs, a.maxTokens);
  // A single-split op never writes partials; the bindings still need a buffer.
  const partialRows = nSplits > 1 ? decodeTokens * nHeads * nSplits : 1;
  const partialO = createBuffer(device, partialRows * headDim * 4, STORAGE, 'attn partial out');
  const partialML = createBuffer(device, partialRows * 8, STORAGE, 'attn partial max/sum');
  const combineWg = Math.min(64, Math.ceil(d4 / 32) * 32);
  const decodeKernel = attnDecodeKernelFor(device, layout.wg, a.decode?.subgroups);
  const decodeConstants = { WG: layout.wg, HEAD_DIM: headDim, KB: layout.keyTile, GROUP: layout.group, NG: layout.ng, OUTS: layout.outs };
  const [decodePipeline, combinePipeline] = await Promise.all([
    ctx.cache.get(decodeKernel, { precision: ctx.precision, constants: decodeConstants }),
    nSplits > 1 ? ctx.cache.get(attnCombineKernel, { precision: ctx.precision, constants: { WG: combineWg, NSPLITS: nSplits } }) : null,
  ]);
  const decodeParams = uploadBuffer(device, new Uint8Array(kvParams(a, nSplits)), UNIFORM, 'attn_decode params');
  const combineParams = uploadBuffer(device, new Uint8Array(packParams([['u32', nHeads], ['u32', d4]])), UNIFORM, 'attn_combine params');
  // Bytes: q read and the output written per token, and each sequence's K and V read once (at
  // most a window of keys): the least a step must move. A multi-split step adds its partials (f32
  // out, max and sum per split), written by attn_decode and read by attn_combine.
  const act = actBytes(ctx.precision);
  const headRow = nHeads * headDim * act;
  const kvBytes = (s: StepShape) => s.keys.reduce((n, keys) => n + Math.min(keys, a.window ?? keys), 0) * 2 * nKv * headDim * act;
  const partialBytes = (rows: number) => rows * nHeads * nSplits * (headDim * 4 + 8);
  const splitsAt = (rows: number, s: StepShape) => stepSplits(nSplits, headGroups, rows, s.keys.length ? Math.max(...s.keys) : undefined);
  const label = a.label ?? { role: 'attention' };
  const decodeGroup = describeDispatch(
    bindBuffers(device, decodePipeline, [a.q, a.kCache, a.vCache, a.positions, a.tokenSeq, a.blockTable, partialO, partialML, a.out, decodeParams]),
    label,
    'attention',
    (rows, s) => rows * headRow + kvBytes(s) + (splitsAt(rows, s) > 1 ? partialBytes(rows) : rows * headRow),
  );
  const combineGroup = combinePipeline
    ? describeDispatch(bindBuffers(device, combinePipeline, [partialO, partialML, a.out, combineParams]), label, 'attention', (rows) => partialBytes(rows) + rows * headRow)
    : null;

  // Prefill: query tiles × head groups, as many rows as fit the device.
  const pl = prefillLayout(headDim, nHeads, nKv, { bytes: limit, threads: device.limits.maxComputeInvocationsPerWorkgroup }, a.prefill ?? {});
  const tq = pl.tq;
  const prefillKernel = attnPrefillKernelFor(device, pl.wg, a.prefill?.subgroups);
  const prefillPipeline = await ctx.cache.get(prefillKernel, {
    precision: ctx.precision,
    constants: { WG: pl.wg, HEAD_DIM: headDim, TQ: pl.tq, TK: pl.tk, GROUP: pl.group },
  });
  // The split fields are attn_decode's; attn_prefill ignores them.
  const prefillParams = uploadBuffer(device, new Uint8Array(kvParams(a, 0)), UNIFORM, 'attn_prefill params');
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
    scratchBytes: nSplits > 1 ? partialO.size + partialML.size : 0,
    nSplits,
    decodeGroup: layout.group,
    decodeSubgroups: decodeKernel === attnDecodeSubgroupKernel,
    keyTile: layout.keyTile,
    prefillTile: { tq: pl.tq, group: pl.group },
    prefillSubgroups: prefillKernel === attnPrefillSubgroupKernel,
    encode(pass, tokens, mode, maxKeys) {
      if (tokens > a.maxTokens) throw new RangeError(`attention: ${tokens} tokens exceed maxTokens ${a.maxTokens}`);
      if (mode === 'prefill') {
        pass.setPipeline(prefillPipeline);
        pass.setBindGroup(0, prefillGroup);
        pass.dispatchWorkgroups(prefillTiles(tokens, a.maxSeqs, tq), nHeads / pl.group);
        return;
      }
      if (tokens > decodeTokens) {
        throw new RangeError(`attention: a decode-mode step takes at most ${decodeTokens} tokens (decode.maxTokens), got ${tokens}; use 'prefill'`);
      }
      const splits = stepSplits(nSplits, headGroups, tokens, maxKeys);
      pass.setPipeline(decodePipeline);
      pass.setBindGroup(0, decodeGroup);
      pass.dispatchWorkgroups(splits, headGroups, tokens);
      if (splits === 1) return; // the kernel wrote the output itself
      pass.setPipeline(combinePipeline!);
      pass.setBindGroup(0, combineGroup);
      pass.dispatchWorkgroups(nHeads, tokens);
    },
  };
}
