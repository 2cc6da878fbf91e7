import gluLib from '../../shaders/lib/glu.wgsl';
import body from '../../shaders/swiglu.wgsl';
import { packParams, UNIFORM, uploadBuffer, bindBuffers } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { actBytes, describeDispatch, elemBytes, rowGridOp, type Op, type OpContext, type OpLabel } from './op';

export const swigluKernel: Kernel = { name: 'swiglu', source: gluLib + body };

/** Workgroup sizes the kernel is specialised and tested at. */
export const SWIGLU_WG = [64, 128, 256] as const;

/** Where gate and up live: each a [T, stride] matrix starting at an element offset. */
export interface SwigluLayout {
  n: number;
  gateStride?: number; // default n
  upStride?: number; // default n
  gateOffset?: number; // default 0
  upOffset?: number; // default 0
}

/** The `Params` uniform of swiglu.wgsl. */
export function swigluParams(layout: SwigluLayout): ArrayBuffer {
  const { n } = layout;
  return packParams([
    ['u32', n],
    ['u32', layout.gateStride ?? n],
    ['u32', layout.upStride ?? n],
    ['u32', layout.gateOffset ?? 0],
    ['u32', layout.upOffset ?? 0],
  ]);
}

export const silu = (g: number): number => g / (1 + Math.exp(-g));
/** GELU with the tanh approximation (transformers' gelu_pytorch_tanh). */
export const geluTanh = (g: number): number => 0.5 * g * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (g + 0.044715 * g ** 3)));

/** The gate's activation: SwiGLU's silu or GeGLU's tanh-approximated GELU (the ACT specialisation). */
export type GluActivation = 'silu' | 'gelu_tanh';
/** The `override ACT` of shaders/lib/glu.wgsl for each activation. */
export const GLU_ACT: Record<GluActivation, number> = { silu: 0, gelu_tanh: 1 };
export const GLU_FN: Record<GluActivation, (g: number) => number> = { silu, gelu_tanh: geluTanh };

/** TypeScript reference: out[t, i] = act(gate[t, i]) * up[t, i] for `tokens` tokens. */
export function swigluRef(gate: Float32Array, up: Float32Array, tokens: number, layout: SwigluLayout, activation: GluActivation = 'silu'): Float32Array {
  const act = GLU_FN[activation];
  const { n } = layout;
  const [gs, us, go, uo] = [layout.gateStride ?? n, layout.upStride ?? n, layout.gateOffset ?? 0, layout.upOffset ?? 0];
  const out = new Float32Array(tokens * n);
  for (let t = 0; t < tokens; t++) {
    for (let i = 0; i < n; i++) out[t * n + i] = act(gate[go + t * gs + i]!) * up[uo + t * us + i]!;
  }
  return out;
}

/**
 * SwiGLU (or GeGLU, `activation: 'gelu_tanh'`) over `tokens` rows into `out` ([maxTokens, n] of
 * act, or f32 with `outF32`). Pass the same buffer as `gate` and `up` with offsets/strides for a
 * fused gate-up projection.
 */
export async function createSwigluOp(
  ctx: OpContext,
  args: SwigluLayout & { gate: GPUBuffer; up: GPUBuffer; out: GPUBuffer; outF32?: boolean; wg?: number; activation?: GluActivation; label?: OpLabel },
): Promise<Op> {
  const wg = args.wg ?? 64;
  const pipeline = await ctx.cache.get(swigluKernel, { precision: ctx.precision, f32: args.outF32 ? ['out_t'] : [], constants: { WG: wg, ACT: GLU_ACT[args.activation ?? 'silu'] } });
  const params = uploadBuffer(ctx.device, new Uint8Array(swigluParams(args)), UNIFORM, 'swiglu params');
  const act = actBytes(ctx.precision);
  // Reads gate and up, writes out.
  const bindGroup = describeDispatch(bindBuffers(ctx.device, pipeline, [args.gate, args.up, args.out, params]), args.label, 'swiglu', (rows) => rows * args.n * (2 * act + elemBytes(ctx.precision, args.outF32)));
  return rowGridOp(pipeline, bindGroup, params, Math.ceil(args.n / wg));
}
