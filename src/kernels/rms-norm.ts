import source from '../../shaders/rms_norm.wgsl';
import type { Kernel } from '../gpu/pipelines';

export const rmsNormKernel: Kernel = { name: 'rms_norm', source };

/** Workgroup sizes the kernel is specialised and tested at (a power of two: the reduction halves). */
export const RMS_NORM_WG = [32, 64, 128, 256] as const;

/** TypeScript reference: RMSNorm of each row of `x` ([rows, n]) with weight `w` ([n]). */
export function rmsNormRef(x: Float32Array, w: Float32Array, rows: number, n: number, eps: number): Float32Array {
  const y = new Float32Array(rows * n);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let i = 0; i < n; i++) ss += x[r * n + i]! ** 2;
    const scale = 1 / Math.sqrt(ss / n + eps);
    for (let i = 0; i < n; i++) y[r * n + i] = x[r * n + i]! * scale * w[i]!;
  }
  return y;
}
