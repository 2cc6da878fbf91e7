import type { PipelineCache, Precision } from '../gpu/pipelines';

/** What every op builder needs: the device, the shared pipeline cache and the activation precision. */
export interface OpContext {
  device: GPUDevice;
  cache: PipelineCache;
  precision: Precision;
  /** The adapter runs on the CPU (SwiftShader): ops pick specialisations that suit it. */
  emulated?: boolean;
}

/** A prepared dispatch sequence: pipelines and bind groups were made at load; `encode` only records. */
export interface Op {
  encode(pass: GPUComputePassEncoder, tokens: number): void;
  /** Frees the buffers the op created (never its inputs and outputs, which its caller owns). */
  destroy(): void;
}

/** Bytes per activation element at a precision. */
export function actBytes(precision: Precision): number {
  return precision === 'f16' ? 2 : 4;
}
