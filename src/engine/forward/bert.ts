/**
 * A BERT encoder on the GPU (src/model/bert.ts), read as the CPU reference reads it
 * (src/reference/bert.ts), over a batch of inputs at once, each input a sequence of its own for
 * the bidirectional attention and the pooling:
 *   x = word[id] + position[p] + tokenType[0]            (on the CPU: a gather, uploaded as the step's f32 rows)
 *   x = LayerNorm(x)
 *   per layer (post-norm):  x = LN(x + o(attn(q, k, v of x)));  x = LN(x + down(gelu(up(x))))
 *   mean of each input's rows (pool_mean), or its first row ([CLS] pooling: bge),
 *   the Dense modules where the model has them (./dense.ts), then L2 on the CPU.
 * The stream is f32 at every precision and ping-pongs between two buffers (a LayerNorm cannot
 * write the buffer it reads); the linears read it as f32 and add their output into it. The
 * matrices stay in the file's type (F32, F16, Q8_0, ...). The word table is held on the CPU as f32
 * for the gather; the positions and token types are small. Everything is built once for steps of
 * up to `maxTokens` tokens and `maxSeqs` inputs: buffers, pipelines, bind groups.
 */
import { createBuffer, STORAGE, UNIFORM, uploadBuffer, writeBuffer } from '../../gpu/buffers';
import { createEncoderAttentionOp } from '../../kernels/attention-encoder';
import { createGeluOp } from '../../kernels/gelu';
import { createLayerNormOp } from '../../kernels/layer-norm';
import { createLinearOp } from '../../kernels/matmul';
import { actBytes, type Op, type OpContext } from '../../kernels/op';
import { createDenseHead, type DenseHead } from './dense';
import { embedInSteps, finishStep } from './encoder-steps';
import { createPoolMeanOp } from '../../kernels/pool-mean';
import { uploadWeight } from '../../kernels/weights';
import type { BertConfig } from '../../model/bert';
import type { OpenedEncoder } from '../../model/encoder-open';

export class GpuBertEncoder {
  private constructor(
    private readonly ctx: OpContext,
    readonly config: BertConfig,
    readonly maxTokens: number,
    readonly maxSeqs: number,
    private readonly table: { word: Float32Array; pos: Float32Array; type: Float32Array },
    private readonly input: GPUBuffer,
    /** The stream after the last layer (f32 [T, d]). */
    private readonly output: GPUBuffer,
    private readonly counts: GPUBuffer,
    private readonly lastToken: GPUBuffer,
    private readonly pooled: GPUBuffer,
    private readonly ops: Op[],
    /** Mean pooling; null: [CLS] pooling, a copy of each input's first row. */
    private readonly pool: Op | null,
    private readonly owned: GPUBuffer[],
    /** sentence-transformers' Dense modules after pooling (./dense.ts); null: none. */
    private readonly dense: DenseHead | null,
  ) {}

  /** Builds the encoder from an opened model for steps of up to `maxTokens` tokens in up to `maxSeqs` inputs. */
  static async create(ctx: OpContext, model: OpenedEncoder, maxTokens: number, maxSeqs: number): Promise<GpuBertEncoder> {
    const { device } = ctx;
    const c = model.config;
    const T = maxTokens;
    const d = c.hiddenSize;
    const f = c.intermediateSize;
    const act = actBytes(ctx.precision);
    const owned: GPUBuffer[] = [];
    const own = (b: GPUBuffer) => (owned.push(b), b);
    const buf = (bytes: number, label: string) => own(createBuffer(device, bytes, STORAGE, label));
    const f32 = async (name: string) => own(uploadBuffer(device, await model.readTensorF32(name), STORAGE, name));
    const matrix = async (name: string, cols: number) => own(uploadWeight(device, model.tensors.get(name)!.info.dtype, await model.readTensor(name), cols, name));

    const a = buf(T * d * 4, 'bert x a'); // f32 [T, d]: the step's input rows, then the stream
    const b = buf(T * d * 4, 'bert x b'); // f32 [T, d]
    const q = buf(T * d * act, 'bert q');
    const k = buf(T * d * act, 'bert k');
    const v = buf(T * d * act, 'bert v');
    const att = buf(T * d * act, 'bert attn');
    const ffn = buf(T * f * act, 'bert ffn'); // act [T, f]
    const pooled = buf(maxSeqs * d * 4, 'bert pooled'); // f32 [S, d]
    // u32 {T, S}: the step's tokens (the linears read T at offset 0) and inputs.
    const counts = own(createBuffer(device, 16, UNIFORM, 'bert counts'));
    const lastToken = buf(maxSeqs * 4, 'bert last tokens');

    const common = { step: counts, maxTokens: T };
    const norm = async (name: string, from: GPUBuffer, to: GPUBuffer) =>
      createLayerNormOp(ctx, { x: from, weight: await f32(`${name}.weight`), bias: await f32(`${name}.bias`), y: to, n: d, maxTokens: T, eps: c.layerNormEps, xF32: true, yF32: true });
    const linear = async (name: string, from: GPUBuffer, to: GPUBuffer, n: number, kk: number, opts: { xF32?: boolean; residual?: boolean } = {}) => {
      const dtype = model.tensors.get(`${name}.weight`)!.info.dtype;
      return createLinearOp(ctx, {
        ...common, weight: await matrix(`${name}.weight`, kk), dtype, n, k: kk, bias: await f32(`${name}.bias`), x: from, y: to,
        ...(opts.xF32 ? { xF32: true } : {}), ...(opts.residual ? { yF32: true, residual: true } : {}),
      });
    };
    const ops: Op[] = [];
    ops.push(await norm('token_embd_norm', a, b));
    for (let l = 0; l < c.numLayers; l++) {
      const p = `blk.${l}`;
      // attention: x (in b) = LN(x + o(attn)), written to a, then the FFN back into b
      ops.push(await linear(`${p}.attn_q`, b, q, d, d, { xF32: true }));
      ops.push(await linear(`${p}.attn_k`, b, k, d, d, { xF32: true }));
      ops.push(await linear(`${p}.attn_v`, b, v, d, d, { xF32: true }));
      ops.push(await createEncoderAttentionOp(ctx, { q, k, v, out: att, lastToken, counts, nHeads: c.numHeads, nKv: c.numHeads, headDim: d / c.numHeads }));
      ops.push(await linear(`${p}.attn_output`, att, b, d, d, { residual: true }));
      ops.push(await norm(`${p}.attn_output_norm`, b, a));
      ops.push(await linear(`${p}.ffn_up`, a, ffn, f, d, { xF32: true }));
      ops.push(await createGeluOp(ctx, { x: ffn, n: f }));
      ops.push(await linear(`${p}.ffn_down`, ffn, a, d, f, { residual: true }));
      ops.push(await norm(`${p}.layer_output_norm`, a, b));
    }
    // [CLS] pooling (bge) copies each input's first row out of the stream instead (see `step`).
    const pool = model.embedding.pooling === 'mean' ? await createPoolMeanOp(ctx, { x: b, lastToken, y: pooled, n: d, xF32: true }) : null;
    if (model.embedding.pooling !== 'mean' && model.embedding.pooling !== 'cls') throw new RangeError(`a BERT encoder pools by mean or [CLS], not by ${model.embedding.pooling}`);
    const table = { word: await model.readTensorF32('token_embd.weight'), pos: await model.readTensorF32('position_embd.weight'), type: await model.readTensorF32('token_types.weight') };
    const dense = model.embedding.dense?.length ? await createDenseHead(ctx, model, model.embedding.dense, pooled, maxSeqs) : null;
    return new GpuBertEncoder(ctx, c, maxTokens, maxSeqs, table, a, b, counts, lastToken, pooled, ops, pool, owned, dense);
  }

  /**
   * Each input's embedding: the mean of its last layer's rows (or its [CLS] row), L2-normalised (float32). Inputs go
   * in steps of up to maxTokens tokens and maxSeqs inputs, in order; each must fit one step.
   */
  async embed(inputs: readonly (readonly number[])[]): Promise<Float32Array[]> {
    return embedInSteps(inputs, { maxTokens: this.maxTokens, maxSeqs: this.maxSeqs, maxLength: this.config.maxPositionEmbeddings }, (batch) => this.step(batch));
  }

  /** Steps run since it was built (the host's stats). */
  steps = 0;

  private async step(batch: readonly (readonly number[])[]): Promise<Float32Array[]> {
    this.steps++;
    const { device } = this.ctx;
    const d = this.config.hiddenSize;
    const { word, pos, type } = this.table;
    const T = batch.reduce((n, ids) => n + ids.length, 0);
    // Word + position + token type (segment A) of each token, positions counted within its input.
    const rows = new Float32Array(T * d);
    const last = new Uint32Array(batch.length);
    let t = 0;
    batch.forEach((ids, s) => {
      ids.forEach((id, p) => {
        if (!(id >= 0 && id < this.config.vocabSize)) throw new RangeError(`token id ${id} is outside the vocabulary (${this.config.vocabSize})`);
        for (let i = 0; i < d; i++) rows[(t + p) * d + i] = word[id * d + i]! + pos[p * d + i]! + type[i]!;
      });
      t += ids.length;
      last[s] = t - 1;
    });
    writeBuffer(device, this.input, 0, rows);
    writeBuffer(device, this.counts, 0, new Uint32Array([T, batch.length, 0, 0]));
    writeBuffer(device, this.lastToken, 0, last);
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    for (const op of this.ops) op.encode(pass, T);
    this.pool?.encode(pass, batch.length);
    pass.end();
    if (!this.pool) batch.forEach((_, s) => encoder.copyBufferToBuffer(this.output, (last[s]! + 1 - batch[s]!.length) * d * 4, this.pooled, s * d * 4, d * 4));
    return finishStep(device, encoder, this.pooled, this.dense, batch.length, d);
  }

  /** GPU bytes the encoder allocated (weights, activations, staging). */
  get bytes(): number {
    return this.owned.reduce((n, b) => n + b.size, 0);
  }

  destroy(): void {
    for (const op of this.ops) op.destroy();
    this.pool?.destroy();
    this.dense?.destroy();
    for (const b of this.owned) b.destroy();
  }
}
