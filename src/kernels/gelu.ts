import source from '../../shaders/gelu.wgsl';
import { packParams, UNIFORM, uploadBuffer, bindBuffers } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { geluTanh } from './swiglu';
import { describeDispatch, elemBytes, rowGridOp, type Op, type OpContext, type OpLabel } from './op';

export const geluKernel: Kernel = { name: 'gelu', source };

/** Workgroup sizes the kernel is specialised and tested at. */
export const GELU_WG = [64, 256] as const;

/**
 * erf in float64, independent of the shader's polynomial: its Maclaurin series below 2.5 (terms
 * fall from n ≈ x², losing at most four of sixteen digits), above it 1 − erfc by erfc's continued
 * fraction e^(−x²)/√π · 1/(x + ½/(x + 1/(x + (3/2)/(x + …)))).
 */
export function erfRef(x: number): number {
  const a = Math.abs(x);
  if (a < 2.5) {
    let term = a;
    let sum = a;
    for (let n = 1; n < 60; n++) {
      term *= (-a * a) / n;
      sum += term / (2 * n + 1);
    }
    return (Math.sign(x) * 2 * sum) / Math.sqrt(Math.PI);
  }
  let f = a;
  for (let k = 80; k >= 1; k--) f = a + k / 2 / f;
  return Math.sign(x) * (1 - Math.exp(-a * a) / Math.sqrt(Math.PI) / f);
}

/** TypeScript reference: exact GELU, 0.5 · x · (1 + erf(x / √2)), elementwise. */
export function geluRef(x: Float32Array): Float32Array {
  return x.map((v) => 0.5 * v * (1 + erfRef(v / Math.SQRT2)));
}

/** TypeScript reference of the tanh approximation (SigLIP's `gelu_pytorch_tanh`), elementwise. */
export function geluTanhRef(x: Float32Array): Float32Array {
  return x.map(geluTanh);
}

/**
 * GELU in place over `tokens` rows of `n` act elements (an encoder FFN's activation): exact (erf),
 * or with `tanh` its tanh approximation.
 */
export async function createGeluOp(ctx: OpContext, args: { x: GPUBuffer; n: number; tanh?: boolean; wg?: number; label?: OpLabel }): Promise<Op> {
  const wg = args.wg ?? 64;
  const pipeline = await ctx.cache.get(geluKernel, { precision: ctx.precision, constants: { WG: wg, ...(args.tanh ? { TANH: 1 } : {}) } });
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', args.n]])), UNIFORM, 'gelu params');
  // Reads and writes x.
  const bindGroup = describeDispatch(bindBuffers(ctx.device, pipeline, [args.x, params]), args.label, 'gelu', (rows) => rows * args.n * 2 * elemBytes(ctx.precision));
  return rowGridOp(pipeline, bindGroup, params, Math.ceil(args.n / wg));
}
