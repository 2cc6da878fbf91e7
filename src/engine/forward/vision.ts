/**
 * The vision tower on the GPU (SmolVLM's: SigLIP encoder + Idefics3 connector), read as
 * `ReferenceVisionTower.embedTile` reads (src/reference/vision.ts), over a batch of tiles at once,
 * each tile a sequence of its own for the bidirectional attention:
 *   patches (im2col on the CPU) · patch weights + bias, + positions
 *   per layer: x += out(attn(q, k, v of LN1(x))); x += fc2(gelu_tanh(fc1(LN2(x))))
 *   post-LN, then the projection of each s × s block.
 * The pixel shuffle costs nothing: the encoder treats tokens alike but for their positions, so the
 * patches go in already in the shuffled order (each s × s block's patches together, row by row)
 * with their positions permuted to match, and the post-LN rows of a block are then one row of the
 * projection's input. The stream is f32 at every precision, as the text model's.
 * Everything is built once: buffers for `maxTiles` tiles, pipelines, bind groups.
 */
import { f32ArrayToF16 } from '../../formats/halfs';
import { createBuffer, READBACK, STORAGE, UNIFORM, uploadBuffer, writeBuffer } from '../../gpu/buffers';
import { createAddOp } from '../../kernels/add';
import { createEncoderAttentionOp } from '../../kernels/attention-encoder';
import { createGeluOp } from '../../kernels/gelu';
import { createLayerNormOp } from '../../kernels/layer-norm';
import { createLinearOp } from '../../kernels/matmul';
import { actBytes, type Op, type OpContext } from '../../kernels/op';
import { uploadWeight } from '../../kernels/weights';
import { patchesPerSide, tokensPerTile, towerTensors, type VisionTowerConfig } from '../../vision/tower';

/** Patch order within a tile: the (i, j, dy, dx) order of Idefics3's pixel shuffle; entry t is the row-major patch index. */
export function shuffledPatchOrder(side: number, s: number): Uint32Array {
  const m = side / s;
  const order = new Uint32Array(side * side);
  let t = 0;
  for (let i = 0; i < m; i++) for (let j = 0; j < m; j++) for (let dy = 0; dy < s; dy++) for (let dx = 0; dx < s; dx++) order[t++] = (i * s + dy) * side + j * s + dx;
  return order;
}

export class GpuVisionTower {
  private readonly buffers: GPUBuffer[] = [];
  private constructor(
    private readonly ctx: OpContext,
    readonly config: VisionTowerConfig,
    readonly maxTiles: number,
    private readonly order: Uint32Array,
    private readonly patches: GPUBuffer,
    private readonly counts: GPUBuffer,
    private readonly projCounts: GPUBuffer,
    private readonly lastToken: GPUBuffer,
    private readonly out: GPUBuffer,
    /** The embeddings' way back to the CPU, made once (a batch's readback allocates nothing). */
    private readonly staging: GPUBuffer,
    private readonly ops: Op[],
    owned: GPUBuffer[],
  ) {
    this.buffers = owned;
  }

  /** Builds the tower from its float32 weights (canonical names) for batches of up to `maxTiles` tiles. */
  static async create(ctx: OpContext, c: VisionTowerConfig, weights: ReadonlyMap<string, Float32Array>, maxTiles: number): Promise<GpuVisionTower> {
    const { device } = ctx;
    const side = patchesPerSide(c);
    const N = side * side;
    const T = maxTiles * N;
    const d = c.hiddenSize;
    const f = c.intermediateSize;
    const kPatch = 3 * c.patchSize * c.patchSize;
    const act = actBytes(ctx.precision);
    const owned: GPUBuffer[] = [];
    const buf = (bytes: number, label: string) => {
      const b = createBuffer(device, bytes, STORAGE, label);
      owned.push(b);
      return b;
    };
    const w = (name: string) => {
      const v = weights.get(name);
      if (!v) throw new Error(`vision tower: ${name} is missing`);
      return v;
    };
    const f32 = (name: string) => {
      const b = uploadBuffer(device, w(name), STORAGE, name);
      owned.push(b);
      return b;
    };
    const matrix = (name: string, cols: number) => {
      const v = w(name);
      const b = uploadWeight(device, 'F32', new Uint8Array(v.buffer, v.byteOffset, v.byteLength), cols, name);
      owned.push(b);
      return b;
    };

    // Run state: the stream x (f32), a normed copy h, q/k/v and the attention's output, the FFN's
    // hidden rows, the projection's output (f32, read back).
    const patches = buf(T * kPatch * act, 'vision patches'); // act [T, 3·p·p]
    const x = buf(T * d * 4, 'vision x'); // f32 [T, d]
    const h = buf(T * d * act, 'vision h'); // act [T, d]
    const q = buf(T * d * act, 'vision q');
    const k = buf(T * d * act, 'vision k');
    const v = buf(T * d * act, 'vision v');
    const a = buf(T * d * act, 'vision attn'); // act [T, d]
    const ffn = buf(T * f * act, 'vision ffn'); // act [T, f]
    const rows = T / c.scaleFactor ** 2;
    const out = buf(rows * c.projectionDim * 4, 'vision out'); // f32 [T / s², projectionDim]
    const staging = createBuffer(device, rows * c.projectionDim * 4, READBACK, 'vision readback');
    owned.push(staging);
    // u32 {T, S}: the step's tokens (the linear ops read T at offset 0) and tiles.
    const counts = createBuffer(device, 16, UNIFORM, 'vision counts');
    // u32 {T / s²}: the projection's rows.
    const projCounts = createBuffer(device, 16, UNIFORM, 'vision projection counts');
    const lastToken = buf(maxTiles * 4, 'vision last tokens');
    owned.push(counts, projCounts);
    // Positions in the shuffled patch order, repeated for every tile of the batch.
    const order = shuffledPatchOrder(side, c.scaleFactor);
    const pos = w('v.position_embd.weight');
    const posRows = new Float32Array(T * d);
    for (let t = 0; t < T; t++) posRows.set(pos.subarray(order[t % N]! * d, (order[t % N]! + 1) * d), t * d);
    const positions = uploadBuffer(device, posRows, STORAGE, 'vision positions');
    owned.push(positions);

    const common = { step: counts, maxTokens: T };
    const ops: Op[] = [];
    ops.push(await createLinearOp(ctx, { ...common, weight: matrix('v.patch_embd.weight', kPatch), dtype: 'F32', n: d, k: kPatch, bias: f32('v.patch_embd.bias'), x: patches, y: x, yF32: true, label: { role: 'vision patch embedding' } }));
    ops.push(await createAddOp(ctx, { x, y: positions, n: d, xF32: true, yF32: true, label: { role: 'vision positions' } }));
    const norm = (name: string, from: GPUBuffer) =>
      createLayerNormOp(ctx, { x: from, weight: f32(`${name}.weight`), bias: f32(`${name}.bias`), y: h, n: d, maxTokens: T, eps: c.layerNormEps, xF32: true });
    const linear = (name: string, from: GPUBuffer, to: GPUBuffer, n: number, kk: number, residual = false) =>
      createLinearOp(ctx, { ...common, weight: matrix(`${name}.weight`, kk), dtype: 'F32', n, k: kk, bias: f32(`${name}.bias`), x: from, y: to, ...(residual ? { yF32: true, residual: true } : {}) });
    for (let l = 0; l < c.numLayers; l++) {
      const b = `v.blk.${l}`;
      // attention block (pre-LN), bidirectional within each tile
      ops.push(await norm(`${b}.ln1`, x));
      ops.push(await linear(`${b}.attn_q`, h, q, d, d));
      ops.push(await linear(`${b}.attn_k`, h, k, d, d));
      ops.push(await linear(`${b}.attn_v`, h, v, d, d));
      ops.push(await createEncoderAttentionOp(ctx, { q, k, v, out: a, lastToken, counts, nHeads: c.numHeads, nKv: c.numHeads, headDim: d / c.numHeads }));
      ops.push(await linear(`${b}.attn_out`, a, x, d, d, true));
      // MLP block (pre-LN): fc1, GELU-tanh, fc2
      ops.push(await norm(`${b}.ln2`, x));
      ops.push(await linear(`${b}.ffn_up`, h, ffn, f, d));
      ops.push(await createGeluOp(ctx, { x: ffn, n: f, tanh: true }));
      ops.push(await linear(`${b}.ffn_down`, ffn, x, d, f, true));
    }
    ops.push(await norm('v.post_ln', x));
    // the projection of each s × s block: its s² post-LN rows side by side are one input row
    const kProj = d * c.scaleFactor ** 2;
    ops.push(await createLinearOp(ctx, { step: projCounts, maxTokens: rows, weight: matrix('mm.model.fc.weight', kProj), dtype: 'F32', n: c.projectionDim, k: kProj, x: h, y: out, yF32: true }));
    if (towerTensors(c).length !== weights.size) throw new Error(`vision tower: ${weights.size} tensors given, ${towerTensors(c).length} expected`);
    return new GpuVisionTower(ctx, c, maxTiles, order, patches, counts, projCounts, lastToken, out, staging, ops, owned);
  }

  /** Each tile's image-token embeddings (tokensPerTile × projectionDim), tiles in batches of maxTiles. */
  async embedTiles(tiles: readonly Float32Array[]): Promise<Float32Array[]> {
    const out: Float32Array[] = [];
    for (let i = 0; i < tiles.length; i += this.maxTiles) out.push(...(await this.batch(tiles.slice(i, i + this.maxTiles))));
    return out;
  }

  private async batch(tiles: readonly Float32Array[]): Promise<Float32Array[]> {
    const { device, precision } = this.ctx;
    const c = this.config;
    const side = patchesPerSide(c);
    const N = side * side;
    const p = c.patchSize;
    const size = c.imageSize;
    const kPatch = 3 * p * p;
    const T = tiles.length * N;
    // im2col in the shuffled order: row t of a tile is patch order[t], its values (channel, ky, kx) as the convolution's weight.
    const cols = new Float32Array(T * kPatch);
    tiles.forEach((tile, n) => {
      for (let t = 0; t < N; t++) {
        const py = Math.floor(this.order[t]! / side);
        const px = this.order[t]! % side;
        const row = (n * N + t) * kPatch;
        for (let ch = 0; ch < 3; ch++)
          for (let ky = 0; ky < p; ky++) cols.set(tile.subarray((ch * size + py * p + ky) * size + px * p, (ch * size + py * p + ky) * size + px * p + p), row + (ch * p + ky) * p);
      }
    });
    writeBuffer(device, this.patches, 0, precision === 'f16' ? f32ArrayToF16(cols) : cols);
    writeBuffer(device, this.counts, 0, new Uint32Array([T, tiles.length, 0, 0]));
    writeBuffer(device, this.lastToken, 0, Uint32Array.from(tiles, (_, n) => (n + 1) * N - 1));
    writeBuffer(device, this.projCounts, 0, new Uint32Array([T / c.scaleFactor ** 2, 0, 0, 0]));
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    const rows = T / c.scaleFactor ** 2;
    this.ops.forEach((op, i) => op.encode(pass, i === this.ops.length - 1 ? rows : T));
    pass.end();
    const bytes = rows * c.projectionDim * 4;
    encoder.copyBufferToBuffer(this.out, 0, this.staging, 0, bytes);
    device.queue.submit([encoder.finish()]);
    const per = tokensPerTile(c) * c.projectionDim;
    await this.staging.mapAsync(0x0001 /* GPUMapMode.READ */, 0, bytes);
    const all = new Float32Array(this.staging.getMappedRange(0, bytes).slice(0));
    this.staging.unmap();
    return tiles.map((_, n) => all.slice(n * per, (n + 1) * per));
  }

  destroy(): void {
    for (const op of this.ops) op.destroy();
    for (const b of this.buffers) b.destroy();
  }
}
