/**
 * Model weights on the GPU, uploaded tensor by tensor at load (never the whole file in memory).
 * Matrices keep their file's type (dequantised in the kernels' registers); norms and biases are f32,
 * norms as applied (the config's normWeightOffset added). A matrix larger than one binding (or
 * buffer) the device grants is split by rows into parts (the embedding of most models from 0.5B up
 * exceeds WebGPU's default 128 MiB binding); the kernels take the parts (src/kernels/weights.ts).
 */
import type { DType } from '../formats/types';
import { STORAGE, uploadBuffer } from '../gpu/buffers';
import { WebGPUError } from '../gpu/errors';
import { gpuBytesPerRow, uploadWeightParts, type WeightPart } from '../kernels/weights';
import type { OpenedModel } from '../model/open';
import { assembleWeights, isMatrix, modelTensors, type LayerWeights, type ModelWeights } from '../model/tensors';

export interface GpuMatrix {
  /** Row parts in order: one part holding every row unless the matrix exceeds the binding limit. */
  parts: WeightPart[];
  dtype: DType;
  rows: number; // out features (of one expert, for a stack of experts)
  cols: number; // in features
  /** Experts stacked outermost ([experts, rows, cols]: one expert's rows after another's); absent for a plain matrix. */
  experts?: number;
}

/** One layer's weights, named and shaped as src/model/tensors.ts's table says (vectors are f32). */
export type GpuLayerWeights = LayerWeights<GpuMatrix, GPUBuffer>;

export interface GpuWeights extends ModelWeights<GpuMatrix, GPUBuffer> {
  /** Bytes of every matrix as the GPU holds them: what one decode step must read at least. */
  matrixBytes: number;
  /** Bytes of every weight buffer (matrices and vectors). */
  bytes: number;
  destroy(): void;
}

/** Called after each tensor reaches the GPU: bytes uploaded so far and in all. */
export type UploadProgress = (name: string, bytesDone: number, bytesTotal: number) => void;

/**
 * Bytes one weight buffer may hold on a device with these limits: a binding can be no larger than
 * its buffer, so the smaller of the two.
 */
export function maxWeightPartBytes(limits: Pick<GPUSupportedLimits, 'maxStorageBufferBindingSize' | 'maxBufferSize'>): number {
  return Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
}

/**
 * Uploads the model's weights; matrices larger than `maxPartBytes` (default: no limit) go up as
 * row parts. Refuses before uploading anything when a single row of a matrix is larger.
 */
export async function uploadWeights(device: GPUDevice, opened: OpenedModel, onProgress?: UploadProgress, maxPartBytes = Infinity): Promise<GpuWeights> {
  for (const { row, name } of modelTensors(opened.config)) {
    const t = opened.tensors.get(name);
    if (!row.field || !t || !isMatrix(row.kind)) continue;
    const shape = t.info.shape;
    const rowBytes = gpuBytesPerRow(t.info.dtype, shape[shape.length - 1]!);
    if (rowBytes > maxPartBytes) {
      throw new WebGPUError(
        'limits_too_small',
        `One row of ${name} is ${rowBytes} bytes but this GPU's storage bindings hold ${maxPartBytes}: choose a smaller model or a more quantised file.`,
        { needed: rowBytes, allowed: maxPartBytes, tensor: name },
      );
    }
    // The routed kernel binds a whole stack of experts: it must fit one binding (no row parts).
    const stackBytes = rowBytes * shape.slice(0, -1).reduce((a, b) => a * b, 1);
    if (row.experts && stackBytes > maxPartBytes) {
      throw new WebGPUError(
        'limits_too_small',
        `The experts of ${name} take ${stackBytes} bytes but this GPU's storage bindings hold ${maxPartBytes}: choose a more quantised file.`,
        { needed: stackBytes, allowed: maxPartBytes, tensor: name },
      );
    }
  }
  const all: GPUBuffer[] = [];
  let bytesDone = 0;
  const bytesTotal = [...opened.tensors.values()].reduce((n, t) => n + t.info.byteLength, 0);

  // Tensors one at a time, in file order: peak JS memory is one tensor.
  const uploaded = new Map<string, GpuMatrix | GPUBuffer>();
  // A decode step reads every layer matrix and the whole output matrix (the embedding: one row).
  let layerMatrixBytes = 0;
  try {
    for (const { row, layer, name } of modelTensors(opened.config)) {
      const t = opened.tensors.get(name);
      if (!row.field || !t) continue;
      if (isMatrix(row.kind)) {
        // A stack of experts ([experts, rows, cols]) goes up as one matrix of experts · rows rows, in
        // one part: the routed kernel binds the whole stack (checked against the limit above).
        const shape = t.info.shape;
        const [rows, cols] = shape.slice(-2) as [number, number];
        const experts = shape.length === 3 ? shape[0]! : undefined;
        const parts = uploadWeightParts(device, t.info.dtype, await opened.readTensor(name), { rows: rows * (experts ?? 1), cols }, experts ? Number.MAX_SAFE_INTEGER : maxPartBytes, name);
        all.push(...parts.map((p) => p.buffer));
        uploaded.set(name, { parts, dtype: t.info.dtype, rows, cols, ...(experts ? { experts } : {}) });
        // A decode step reads k of a stack's experts, not all of them.
        const moe = opened.config.moe;
        if (layer !== null) layerMatrixBytes += experts && moe ? (bytesOf(parts) * moe.numExpertsUsed) / moe.numExperts : bytesOf(parts);
      } else {
        const values = await opened.readTensorF32(name);
        // Norm weights as applied: offset + w (Gemma's checkpoints store w of 1 + w).
        const offset = row.kind === 'norm' ? opened.config.normWeightOffset : 0;
        const buffer = uploadBuffer(device, offset === 0 ? values : values.map((v) => v + offset), STORAGE, name);
        all.push(buffer);
        uploaded.set(name, buffer);
      }
      bytesDone += t.info.byteLength;
      onProgress?.(name, bytesDone, bytesTotal);
    }
    const weights = assembleWeights<GpuMatrix, GPUBuffer>(opened.config, (t) => uploaded.get(t.name));
    const matrixBytes = layerMatrixBytes + bytesOf(weights.output.parts);
    return {
      ...weights,
      matrixBytes,
      bytes: all.reduce((n, b) => n + b.size, 0),
      destroy() {
        for (const b of all) b.destroy();
      },
    };
  } catch (e) {
    for (const b of all) b.destroy();
    throw e;
  }
}

function bytesOf(parts: readonly WeightPart[]): number {
  return parts.reduce((n, p) => n + p.buffer.size, 0);
}
