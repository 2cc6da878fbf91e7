/**
 * sentence-transformers' Dense modules on the GPU (src/model/embedding.ts; reference:
 * src/reference/dense.ts): after pooling, each module's linear layer over the step's pooled rows
 * (f32 [inputs, in] -> f32 [inputs, out], in the file's weight type, with its bias), and Tanh as the
 * soft cap at 1 where the module says Tanh. The rows count is the step's number of inputs, in a
 * uniform of its own (the linear reads its row count at offset 0). Built once with the encoder.
 */
import { createBuffer, STORAGE, UNIFORM, uploadBuffer, writeBuffer } from '../../gpu/buffers';
import { createLinearOp } from '../../kernels/matmul';
import type { Op, OpContext } from '../../kernels/op';
import { createSoftcapOp } from '../../kernels/softcap';
import { uploadWeight } from '../../kernels/weights';
import type { DenseModule } from '../../model/embedding';
import type { OpenedTensor } from '../../model/open';

export interface DenseHead {
  /** The last module's output, f32 [maxSeqs, size]: what the step reads back. */
  readonly out: GPUBuffer;
  readonly size: number;
  /** Encodes the modules for `inputs` pooled rows (in a pass of its own, after the pooling). */
  encode(encoder: GPUCommandEncoder, inputs: number): void;
  destroy(): void;
}

export async function createDenseHead(
  ctx: OpContext,
  model: { tensors: Map<string, OpenedTensor>; readTensor(name: string): Promise<Uint8Array>; readTensorF32(name: string): Promise<Float32Array> },
  modules: readonly DenseModule[],
  pooled: GPUBuffer,
  maxSeqs: number,
): Promise<DenseHead> {
  const { device } = ctx;
  const owned: GPUBuffer[] = [];
  const own = (b: GPUBuffer) => (owned.push(b), b);
  const rows = own(createBuffer(device, 16, UNIFORM, 'dense rows'));
  const ops: Op[] = [];
  let x = pooled;
  for (const m of modules) {
    const y = own(createBuffer(device, maxSeqs * m.outFeatures * 4, STORAGE, `${m.name} out`));
    const dtype = model.tensors.get(`${m.name}.weight`)!.info.dtype;
    ops.push(
      await createLinearOp(ctx, {
        weight: own(uploadWeight(device, dtype, await model.readTensor(`${m.name}.weight`), m.inFeatures, `${m.name}.weight`)),
        dtype, n: m.outFeatures, k: m.inFeatures, x, y, xF32: true, yF32: true, step: rows, maxTokens: maxSeqs,
        ...(m.bias ? { bias: own(uploadBuffer(device, await model.readTensorF32(`${m.name}.bias`), STORAGE, `${m.name}.bias`)) } : {}),
      }),
    );
    // tanh(v) = tanh(v / 1) * 1: the soft cap at 1, in place.
    if (m.activation === 'tanh') ops.push(await createSoftcapOp(ctx, { x: y, n: m.outFeatures, cap: 1 }));
    x = y;
  }
  return {
    out: x,
    size: modules.at(-1)?.outFeatures ?? 0,
    encode(encoder, inputs) {
      writeBuffer(device, rows, 0, new Uint32Array([inputs, 0, 0, 0]));
      const pass = encoder.beginComputePass();
      for (const op of ops) op.encode(pass, inputs);
      pass.end();
    },
    destroy() {
      for (const op of ops) op.destroy();
      for (const b of owned) b.destroy();
    },
  };
}
