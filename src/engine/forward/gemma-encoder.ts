/**
 * EmbeddingGemma on the GPU: a gemma3 text model with `use_bidirectional_attention`, read as the
 * CPU reference reads it (src/reference/bidirectional.ts), over a batch of inputs at once, each a
 * sequence of its own for the attention and the pooling:
 *   x = token_embd[id] · √hidden                       (on the CPU: a gather, uploaded as the step's f32 rows)
 *   per layer (sandwich norms, (1 + w) RMSNorms):
 *     q, k, v = linears of norm(x); per-head q/k norms; RoPE at in-sequence positions (local base on local layers)
 *     x += post_attention_norm(o(attn(q, k, v)))      attention both ways; local layers see half the window each side
 *     x += post_ffw_norm(down(geglu(gate(norm(x)), up(norm(x)))))
 *   output_norm, the mean of each input's rows (pool_mean), the Dense modules (./dense.ts), L2 on the CPU.
 * The stream is f32 at every precision; the matrices stay in the file's type. Norm weights are
 * uploaded as applied (the config's normWeightOffset added, as engine/gpu-weights.ts does).
 * Everything is built once for steps of up to `maxTokens` tokens and `maxSeqs` inputs.
 */
import { createBuffer, STORAGE, UNIFORM, uploadBuffer, writeBuffer } from '../../gpu/buffers';
import { createEncoderAttentionOp } from '../../kernels/attention-encoder';
import { createLinearOp } from '../../kernels/matmul';
import { actBytes, type Op, type OpContext } from '../../kernels/op';
import { createPoolMeanOp } from '../../kernels/pool-mean';
import { createRmsNormOp } from '../../kernels/rms-norm';
import { createRopeOp, ropeInvFreq } from '../../kernels/rope';
import { createSwigluOp } from '../../kernels/swiglu';
import { uploadWeight } from '../../kernels/weights';
import { attentionScale, layerBlocks, layerRope, layerUsesRope, layerWindow, type ModelConfig } from '../../model/config';
import { ModelError } from '../../model/errors';
import type { OpenedModel } from '../../model/open';
import { ropeAttentionFactor } from '../../model/rope';
import { createDenseHead, type DenseHead } from './dense';
import { embedInSteps, finishStep } from './encoder-steps';

/** Why a bidirectional config is beyond this encoder (EmbeddingGemma's own is not), or null. */
export function gemmaEncoderRefusal(c: ModelConfig): string | null {
  if (c.attnLogitSoftcap !== null) return 'attention logit soft-capping';
  if (c.qkNorm && c.qkNormScope === 'full') return 'whole-row q/k norms';
  if (c.attentionBias) return 'attention biases';
  if (c.embedding?.pooling !== 'mean') return `${c.embedding?.pooling ?? 'no'} pooling`;
  for (let l = 0; l < c.numLayers; l++) {
    const b = layerBlocks(c, l);
    if (b.mixer !== 'attention' || b.ffn !== 'mlp' || c.attnOutputGate) return `layer ${l}'s blocks`;
  }
  return null;
}

export class GpuGemmaEncoder {
  /** Steps run since it was built (the host's stats). */
  steps = 0;

  private constructor(
    private readonly ctx: OpContext,
    readonly config: ModelConfig,
    readonly maxTokens: number,
    readonly maxSeqs: number,
    private readonly tokenEmbd: Float32Array,
    private readonly stream: GPUBuffer,
    private readonly counts: GPUBuffer,
    private readonly lastToken: GPUBuffer,
    private readonly positions: GPUBuffer,
    private readonly pooled: GPUBuffer,
    private readonly ops: Op[],
    private readonly pool: Op,
    private readonly owned: GPUBuffer[],
    private readonly dense: DenseHead | null,
  ) {}

  static async create(ctx: OpContext, model: OpenedModel, maxTokens: number, maxSeqs: number): Promise<GpuGemmaEncoder> {
    const { device } = ctx;
    const c = model.config;
    const why = gemmaEncoderRefusal(c);
    if (why) throw new ModelError('unsupported_arch', `${c.arch}: the bidirectional encoder does not run ${why}`, 'use_bidirectional_attention');
    const T = maxTokens;
    const { hiddenSize: d, intermediateSize: f, numHeads: nH, numKvHeads: nKv, headDim: D } = c;
    const act = actBytes(ctx.precision);
    const owned: GPUBuffer[] = [];
    const own = (b: GPUBuffer) => (owned.push(b), b);
    const buf = (bytes: number, label: string) => own(createBuffer(device, bytes, STORAGE, label));
    const has = (name: string) => model.tensors.has(name);
    const normW = async (name: string) => own(uploadBuffer(device, (await model.readTensorF32(name)).map((w) => w + c.normWeightOffset), STORAGE, name));

    const x = buf(T * d * 4, 'gemma enc x'); // f32 [T, d]: the step's input rows, then the stream
    const xn = buf(T * d * act, 'gemma enc x normed');
    const xb = buf(T * d * 4, 'gemma enc block out'); // f32 [T, d]: a block's output before its post-norm
    const q = buf(T * nH * D * act, 'gemma enc q');
    const k = buf(T * nKv * D * act, 'gemma enc k');
    const v = buf(T * nKv * D * act, 'gemma enc v');
    const qn = buf(T * nH * D * act, 'gemma enc q normed');
    const kn = buf(T * nKv * D * act, 'gemma enc k normed');
    const att = buf(T * nH * D * act, 'gemma enc attn');
    const gate = buf(T * f * act, 'gemma enc gate');
    const up = buf(T * f * act, 'gemma enc up');
    const h = buf(T * f * act, 'gemma enc ffn');
    const out = buf(T * d * 4, 'gemma enc out'); // f32 [T, d]: the final norm's rows
    const pooled = buf(maxSeqs * d * 4, 'gemma enc pooled');
    const counts = own(createBuffer(device, 16, UNIFORM, 'gemma enc counts')); // u32 {T, S}
    const lastToken = buf(maxSeqs * 4, 'gemma enc last tokens');
    const positions = buf(T * 4, 'gemma enc positions');
    const invFreq = own(uploadBuffer(device, ropeInvFreq(c), STORAGE, 'gemma enc inv freq'));
    const invFreqLocal = c.ropeLocalTheta === null ? invFreq : own(uploadBuffer(device, ropeInvFreq({ ...c, ropeTheta: c.ropeLocalTheta, ropeScaling: null }), STORAGE, 'gemma enc inv freq local'));

    const common = { step: counts, maxTokens: T };
    const linear = async (name: string, from: GPUBuffer, to: GPUBuffer, n: number, kk: number, yF32 = false) => {
      const info = model.tensors.get(`${name}.weight`)!.info;
      const weight = own(uploadWeight(device, info.dtype, await model.readTensor(`${name}.weight`), kk, name));
      const bias = has(`${name}.bias`) ? own(uploadBuffer(device, await model.readTensorF32(`${name}.bias`), STORAGE, `${name}.bias`)) : undefined;
      return createLinearOp(ctx, { ...common, weight, dtype: info.dtype, n, k: kk, ...(bias ? { bias } : {}), x: from, y: to, ...(yF32 ? { yF32: true } : {}) });
    };
    const preNorm = async (name: string) => createRmsNormOp(ctx, { x, xF32: true, weight: await normW(name), y: xn, n: d, maxTokens: T, eps: c.rmsNormEps });
    // The post-norm adds residualScale · norm(block out) into the stream in one dispatch.
    const postNorm = async (name: string) =>
      createRmsNormOp(ctx, { x: xb, xF32: true, weight: await normW(name), y: x, yF32: true, add: { scale: c.residualScale }, n: d, maxTokens: T, eps: c.rmsNormEps });

    const ops: Op[] = [];
    for (let l = 0; l < c.numLayers; l++) {
      const p = `blk.${l}`;
      ops.push(await preNorm(`${p}.attn_norm.weight`));
      ops.push(await linear(`${p}.attn_q`, xn, q, nH * D, d));
      ops.push(await linear(`${p}.attn_k`, xn, k, nKv * D, d));
      ops.push(await linear(`${p}.attn_v`, xn, v, nKv * D, d));
      const qkNorm = c.qkNorm && has(`${p}.attn_q_norm.weight`);
      if (qkNorm) {
        ops.push(await createRmsNormOp(ctx, { x: q, weight: await normW(`${p}.attn_q_norm.weight`), y: qn, n: D, rowsPerToken: nH, maxTokens: T, eps: c.rmsNormEps }));
        ops.push(await createRmsNormOp(ctx, { x: k, weight: await normW(`${p}.attn_k_norm.weight`), y: kn, n: D, rowsPerToken: nKv, maxTokens: T, eps: c.rmsNormEps }));
      }
      const [qq, kk] = qkNorm ? [qn, kn] : [q, k];
      if (layerUsesRope(c, l))
        ops.push(await createRopeOp(ctx, { q: qq, k: kk, positions, invFreq: layerRope(c, l) === 'local' ? invFreqLocal : invFreq, nHeads: nH, nKv, headDim: D, rotaryDim: c.rotaryDim ?? D, mscale: ropeAttentionFactor(c), style: c.ropeStyle }));
      // A local layer's window W: floor(W / 2) keys each side (reference/bidirectional.ts symmetricWindowSees).
      const window = layerWindow(c, l);
      ops.push(await createEncoderAttentionOp(ctx, { q: qq, k: kk, v, out: att, lastToken, counts, nHeads: nH, nKv, headDim: D, scale: attentionScale(c), halfWindow: window === null ? 0 : Math.floor(window / 2) }));
      ops.push(await linear(`${p}.attn_output`, att, xb, d, nH * D, true));
      ops.push(await postNorm(`${p}.post_attention_norm.weight`));
      ops.push(await preNorm(`${p}.ffn_norm.weight`));
      ops.push(await linear(`${p}.ffn_gate`, xn, gate, f, d));
      ops.push(await linear(`${p}.ffn_up`, xn, up, f, d));
      ops.push(await createSwigluOp(ctx, { gate, up, out: h, n: f, activation: c.ffnActivation }));
      ops.push(await linear(`${p}.ffn_down`, h, xb, d, f, true));
      ops.push(await postNorm(`${p}.post_ffw_norm.weight`));
    }
    ops.push(await createRmsNormOp(ctx, { x, xF32: true, weight: await normW('output_norm.weight'), y: out, yF32: true, n: d, maxTokens: T, eps: c.rmsNormEps }));
    const pool = await createPoolMeanOp(ctx, { x: out, lastToken, y: pooled, n: d, xF32: true });
    const denseModules = c.embedding?.dense ?? [];
    const dense = denseModules.length ? await createDenseHead(ctx, model, denseModules, pooled, maxSeqs) : null;
    const tokenEmbd = await model.readTensorF32('token_embd.weight');
    return new GpuGemmaEncoder(ctx, c, maxTokens, maxSeqs, tokenEmbd, x, counts, lastToken, positions, pooled, ops, pool, owned, dense);
  }

  /** Each input's embedding (float32, L2-normalised), in steps as GpuBertEncoder's. */
  embed(inputs: readonly (readonly number[])[]): Promise<Float32Array[]> {
    return embedInSteps(inputs, { maxTokens: this.maxTokens, maxSeqs: this.maxSeqs, maxLength: this.config.maxPositionEmbeddings }, (batch) => this.step(batch));
  }

  private async step(batch: readonly (readonly number[])[]): Promise<Float32Array[]> {
    this.steps++;
    const { device } = this.ctx;
    const c = this.config;
    const d = c.hiddenSize;
    const T = batch.reduce((n, ids) => n + ids.length, 0);
    const rows = new Float32Array(T * d);
    const pos = new Uint32Array(T);
    const last = new Uint32Array(batch.length);
    let t = 0;
    batch.forEach((ids, s) => {
      ids.forEach((id, p) => {
        if (!(Number.isInteger(id) && id >= 0 && id < c.vocabSize)) throw new RangeError(`token id ${id} is outside the vocabulary (${c.vocabSize})`);
        for (let i = 0; i < d; i++) rows[(t + p) * d + i] = this.tokenEmbd[id * d + i]! * c.embeddingScale;
        pos[t + p] = p;
      });
      t += ids.length;
      last[s] = t - 1;
    });
    writeBuffer(device, this.stream, 0, rows);
    writeBuffer(device, this.positions, 0, pos);
    writeBuffer(device, this.counts, 0, new Uint32Array([T, batch.length, 0, 0]));
    writeBuffer(device, this.lastToken, 0, last);
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    for (const op of this.ops) op.encode(pass, T);
    this.pool.encode(pass, batch.length);
    pass.end();
    return finishStep(device, encoder, this.pooled, this.dense, batch.length, d);
  }

  /** GPU bytes the encoder allocated (weights, activations, staging). */
  get bytes(): number {
    return this.owned.reduce((n, b) => n + b.size, 0);
  }

  destroy(): void {
    for (const op of this.ops) op.destroy();
    this.pool.destroy();
    this.dense?.destroy();
    for (const b of this.owned) b.destroy();
  }
}
