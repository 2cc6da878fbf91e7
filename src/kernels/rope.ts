import source from '../../shaders/rope.wgsl';
import { packParams, UNIFORM, uploadBuffer, bindBuffers, type BufferRef } from '../gpu/buffers';
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

export interface RopeFreqConfig extends Pick<ModelConfig, 'headDim' | 'ropeTheta' | 'ropeScaling'> {
  /** GGUF `rope_freqs.weight`: per-pair divisors replacing the config's scaling. */
  freqFactors?: Float32Array;
}

/**
 * The kernel's `invFreq[headDim/2]` buffer contents: theta^(-2i/d) with HF's default, linear or
 * llama3 scaling (or GGUF rope_freqs) applied. Computed by the CPU reference, then rounded to f32
 * as HF holds `inv_freq`.
 */
export function ropeInvFreq(config: RopeFreqConfig): Float32Array {
  // ropeInvFreqs reads only headDim, ropeTheta and ropeScaling of its config.
  return Float32Array.from(ropeInvFreqs(config as ModelConfig, config.freqFactors));
}

/**
 * TypeScript reference, in place on x ([T, heads, headDim]). As HF (and the kernel) do, the angle is
 * the f32 product of the position and the f32 inverse frequency; its cos/sin are then exact.
 */
export function ropeRef(
  x: Float32Array,
  positions: ArrayLike<number>,
  heads: number,
  headDim: number,
  invFreq: Float32Array,
  style: RopeStyle,
): Float32Array {
  const half = headDim / 2;
  for (let t = 0; t < positions.length; t++) {
    for (let h = 0; h < heads; h++) {
      const base = (t * heads + h) * headDim;
      for (let i = 0; i < half; i++) {
        const angle = Math.fround(positions[t]! * invFreq[i]!);
        const [a, b] = style === 'neox' ? [base + i, base + i + half] : [base + 2 * i, base + 2 * i + 1];
        const x0 = x[a]!;
        const x1 = x[b]!;
        x[a] = x0 * Math.cos(angle) - x1 * Math.sin(angle);
        x[b] = x0 * Math.sin(angle) + x1 * Math.cos(angle);
      }
    }
  }
  return x;
}

/** Invocations along x for one token: one per rotated pair of every q and k head. */
export function ropeWorkgroups(nHeads: number, nKv: number, headDim: number, wg: number): number {
  return Math.ceil(((nHeads + nKv) * headDim) / 2 / wg);
}

/** RoPE of this step's q and k in place, at `positions` (the step buffer). */
export async function createRopeOp(
  ctx: OpContext,
  args: {
    q: GPUBuffer;
    k: GPUBuffer;
    positions: BufferRef;
    /** `ropeInvFreq(config)` uploaded once at load. */
    invFreq: GPUBuffer;
    nHeads: number;
    nKv: number;
    headDim: number;
    style: RopeStyle;
    wg?: number;
    label?: OpLabel;
  },
): Promise<Op> {
  if (args.headDim % 2 !== 0) throw new RangeError(`RoPE needs an even head dimension, got ${args.headDim}`);
  const wg = args.wg ?? 64;
  const pipeline = await ctx.cache.get(ropeKernel, {
    precision: ctx.precision,
    constants: { WG: wg, STYLE: ROPE_STYLE[args.style] },
  });
  const params = uploadBuffer(
    ctx.device,
    new Uint8Array(packParams([['u32', args.nHeads], ['u32', args.nKv], ['u32', args.headDim]])),
    UNIFORM,
    'rope params',
  );
  const act = actBytes(ctx.precision);
  // Rotates q and k in place: each read and written once.
  const rowBytes = (args.nHeads + args.nKv) * args.headDim * act;
  const bindGroup = describeDispatch(bindBuffers(ctx.device, pipeline, [args.q, args.k, args.positions, args.invFreq, params]), args.label, 'rope', (rows) => 2 * rows * rowBytes);
  const x = ropeWorkgroups(args.nHeads, args.nKv, args.headDim, wg);
  return {
    destroy: () => params.destroy(),
    encode(pass, tokens) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(x, tokens);
    },
  };
}
