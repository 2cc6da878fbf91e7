/**
 * Model weights on the GPU, uploaded tensor by tensor at load (never the whole file in memory).
 * Matrices keep their file's type (dequantised in the kernels' registers); norms and biases are f32.
 */
import type { DType } from '../formats/types';
import { STORAGE, uploadBuffer } from '../gpu/buffers';
import { uploadWeight } from '../kernels/weights';
import type { ModelConfig } from '../model/config';
import type { OpenedModel } from '../model/open';

export interface GpuMatrix {
  buffer: GPUBuffer;
  dtype: DType;
  rows: number; // out features
  cols: number; // in features
}

export interface GpuLayerWeights {
  attnNorm: GPUBuffer; // f32 [hidden]
  wq: GpuMatrix; // [nHeads·headDim, hidden]
  wk: GpuMatrix; // [nKv·headDim, hidden]
  wv: GpuMatrix; // [nKv·headDim, hidden]
  bq?: GPUBuffer; // f32 [nHeads·headDim]
  bk?: GPUBuffer; // f32 [nKv·headDim]
  bv?: GPUBuffer; // f32 [nKv·headDim]
  qNorm?: GPUBuffer; // f32 [headDim]
  kNorm?: GPUBuffer; // f32 [headDim]
  wo: GpuMatrix; // [hidden, nHeads·headDim]
  bo?: GPUBuffer; // f32 [hidden]
  ffnNorm: GPUBuffer; // f32 [hidden]
  wGate: GpuMatrix; // [intermediate, hidden]
  wUp: GpuMatrix; // [intermediate, hidden]
  wDown: GpuMatrix; // [hidden, intermediate]
}

export interface GpuWeights {
  tokenEmbd: GpuMatrix; // [vocab, hidden]
  layers: GpuLayerWeights[];
  outputNorm: GPUBuffer; // f32 [hidden]
  output: GpuMatrix; // [vocab, hidden]; the embedding itself when tied
  /** Bytes of every matrix as the GPU holds them: what one decode step must read at least. */
  matrixBytes: number;
  destroy(): void;
}

/** Called after each tensor reaches the GPU: bytes uploaded so far and in all. */
export type UploadProgress = (name: string, bytesDone: number, bytesTotal: number) => void;

export async function uploadWeights(device: GPUDevice, opened: OpenedModel, onProgress?: UploadProgress): Promise<GpuWeights> {
  const config: ModelConfig = opened.config;
  const all: GPUBuffer[] = [];
  let bytesDone = 0;
  const bytesTotal = [...opened.tensors.values()].reduce((n, t) => n + t.info.byteLength, 0);
  const done = (name: string, bytes: number) => {
    bytesDone += bytes;
    onProgress?.(name, bytesDone, bytesTotal);
  };

  const matrix = async (name: string): Promise<GpuMatrix> => {
    const t = opened.tensors.get(name);
    if (!t) throw new Error(`missing tensor ${name}`);
    const bytes = await opened.readTensor(name);
    const buffer = uploadWeight(device, t.info.dtype, bytes, name);
    all.push(buffer);
    done(name, t.info.byteLength);
    const [rows, cols] = t.info.shape as [number, number];
    return { buffer, dtype: t.info.dtype, rows, cols };
  };
  const vector = async (name: string): Promise<GPUBuffer> => {
    const values = await opened.readTensorF32(name);
    const buffer = uploadBuffer(device, values, STORAGE, name);
    all.push(buffer);
    done(name, opened.tensors.get(name)!.info.byteLength);
    return buffer;
  };
  const optional = (name: string) => (opened.tensors.has(name) ? vector(name) : Promise.resolve(undefined));

  // Tensors one at a time, in layer order: peak JS memory is one tensor.
  const tokenEmbd = await matrix('token_embd.weight');
  const layers: GpuLayerWeights[] = [];
  for (let l = 0; l < config.numLayers; l++) {
    const p = `blk.${l}.`;
    layers.push({
      attnNorm: await vector(p + 'attn_norm.weight'),
      wq: await matrix(p + 'attn_q.weight'),
      wk: await matrix(p + 'attn_k.weight'),
      wv: await matrix(p + 'attn_v.weight'),
      bq: config.attentionBias ? await vector(p + 'attn_q.bias') : undefined,
      bk: config.attentionBias ? await vector(p + 'attn_k.bias') : undefined,
      bv: config.attentionBias ? await vector(p + 'attn_v.bias') : undefined,
      qNorm: config.qkNorm ? await vector(p + 'attn_q_norm.weight') : undefined,
      kNorm: config.qkNorm ? await vector(p + 'attn_k_norm.weight') : undefined,
      wo: await matrix(p + 'attn_output.weight'),
      bo: await optional(p + 'attn_output.bias'),
      ffnNorm: await vector(p + 'ffn_norm.weight'),
      wGate: await matrix(p + 'ffn_gate.weight'),
      wUp: await matrix(p + 'ffn_up.weight'),
      wDown: await matrix(p + 'ffn_down.weight'),
    });
  }
  const outputNorm = await vector('output_norm.weight');
  const output = opened.tensors.has('output.weight') ? await matrix('output.weight') : tokenEmbd;
  // A decode step reads every layer matrix and the whole output matrix (the embedding: one row).
  const layerMatrices = layers.flatMap((l) => [l.wq, l.wk, l.wv, l.wo, l.wGate, l.wUp, l.wDown]);
  const matrixBytes = layerMatrices.reduce((n, m) => n + m.buffer.size, 0) + output.buffer.size;

  return {
    tokenEmbd,
    layers,
    outputNorm,
    output,
    matrixBytes,
    destroy() {
      for (const b of all) b.destroy();
    },
  };
}
