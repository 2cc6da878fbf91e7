import source from '../../shaders/rope.wgsl';
import { createBuffer, packParams, STORAGE, UNIFORM, uploadBuffer, bindBuffers, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import type { ModelConfig } from '../model/config';
import { ropeInvFreqs } from '../model/rope';
import { actBytes, describeDispatch, type OpContext, type Op, type OpLabel } from './op';

export const ropeKernel: Kernel = { name: 'rope', source };

export type RopeStyle = ModelConfig['ropeStyle'];
/** The kernel's `STYLE` constant for each style. */
export const ROPE_STYLE: Record<RopeStyle, number> = { neox: 0, interleaved: 1 };
/** Workgroup sizes the kernel is tested at. */
export const ROPE_WG = [32, 64] as const;

export interface RopeFreqConfig extends Pick<ModelConfig, 'headDim' | 'ropeTheta' | 'ropeScaling'>, Partial<Pick<ModelConfig, 'rotaryDim' | 'maxPositionEmbeddings'>> {
  /** GGUF `rope_freqs.weight`: per-pair divisors replacing the config's scaling. */
  freqFactors?: Float32Array;
  /** The engine's context: picks LongRoPE's long or short factors (model/rope.ts). */
  contextLength?: number;
}

/**
 * The kernel's `invFreq[rotaryDim/2]` buffer contents: theta^(-2i/d) with HF's default, linear,
 * llama3, LongRoPE or YaRN scaling (or GGUF rope_freqs) applied. Computed by the CPU reference, then
 * rounded to f32 as HF holds `inv_freq`.
 */
export function ropeInvFreq(config: RopeFreqConfig): Float32Array {
  const { rotaryDim = null, maxPositionEmbeddings = Infinity } = config;
  return Float32Array.from(ropeInvFreqs({ ...config, rotaryDim, maxPositionEmbeddings }, config.freqFactors, config.contextLength));
}

/**
 * TypeScript reference, in place on x ([T, heads, headDim]): each head's first 2·invFreq.length
 * dimensions rotate, times `mscale`. As HF (and the kernel) do, the angle is the f32 product of
 * the position and the f32 inverse frequency; its cos/sin are then exact.
 */
export function ropeRef(
  x: Float32Array,
  positions: ArrayLike<number>,
  heads: number,
  headDim: number,
  invFreq: Float32Array,
  style: RopeStyle,
  mscale = 1,
): Float32Array {
  const half = invFreq.length;
  for (let t = 0; t < positions.length; t++) {
    for (let h = 0; h < heads; h++) {
      const base = (t * heads + h) * headDim;
      for (let i = 0; i < half; i++) {
        const angle = Math.fround(positions[t]! * invFreq[i]!);
        const [a, b] = style === 'neox' ? [base + i, base + i + half] : [base + 2 * i, base + 2 * i + 1];
        const x0 = x[a]!;
        const x1 = x[b]!;
        const [c, s] = [Math.cos(angle) * mscale, Math.sin(angle) * mscale];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
      }
    }
  }
  return x;
}

/**
 * Workgroups along x for one token: an invocation per rotated pair of every q and k head, and with
 * the cache write (`kvHeadDim`, the whole head) one per pair of elements of a token's k/v row.
 */
export function ropeWorkgroups(nHeads: number, nKv: number, rotaryDim: number, wg: number, kvHeadDim = 0): number {
  return Math.ceil(((nHeads + nKv) * rotaryDim + nKv * kvHeadDim) / 2 / wg);
}

/** Where the folded kv_write puts this step's keys and values (as createKvWriteOp). */
export interface RopeKvWrite {
  v: BufferRef; // [maxTokens, nKv, headDim] act
  slotMapping: BufferRef; // step buffer, [maxTokens] u32
  kCache: GPUBuffer; // [numPages, PAGE, nKv, headDim] act
  vCache: GPUBuffer;
}

/**
 * RoPE of this step's q and k in place, at `positions` (the step buffer); with `kv`, k (rotated)
 * and v go straight into the paged cache instead (kv_write folded in; k is left as it was).
 */
export async function createRopeOp(
  ctx: OpContext,
  args: {
    q: BufferRef;
    k: BufferRef;
    positions: BufferRef;
    /** `ropeInvFreq(config)` uploaded once at load. */
    invFreq: GPUBuffer;
    nHeads: number;
    nKv: number;
    headDim: number;
    /** Leading dimensions of a head that rotate (default the whole head). */
    rotaryDim?: number;
    /** cos and sin multiplied by it (LongRoPE's or YaRN's attention factor; default 1). */
    mscale?: number;
    style: RopeStyle;
    wg?: number;
    label?: OpLabel;
    kv?: RopeKvWrite;
  },
): Promise<Op> {
  const rotary = args.rotaryDim ?? args.headDim;
  if (rotary % 2 !== 0 || rotary > args.headDim) throw new RangeError(`RoPE rotates an even number of dimensions up to the head's ${args.headDim}, got ${rotary}`);
  const wg = args.wg ?? 64;
  const pipeline = await ctx.cache.get(ropeKernel, {
    precision: ctx.precision,
    constants: { WG: wg, STYLE: ROPE_STYLE[args.style], KV: args.kv ? 1 : 0 },
  });
  // Without kv the kernel's cache bindings still exist: 4-byte stand-ins, one each (a buffer bound
  // writable must not also be bound elsewhere in the dispatch).
  const dummies = args.kv ? [] : ['rope no v', 'rope no slotMapping', 'rope no kCache', 'rope no vCache'].map((label) => createBuffer(ctx.device, 4, STORAGE, label));
  const kv = args.kv ?? { v: dummies[0]!, slotMapping: dummies[1]!, kCache: dummies[2]!, vCache: dummies[3]! };
  const params = uploadBuffer(
    ctx.device,
    new Uint8Array(packParams([['u32', args.nHeads], ['u32', args.nKv], ['u32', args.headDim], ['u32', rotary], ['f32', args.mscale ?? 1]])),
    UNIFORM,
    'rope params',
  );
  const act = actBytes(ctx.precision);
  // Rotates the rotary part of q and k in place: each element read and written once; with kv, k's
  // and v's whole rows are read and written (to the cache) once too.
  const rowBytes = (args.nHeads + args.nKv) * rotary * act + (args.kv ? args.nKv * (args.headDim - rotary + args.headDim) * act : 0);
  const buffers = [args.q, args.k, args.positions, args.invFreq, params, kv.v, kv.slotMapping, kv.kCache, kv.vCache];
  const bindGroup = describeDispatch(bindBuffers(ctx.device, pipeline, buffers), args.label, 'rope', (rows) => 2 * rows * rowBytes);
  const x = ropeWorkgroups(args.nHeads, args.nKv, rotary, wg, args.kv ? args.headDim : 0);
  return {
    destroy: () => {
      params.destroy();
      for (const b of dummies) b.destroy();
    },
    encode(pass, tokens) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(x, tokens);
    },
  };
}
