import type { GPUContext } from '../gpu/device';
import { pipelineCache, type PipelineCache, type Precision } from '../gpu/pipelines';

/** What every op builder needs: the device, the shared pipeline cache and the activation precision. */
export interface OpContext {
  device: GPUDevice;
  cache: PipelineCache;
  precision: Precision;
  /** The adapter runs on the CPU (SwiftShader): ops pick specialisations that suit it. */
  emulated?: boolean;
  /**
   * Linear layers may take the integer dot-product decode matvec (./matvec-dot.ts) where their
   * weight type has one: set only where the device reports `packed_4x8_integer_dot_product` and the
   * engine's `integerDot` option asks for it.
   */
  integerDot?: boolean;
  /** The widest subgroups the adapter may run (GPUAdapterInfo.subgroupMaxSize; 0 or absent: not told). */
  subgroupMaxSize?: number;
}

/**
 * The context the engine builds its ops in on `gpu` (`selfcheck` builds the same to check the
 * kernels the engine would run there): emulated on SwiftShader, integer dot products where asked
 * for and the device has them, the adapter's subgroup width.
 */
export function engineOpContext(gpu: GPUContext, precision: Precision, integerDot = false): OpContext & { emulated: boolean; integerDot: boolean } {
  const emulated = gpu.info.isFallbackAdapter || gpu.info.architecture === 'swiftshader';
  return { device: gpu.device, cache: pipelineCache(gpu.device), precision, emulated, integerDot: integerDot && gpu.info.integerDot, subgroupMaxSize: gpu.info.subgroupMaxSize };
}

/** A prepared dispatch sequence: pipelines and bind groups were made at load; `encode` only records. */
export interface Op {
  encode(pass: GPUComputePassEncoder, tokens: number): void;
  /** Frees the buffers the op created (never its inputs and outputs, which its caller owns). */
  destroy(): void;
}

/**
 * The op of an elementwise kernel over rows: one bind group, `groupsX` workgroups across a row and
 * one row of them per token (the token count rides on the dispatch, so the uniform `params` it
 * owns is static).
 */
export function rowGridOp(pipeline: GPUComputePipeline, bindGroup: GPUBindGroup, params: GPUBuffer, groupsX: number): Op {
  return {
    destroy: () => params.destroy(),
    encode(pass, tokens) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(groupsX, tokens);
    },
  };
}

/** Bytes per activation element at a precision. */
export function actBytes(precision: Precision): number {
  return precision === 'f16' ? 2 : 4;
}

/** Bytes per element of an operand that is f32 at every precision when `f32` (the residual stream), else act. */
export function elemBytes(precision: Precision, f32 = false): number {
  return f32 ? 4 : actBytes(precision);
}

/**
 * One step as the bench's byte counts see it: its tokens, its sequences, and the keys each
 * sequence's attention reads (its length after the step, in step order).
 */
export interface StepShape {
  tokens: number;
  seqs: number;
  keys: readonly number[];
}

/**
 * Who an op is in the model, for the bench's per-op report: its role (q, k, v, o, gate, up, down,
 * lm_head, attention, attn_norm, …) and its layer (none for the embedding, the head and the sampler).
 * `perSeq`: the op runs over one row per sequence (the head), not one per token.
 */
export interface OpLabel {
  role: string;
  layer?: number;
  perSeq?: boolean;
}

/** What the profiler knows of a dispatch: its op's label and the bytes it must read and write in a step. */
export interface DispatchInfo extends OpLabel {
  /** Bytes read + written at `shape` (weights, activations, KV): the least traffic, each byte once. */
  bytes(shape: StepShape): number;
}

/**
 * Dispatch facts keyed by the bind group the dispatch sets (group 0). The profiler stands in for a
 * compute pass and sees pipelines and bind groups, not ops; keying by the group, made once at
 * load, keeps the normal path free of any profiling work.
 */
const dispatchInfos = new WeakMap<GPUBindGroup, DispatchInfo>();

/**
 * Declares what a dispatch through `group` is: the op's `label` (`role` when none was given) and
 * its bytes per step as a function of the row count it runs over (tokens, or sequences for a
 * `perSeq` op) and the step. Returns the group.
 */
export function describeDispatch(
  group: GPUBindGroup,
  label: OpLabel | undefined,
  role: string,
  bytes: (rows: number, shape: StepShape) => number,
): GPUBindGroup {
  const l = label ?? { role };
  dispatchInfos.set(group, { ...l, bytes: (s) => bytes(l.perSeq ? s.seqs : s.tokens, s) });
  return group;
}

/** The facts `describeDispatch` gave the group, if any. */
export function dispatchInfo(group: GPUBindGroup | null | undefined): DispatchInfo | undefined {
  return group ? dispatchInfos.get(group) : undefined;
}

/** `L3.q`, or the role alone for ops outside the layers. */
export function opLabelText(l: OpLabel): string {
  return l.layer === undefined ? l.role : `L${l.layer}.${l.role}`;
}

/** A chunked recurrence's two dispatches: `encode` takes the step's row and sequence counts. */
export interface ChunkedScanOp {
  encode(pass: GPUComputePassEncoder, tokens: number, seqs: number): void;
  destroy(): void;
}

/**
 * The chunked forms' dispatch order (the delta rule's, kernels/delta-net-chunked.ts; Mamba-2's SSD
 * form, kernels/mamba2-chunked.ts): the intra-chunk pass over every chunk of every row at once,
 * (heads, rows, chunks of `size`), then the pass between chunks, (heads, rows), each row's chunks in
 * order over its state. `params` is the uniform both read, destroyed with the op.
 */
export function chunkedScanOp(
  intra: [GPUComputePipeline, GPUBindGroup],
  state: [GPUComputePipeline, GPUBindGroup],
  heads: number,
  size: number,
  params: GPUBuffer,
): ChunkedScanOp {
  return {
    destroy: () => params.destroy(),
    encode(pass, tokens, seqs) {
      pass.setPipeline(intra[0]);
      pass.setBindGroup(0, intra[1]);
      pass.dispatchWorkgroups(heads, seqs, Math.ceil(tokens / size));
      pass.setPipeline(state[0]);
      pass.setBindGroup(0, state[1]);
      pass.dispatchWorkgroups(heads, seqs);
    },
  };
}
