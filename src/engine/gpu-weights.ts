/**
 * Model weights on the GPU, uploaded tensor by tensor at load (never the whole file in memory).
 * Matrices keep their file's type (dequantised in the kernels' registers); norms and biases are f32,
 * norms as applied (the config's normWeightOffset added).
 */
import type { DType } from '../formats/types';
import { STORAGE, uploadBuffer } from '../gpu/buffers';
import { uploadWeight } from '../kernels/weights';
import type { OpenedModel } from '../model/open';
import { assembleWeights, isMatrix, modelTensors, type LayerWeights, type ModelWeights } from '../model/tensors';

export interface GpuMatrix {
  buffer: GPUBuffer;
  dtype: DType;
  rows: number; // out features
  cols: number; // in features
}

/** One layer's weights, named and shaped as src/model/tensors.ts's table says (vectors are f32). */
export type GpuLayerWeights = LayerWeights<GpuMatrix, GPUBuffer>;

export interface GpuWeights extends ModelWeights<GpuMatrix, GPUBuffer> {
  /** Bytes of every matrix as the GPU holds them: what one decode step must read at least. */
  matrixBytes: number;
  destroy(): void;
}

/** Called after each tensor reaches the GPU: bytes uploaded so far and in all. */
export type UploadProgress = (name: string, bytesDone: number, bytesTotal: number) => void;

export async function uploadWeights(device: GPUDevice, opened: OpenedModel, onProgress?: UploadProgress): Promise<GpuWeights> {
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
        const buffer = uploadWeight(device, t.info.dtype, await opened.readTensor(name), name);
        all.push(buffer);
        const [rows, cols] = t.info.shape as [number, number];
        uploaded.set(name, { buffer, dtype: t.info.dtype, rows, cols });
        if (layer !== null) layerMatrixBytes += buffer.size;
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
    const matrixBytes = layerMatrixBytes + weights.output.buffer.size;
    return {
      ...weights,
      matrixBytes,
      destroy() {
        for (const b of all) b.destroy();
      },
    };
  } catch (e) {
    for (const b of all) b.destroy();
    throw e;
  }
}
