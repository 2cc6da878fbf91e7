/**
 * Mixture-of-experts kernels: the router (`moe_route.wgsl`: softmax over a token's router logits,
 * top-k, optional renormalisation) and the routed linear layer (`moe_matvec.wgsl`: reads only the
 * chosen experts' rows of a stacked [experts, n, k] weight, in any weight type). The experts' gate
 * and up projections run in its gather mode (one row of output per token and slot), the down
 * projection in its combine mode, which applies the routing weights (and Qwen2-MoE's gated shared
 * expert) in its epilogue.
 *
 * moe_route bindings:  0 logits act [T][E], 1 ids u32 [T][K], 2 weights f32 [T][K], 3 counts.
 * moe_matvec bindings: 0 w u32, 1 x act, 2 y act, 3 ids, 4 weights, 5 shared_y act [T][n],
 *                      6 shared_gate act [T], 7 Params { k, n, rowWords, e0, e1, add, pad, pad }, 8 counts
 *                      (x, y and shared_y held at f32 in the f16 path where the op says so).
 * A stack larger than one binding goes up in parts of whole experts (`uploadExpertParts`), one
 * dispatch each (`createMoeMatvecOp`).
 */
import dequantLib from '../../shaders/lib/dequant.wgsl';
import routeSource from '../../shaders/moe_route.wgsl';
import matvecBody from '../../shaders/moe_matvec.wgsl';
import groupedBody from '../../shaders/moe_grouped.wgsl';
import sortSource from '../../shaders/moe_sort.wgsl';
import { bindBuffers, STORAGE, uploadBuffer, UNIFORM, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { DTYPE_INFO, type DType } from '../formats/types';
import { routeTopK } from '../model/moe';
import { tensorByteLength } from '../formats/types';
import { actBytes, describeDispatch, elemBytes, type Op, type OpContext, type OpLabel } from './op';
import { gpuBytesPerRow, splitRows, uploadWeight, WTYPE, type WeightPart } from './weights';

export const moeRouteKernel: Kernel = { name: 'moe_route', source: routeSource };
export const moeMatvecKernel: Kernel = { name: 'moe_matvec', source: dequantLib + matvecBody };
export const moeSortKernel: Kernel = { name: 'moe_sort', source: sortSource };
export const moeGroupedKernel: Kernel = { name: 'moe_grouped', source: dequantLib + groupedBody };
export const MOE_SORT_WG = 64;

/** moe_matvec overrides: WG threads, ROWS_PER_WG rows each (WG / ROWS_PER_WG a power of two). */
export interface MoeMatvecSpec {
  WG: number;
  ROWS_PER_WG: number;
}

/** The engine's choice: 32 threads split each row's chunks. */
export const MOE_SPEC: MoeMatvecSpec = { WG: 64, ROWS_PER_WG: 2 };
/** CPU-emulated adapters (SwiftShader): one row per thread, no reduction (as EMULATED_DECODE_SPEC). */
export const EMULATED_MOE_SPEC: MoeMatvecSpec = { WG: 16, ROWS_PER_WG: 16 };
/** Specialisations the tests run: every one the engine may choose. */
export const MOE_SPECS: readonly MoeMatvecSpec[] = [MOE_SPEC, EMULATED_MOE_SPEC];
export const MOE_ROUTE_WG = 64;

/** TypeScript reference of moe_route: ids and weights [T][K] from logits [T][E]. */
export function moeRouteRef(logits: Float32Array, T: number, E: number, K: number, norm: boolean): { ids: Uint32Array; weights: Float32Array } {
  const ids = new Uint32Array(T * K);
  const weights = new Float32Array(T * K);
  for (let t = 0; t < T; t++) {
    const r = routeTopK(logits.subarray(t * E, (t + 1) * E), K, norm);
    ids.set(r.ids, t * K);
    weights.set(r.weights, t * K);
  }
  return { ids, weights };
}

/**
 * TypeScript reference of moe_matvec over `w` [E][n][k] (dequantised), accumulated in f64.
 * gather: y [T·K][n] = W[ids[s]] · x[⌊s / K⌋]; combine: y [T][n] = Σ_j weights[s] · W[ids[s]] · x[s]
 * (s = t·K + j), plus sigmoid(sharedGate[t]) · sharedY[t] when given.
 */
export function moeMatvecRef(
  mode: 'gather' | 'combine',
  x: Float32Array,
  w: Float32Array,
  ids: ArrayLike<number>,
  weights: ArrayLike<number>,
  dims: { T: number; K: number; n: number; k: number },
  shared?: { y: Float32Array; gate: Float32Array },
): Float32Array {
  const { T, K, n, k } = dims;
  const items = mode === 'gather' ? T * K : T;
  const y = new Float32Array(items * n);
  const dot = (e: number, r: number, xo: number) => {
    let s = 0;
    for (let i = 0; i < k; i++) s += w[(e * n + r) * k + i]! * x[xo + i]!;
    return s;
  };
  for (let item = 0; item < items; item++) {
    for (let r = 0; r < n; r++) {
      let v = 0;
      if (mode === 'gather') v = dot(ids[item]!, r, Math.floor(item / K) * k);
      else for (let j = 0; j < K; j++) v += weights[item * K + j]! * dot(ids[item * K + j]!, r, (item * K + j) * k);
      if (shared) v += shared.y[item * n + r]! / (1 + Math.exp(-shared.gate[item]!));
      y[item * n + r] = v;
    }
  }
  return y;
}

/**
 * The static Params uniform of moe_matvec: one expert's shape, the experts [first, first + count)
 * its weight binding holds, and whether it adds into y (combine, a split stack's later parts).
 */
export function moeMatvecParams(dtype: DType, n: number, k: number, part: { first: number; count: number; add: boolean }): ArrayBuffer {
  return Uint32Array.from([k, n, gpuBytesPerRow(dtype, k) / 4, part.first, part.first + part.count, part.add ? 1 : 0, 0, 0]).buffer;
}

/**
 * Uploads a stack of experts ([experts, n, k], ggml bytes of `dtype`) in parts of whole experts of
 * at most `maxBytes` each (as uploadWeightParts splits a matrix by rows), as few as can be. Each
 * part's rows are its experts' (row0 = first expert · n). Throws a RangeError when one expert alone
 * is larger than `maxBytes`.
 */
export function uploadExpertParts(device: GPUDevice, dtype: DType, bytes: Uint8Array, shape: { experts: number; n: number; k: number }, maxBytes: number, label = `experts ${dtype}`): WeightPart[] {
  const { experts, n, k } = shape;
  const plan = splitRows(experts, n * gpuBytesPerRow(dtype, k), maxBytes);
  if (!plan) throw new RangeError(`${label}: one expert is ${n * gpuBytesPerRow(dtype, k)} bytes, more than the ${maxBytes} bytes a GPU binding may hold`);
  const fileExpertBytes = n * tensorByteLength(dtype, k);
  const parts: WeightPart[] = [];
  try {
    for (const [i, { row0: e0, rows: count }] of plan.entries()) {
      const slice = plan.length === 1 ? bytes : bytes.subarray(e0 * fileExpertBytes, (e0 + count) * fileExpertBytes);
      parts.push({ buffer: uploadWeight(device, dtype, slice, k, plan.length === 1 ? label : `${label} [part ${i + 1}/${plan.length}]`), row0: e0 * n, rows: count * n });
    }
  } catch (e) {
    for (const p of parts) p.buffer.destroy();
    throw e;
  }
  return parts;
}

export function moeMatvecConstants(spec: MoeMatvecSpec, dtype: DType, used: number, mode: 'gather' | 'combine', hasShared: boolean): Record<string, number> {
  return { ...spec, WTYPE: WTYPE[dtype], K: used, COMBINE: mode === 'combine' ? 1 : 0, HAS_SHARED: hasShared ? 1 : 0 };
}

/** Workgroups of moe_matvec: x over row groups of one expert, y over items (T·K or T). */
export function moeMatvecGrid(n: number, items: number, spec: MoeMatvecSpec): [number, number] {
  return [Math.ceil(n / spec.ROWS_PER_WG), items];
}

export class MoeOpError extends Error {
  override readonly name = 'MoeOpError';
}

/** Router: logits [maxTokens][experts] (act) -> ids, weights [maxTokens][used]. */
export async function createMoeRouteOp(
  ctx: OpContext,
  args: { logits: GPUBuffer; ids: GPUBuffer; weights: GPUBuffer; counts: BufferRef; experts: number; used: number; norm: boolean; label?: OpLabel },
): Promise<Op> {
  if (!(args.used >= 1 && args.used <= args.experts)) throw new MoeOpError(`top-${args.used} of ${args.experts} experts`);
  const pipeline = await ctx.cache.get(moeRouteKernel, {
    precision: ctx.precision,
    constants: { WG: MOE_ROUTE_WG, E: args.experts, K: args.used, NORM: args.norm ? 1 : 0 },
  });
  // Reads each token's logits, writes its ids and weights.
  const act = actBytes(ctx.precision);
  const bindGroup = describeDispatch(bindBuffers(ctx.device, pipeline, [args.logits, args.ids, args.weights, args.counts]), args.label, 'moe_route', (rows) => rows * (args.experts * act + args.used * 8));
  return {
    destroy: () => {},
    encode(pass, tokens) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(Math.ceil(tokens / MOE_ROUTE_WG));
    },
  };
}

export interface MoeMatvecArgs {
  /** [experts][n][k] in the GPU layout: one buffer, or parts of whole experts (uploadExpertParts), one dispatch each. */
  weight: GPUBuffer | readonly WeightPart[];
  dtype: DType;
  experts: number;
  n: number; // rows per expert
  k: number; // elements per row (a multiple of 8 and of the dtype's block)
  used: number; // experts per token
  mode: 'gather' | 'combine';
  x: GPUBuffer;
  y: GPUBuffer;
  ids: GPUBuffer;
  weights: GPUBuffer;
  /** combine only: Qwen2-MoE's shared expert output [T][n] (`yF32`: f32 at every precision) and its gate logit [T]. */
  shared?: { y: GPUBuffer; gate: GPUBuffer; yF32?: boolean };
  counts: BufferRef;
  maxTokens: number;
  label?: OpLabel;
  /** x (combine: act(gate)·up) is f32 at every precision. */
  xF32?: boolean;
  /** y is f32 at every precision (combine: the residual stream or the branch before its post-norm). */
  yF32?: boolean;
  /** combine only: y is the residual stream, the weighted sum is added into it. */
  residual?: boolean;
}

const dummies = new WeakMap<GPUDevice, GPUBuffer>();
function dummy(device: GPUDevice): GPUBuffer {
  let b = dummies.get(device);
  if (!b) dummies.set(device, (b = uploadBuffer(device, new Float32Array(1), STORAGE, 'no shared expert')));
  return b;
}

/**
 * The parts of a stacked weight as its routed ops dispatch them: one buffer is one part; parts
 * must be whole experts, in order, of at least `expertBytes` each, together the whole stack.
 */
function expertParts(weight: GPUBuffer | readonly WeightPart[], experts: number, n: number, expertBytes: number, fail: (what: string) => never): readonly WeightPart[] {
  const parts: readonly WeightPart[] = Array.isArray(weight) ? weight : [{ buffer: weight as GPUBuffer, row0: 0, rows: experts * n }];
  let next = 0;
  for (const [i, p] of parts.entries()) {
    if (p.row0 !== next || p.row0 % n !== 0 || p.rows % n !== 0 || !(p.rows > 0)) fail(`weight part ${i} (rows ${p.row0}..${p.row0 + p.rows}) is not the whole experts after the part before`);
    if (p.buffer.size < (p.rows / n) * expertBytes) fail(`${parts.length > 1 ? `weight part ${i}` : 'weight'} holds ${p.buffer.size} bytes, needs ${(p.rows / n) * expertBytes}`);
    next += p.rows;
  }
  if (next !== experts * n) fail(`the weight parts hold ${next / n} experts`);
  return parts;
}

/**
 * The op of a routed kernel over a stack in parts: one dispatch per part (its bind group and
 * grid), the parts' uniforms freed with it.
 */
function partsOp(pipeline: GPUComputePipeline, dispatches: { bindGroup: GPUBindGroup; grid: (tokens: number) => [number, number] }[], params: GPUBuffer[], maxTokens: number): Op {
  return {
    destroy: () => {
      for (const b of params) b.destroy();
    },
    encode(pass, tokens) {
      if (!(tokens >= 1 && tokens <= maxTokens)) throw new RangeError(`a step of ${tokens} tokens; this layer takes 1..${maxTokens}`);
      pass.setPipeline(pipeline);
      for (const d of dispatches) {
        pass.setBindGroup(0, d.bindGroup);
        pass.dispatchWorkgroups(...d.grid(tokens));
      }
    },
  };
}

/** The routed linear layer; pipeline, params and bind groups (one per weight part) made here, once. */
export async function createMoeMatvecOp(ctx: OpContext, args: MoeMatvecArgs, spec: MoeMatvecSpec = MOE_SPEC): Promise<Op> {
  const { device, precision } = ctx;
  const { dtype, experts, n, k, used, mode, maxTokens } = args;
  const fail = (what: string): never => {
    throw new MoeOpError(`routed linear ${dtype} [${experts}, ${n}, ${k}]: ${what}`);
  };
  if (k % 8 !== 0 || k % DTYPE_INFO[dtype].blockSize !== 0) fail(`k must be a multiple of 8 and of the ${dtype} block`);
  if ((args.shared || args.residual) && mode !== 'combine') fail('a shared expert or a residual add is combine mode\'s only');
  const [xBytes, yBytes] = [elemBytes(precision, args.xF32), elemBytes(precision, args.yF32)];
  const slots = maxTokens * used;
  const need = (buf: GPUBuffer, bytes: number, name: string) => {
    if (buf.size < bytes) fail(`${name} holds ${buf.size} bytes, needs ${bytes}`);
  };
  const expertBytes = n * gpuBytesPerRow(dtype, k);
  const parts = expertParts(args.weight, experts, n, expertBytes, fail);
  need(args.x, (mode === 'gather' ? maxTokens : slots) * k * xBytes, 'x');
  need(args.y, (mode === 'gather' ? slots : maxTokens) * n * yBytes, 'y');
  need(args.ids, slots * 4, 'ids');
  need(args.weights, slots * 4, 'weights');
  const tpr = spec.WG / spec.ROWS_PER_WG;
  if (!(Number.isInteger(tpr) && tpr > 0 && (tpr & (tpr - 1)) === 0)) fail(`WG / ROWS_PER_WG = ${tpr} threads per row must be a power of two`);
  const f32 = [...(args.xF32 ? ['x_t'] : []), ...(args.yF32 ? ['y_t'] : []), ...(args.shared?.yF32 ? ['sy_t'] : [])];
  const pipeline = await ctx.cache.get(moeMatvecKernel, { precision, f32, constants: moeMatvecConstants(spec, dtype, used, mode, !!args.shared) });
  const none = dummy(device);
  const act = actBytes(precision);
  const sharedBytes = args.shared ? (n * elemBytes(precision, args.shared.yF32) + act) : 0;
  const params: GPUBuffer[] = [];
  const dispatches = parts.map((p, i) => {
    // A later part adds to the first's; into the residual stream, every part adds.
    const part = { first: p.row0 / n, count: p.rows / n, add: mode === 'combine' && (i > 0 || !!args.residual) };
    const uniform = uploadBuffer(device, new Uint8Array(moeMatvecParams(dtype, n, k, part)), UNIFORM, `moe params ${experts}x${n}x${k}${parts.length > 1 ? ` [part ${i + 1}/${parts.length}]` : ''}`);
    params.push(uniform);
    // The chosen experts' rows (at most every expert of the part, each read once), x read and y
    // written per item (read too where the part adds), ids and weights (and the shared expert's
    // row, with expert 0's part) per token.
    const bytes = (rows: number) =>
      Math.min(part.count, rows * used) * expertBytes +
      (mode === 'gather' ? rows * (k * xBytes + used * n * yBytes) : rows * (used * k * xBytes + (part.add ? 2 : 1) * n * yBytes + (part.first === 0 ? sharedBytes : 0))) +
      rows * used * 8;
    const bindGroup = describeDispatch(
      bindBuffers(device, pipeline, [p.buffer, args.x, args.y, args.ids, args.weights, args.shared?.y ?? none, args.shared?.gate ?? none, uniform, args.counts]),
      args.label,
      `moe_${mode}`,
      bytes,
    );
    return { bindGroup, grid: (tokens: number) => moeMatvecGrid(n, mode === 'gather' ? tokens * used : tokens, spec) };
  });
  return partsOp(pipeline, dispatches, params, maxTokens);
}

/** TypeScript reference of moe_sort: the slots t·K + j ordered by expert (stable), and each expert's first index in that order. */
export function moeSortRef(ids: ArrayLike<number>, slots: number, E: number): { order: Uint32Array; offsets: Uint32Array } {
  const offsets = new Uint32Array(E + 1);
  for (let s = 0; s < slots; s++) offsets[ids[s]! + 1]!++;
  for (let e = 0; e < E; e++) offsets[e + 1]! += offsets[e]!;
  const at = offsets.slice(0, E);
  const order = new Uint32Array(slots);
  for (let s = 0; s < slots; s++) order[at[ids[s]!]!++] = s;
  return { order, offsets };
}

/** The routed slots of a step sorted by expert (moe_sort), for the grouped gather of a prefill. */
export async function createMoeSortOp(
  ctx: OpContext,
  args: { ids: GPUBuffer; order: GPUBuffer; offsets: GPUBuffer; counts: BufferRef; experts: number; used: number; maxTokens: number; label?: OpLabel },
): Promise<Op> {
  const { experts, used, maxTokens } = args;
  if (args.order.size < maxTokens * used * 4 || args.offsets.size < (experts + 1) * 4 || args.ids.size < maxTokens * used * 4)
    throw new MoeOpError(`moe_sort: ids and order need ${maxTokens * used} words, offsets ${experts + 1}`);
  // No activations: one variant whatever the precision.
  const pipeline = await ctx.cache.get(moeSortKernel, { precision: 'f32', constants: { WG: MOE_SORT_WG, E: experts, K: used } });
  // Each expert's threads read every id twice; order and offsets written once.
  const bindGroup = describeDispatch(bindBuffers(ctx.device, pipeline, [args.ids, args.order, args.offsets, args.counts]), args.label, 'moe_sort', (rows) => rows * used * 4 * (2 * experts + 1) + (experts + 1) * 4);
  return {
    destroy: () => {},
    encode(pass, tokens) {
      if (!(tokens >= 1 && tokens <= maxTokens)) throw new RangeError(`a step of ${tokens} tokens; this layer takes 1..${maxTokens}`);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(1);
    },
  };
}

export interface MoeGroupedArgs {
  /** [experts][n][k] in the GPU layout: one buffer, or parts of whole experts (uploadExpertParts), one dispatch each. */
  weight: GPUBuffer | readonly WeightPart[];
  dtype: DType;
  experts: number;
  n: number;
  k: number;
  used: number;
  x: GPUBuffer; // act [maxTokens][k]
  y: GPUBuffer; // act [maxTokens·used][n]
  order: GPUBuffer; // u32 [maxTokens·used], from createMoeSortOp
  offsets: GPUBuffer; // u32 [experts + 1]
  maxTokens: number;
  label?: OpLabel;
}

/**
 * The grouped gather of a prefill (moe_grouped): y[s] = W[ids[s]] · x[⌊s / K⌋] as moe_matvec's
 * gather computes it (moeMatvecRef), each expert's rows read once per 4 of its slots; one dispatch
 * per weight part.
 */
export async function createMoeGroupedOp(ctx: OpContext, args: MoeGroupedArgs, spec: MoeMatvecSpec = MOE_SPEC): Promise<Op> {
  const { device } = ctx;
  const { dtype, experts, n, k, used, maxTokens } = args;
  const fail = (what: string): never => {
    throw new MoeOpError(`grouped routed linear ${dtype} [${experts}, ${n}, ${k}]: ${what}`);
  };
  if (k % 8 !== 0 || k % DTYPE_INFO[dtype].blockSize !== 0) fail(`k must be a multiple of 8 and of the ${dtype} block`);
  const tpr = spec.WG / spec.ROWS_PER_WG;
  if (!(Number.isInteger(tpr) && tpr > 0 && (tpr & (tpr - 1)) === 0)) fail(`WG / ROWS_PER_WG = ${tpr} threads per row must be a power of two`);
  const act = actBytes(ctx.precision);
  const expertBytes = n * gpuBytesPerRow(dtype, k);
  const parts = expertParts(args.weight, experts, n, expertBytes, fail);
  if (args.x.size < maxTokens * k * act || args.y.size < maxTokens * used * n * act) fail('x or y is too small');
  const pipeline = await ctx.cache.get(moeGroupedKernel, { precision: ctx.precision, constants: { ...spec, WTYPE: WTYPE[dtype], K: used } });
  const params: GPUBuffer[] = [];
  const dispatches = parts.map((p, i) => {
    const first = p.row0 / n;
    const count = p.rows / n;
    const uniform = uploadBuffer(device, new Uint8Array(moeMatvecParams(dtype, n, k, { first, count, add: false })), UNIFORM, `moe grouped params ${experts}x${n}x${k} [part ${i + 1}/${parts.length}]`);
    params.push(uniform);
    // Every expert of the part read (at most) once per 4 of its slots, x read and y written per slot.
    const bytes = (rows: number) => Math.min(count, rows * used) * expertBytes + rows * used * (k + n) * act + rows * used * 4;
    const bindGroup = describeDispatch(bindBuffers(device, pipeline, [p.buffer, args.x, args.y, args.order, args.offsets, uniform]), args.label, 'moe_grouped', bytes);
    // Grid y over the part's experts, whatever the step's size (each reads its own slot count).
    return { bindGroup, grid: (): [number, number] => [Math.ceil(n / spec.ROWS_PER_WG), count] };
  });
  return partsOp(pipeline, dispatches, params, maxTokens);
}
