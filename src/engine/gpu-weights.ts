/**
 * Model weights on the GPU, uploaded tensor by tensor at load (never the whole file in memory).
 * Matrices keep their file's type (dequantised in the kernels' registers); norms and biases are f32,
 * norms as applied (the config's normWeightOffset added). A matrix larger than one binding (or
 * buffer) the device grants is split by rows into parts (the embedding of most models from 0.5B up
 * exceeds WebGPU's default 128 MiB binding); the kernels take the parts (src/kernels/weights.ts).
 * q, k and v (the table's `fuse` rows) go up as one matrix, their rows (and biases) concatenated,
 * so the projection is one dispatch: in runs of one weight type, as llama.cpp's mixes may give
 * attn_v a type of its own. Gate and up (the `gate_up` rows) of one type go up as one matrix, their
 * rows interleaved (gate row i at 2i, up row i at 2i + 1), so the decode matvec forms act(gate)·up
 * in its epilogue; of different types they stay apart.
 */
import type { DType } from '../formats/types';
import { STORAGE, uploadBuffer } from '../gpu/buffers';
import { WebGPUError } from '../gpu/errors';
import { interleaveRows } from '../kernels/matmul';
import { uploadExpertParts } from '../kernels/moe';
import { gpuBytesPerRow, uploadWeightParts, type WeightPart } from '../kernels/weights';
import { tensorByteLength } from '../formats/dtypes';
import type { OpenedModel } from '../model/open';
import { assembleWeights, isMatrix, modelTensors, type LayerWeights, type ModelWeights } from '../model/tensors';

export interface GpuMatrix {
  /**
   * Row parts in order: one part holding every row unless the matrix exceeds the binding limit (a
   * stack of experts: parts of whole experts).
   */
  parts: WeightPart[];
  dtype: DType;
  rows: number; // out features (of one expert, for a stack of experts)
  cols: number; // in features
  /** Experts stacked outermost ([experts, rows, cols]: one expert's rows after another's); absent for a plain matrix. */
  experts?: number;
}

/** Which projections a fused q/k/v matrix holds, in row order ('gate': gated attention's gate rows, Qwen3.5). */
export type QkvMember = 'q' | 'gate' | 'k' | 'v';

/** A run of q/k/v projections of one weight type, their rows (and biases) concatenated. */
export interface GpuQkvPart {
  matrix: GpuMatrix;
  bias?: GPUBuffer; // f32 [rows]
  members: QkvMember[];
}

type QkvField = 'wq' | 'wk' | 'wv' | 'bq' | 'bk' | 'bv';

/**
 * One layer's weights, named and shaped as src/model/tensors.ts's table says (vectors are f32), q/k/v
 * joined; gate and up joined as `gateUp` ([2 · intermediate, hidden], rows interleaved) where they
 * share a type, else apart as wGate and wUp.
 */
export type GpuLayerWeights = Omit<LayerWeights<GpuMatrix, GPUBuffer>, QkvField> & { qkv: GpuQkvPart[]; gateUp?: GpuMatrix };

/** A matrix read from the file, not yet on the GPU. */
export interface HostMatrix {
  dtype: DType;
  rows: number;
  cols: number;
  bytes: Uint8Array; // ggml layout
}

/** Consecutive matrices of one weight type (and width) as one, their rows concatenated; `members` index the input. */
export function concatRuns(parts: readonly HostMatrix[]): Array<HostMatrix & { members: number[] }> {
  const runs: Array<HostMatrix & { members: number[]; all: Uint8Array[] }> = [];
  parts.forEach((m, i) => {
    const last = runs.at(-1);
    if (last && last.dtype === m.dtype && last.cols === m.cols) {
      last.rows += m.rows;
      last.members.push(i);
      last.all.push(m.bytes);
    } else runs.push({ ...m, members: [i], all: [m.bytes] });
  });
  return runs.map(({ all, ...r }) => ({ ...r, bytes: all.length === 1 ? all[0]! : concatBytes(all) }));
}

function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

const QKV_FIELDS = [
  ['wq', 'bq', 'q'],
  ['wk', 'bk', 'k'],
  ['wv', 'bv', 'v'],
] as const;

export interface GpuWeights extends Omit<ModelWeights<GpuMatrix, GPUBuffer>, 'layers'> {
  layers: GpuLayerWeights[];
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
 * Matrices outside the layers already on the GPU (by field: another model's, which owns them), taken
 * as they are instead of uploaded: the MTP head's one-layer model shares the trunk's embedding and
 * LM head (./mtp-head.ts). Not counted in `bytes`, not destroyed with these weights.
 */
export type SharedMatrices = Partial<Record<'tokenEmbd' | 'output', GpuMatrix>>;

/**
 * Uploads the model's weights; matrices larger than `maxPartBytes` (default: no limit) go up as
 * row parts. Refuses before uploading anything when a single row of a matrix is larger.
 */
export async function uploadWeights(device: GPUDevice, opened: OpenedModel, onProgress?: UploadProgress, maxPartBytes = Infinity, shared: SharedMatrices = {}): Promise<GpuWeights> {
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
    // A stack of experts splits into parts of whole experts: one expert must fit a binding.
    const expertBytes = rowBytes * shape[shape.length - 2]!;
    if (row.experts && expertBytes > maxPartBytes) {
      throw new WebGPUError(
        'limits_too_small',
        `One expert of ${name} is ${expertBytes} bytes but this GPU's storage bindings hold ${maxPartBytes}: choose a more quantised file.`,
        { needed: expertBytes, allowed: maxPartBytes, tensor: name },
      );
    }
  }
  const all: GPUBuffer[] = [];
  let bytesDone = 0;
  const bytesTotal = [...opened.tensors.values()].reduce((n, t) => n + t.info.byteLength, 0);

  // Tensors one at a time, in file order: peak JS memory is one tensor, or one layer's q, k and v.
  const uploaded = new Map<string, GpuMatrix | GPUBuffer>();
  // A decode step reads every layer matrix and the whole output matrix (the embedding: one row).
  let layerMatrixBytes = 0;
  const tensors = modelTensors(opened.config);
  // A layer's q/k/v (gate/up) rows wait here (by field) until its group's last one is read.
  const groupKey = (layer: number, fuse: string) => `${layer}:${fuse}`;
  const expected = new Map<string, number>();
  for (const t of tensors) if (t.row.fuse && t.layer !== null && opened.tensors.has(t.name)) expected.set(groupKey(t.layer, t.row.fuse), (expected.get(groupKey(t.layer, t.row.fuse)) ?? 0) + 1);
  const waiting = new Map<string, Map<string, HostMatrix | Float32Array>>();
  const qkv: GpuQkvPart[][] = [];
  const gateUp: Array<GpuMatrix | undefined> = [];
  const present = new Set<string>();
  const joinQkv = (layer: number, got: Map<string, HostMatrix | Float32Array>): GpuQkvPart[] => {
    // Gated attention (Qwen3.5): q_proj's rows are each head's query then its gate; they go up as
    // the queries (every head) with k and v, and the gates (every head) as a part of their own (a
    // projection writes at most three regions).
    const gated = opened.config.attnOutputGate;
    if (gated && got.has('bq')) throw new Error(`blk.${layer}: gated attention with q/k/v biases is not supported`);
    const members: Array<readonly [string, string, QkvMember]> = [...QKV_FIELDS.filter(([w]) => got.has(w)), ...(gated ? [['wqGate', 'bqGate', 'gate'] as const] : [])];
    if (gated) {
      const [q, gate] = splitGatedQ(got.get('wq') as HostMatrix, opened.config.numHeads, opened.config.headDim);
      got.set('wq', q).set('wqGate', gate);
    }
    const hosts = members.map(([w]) => got.get(w) as HostMatrix);
    const runs = gated ? [...concatRuns(hosts.slice(0, -1)), { ...hosts.at(-1)!, members: [hosts.length - 1] }] : concatRuns(hosts);
    return runs.map((run) => {
      const names = run.members.map((i) => members[i]![2]);
      const label = `blk.${layer}.attn_${names.join('')}`;
      const biases = run.members.map((i) => got.get(members[i]![1]) as Float32Array | undefined);
      let bias: GPUBuffer | undefined;
      if (biases.every((b) => b)) {
        const values = new Float32Array(run.rows);
        let at = 0;
        for (const b of biases as Float32Array[]) {
          values.set(b, at);
          at += b.length;
        }
        bias = uploadBuffer(device, values, STORAGE, `${label}.bias`);
        all.push(bias);
      } else if (biases.some((b) => b)) throw new Error(`${label}: some of its projections have a bias and some do not`);
      const parts = uploadWeightParts(device, run.dtype, run.bytes, { rows: run.rows, cols: run.cols }, maxPartBytes, `${label}.weight`);
      all.push(...parts.map((p) => p.buffer));
      layerMatrixBytes += bytesOf(parts);
      return { matrix: { parts, dtype: run.dtype, rows: run.rows, cols: run.cols }, bias, members: names };
    });
  };
  const uploadMatrix = (name: string, m: HostMatrix): GpuMatrix => {
    const parts = uploadWeightParts(device, m.dtype, m.bytes, { rows: m.rows, cols: m.cols }, maxPartBytes, name);
    all.push(...parts.map((p) => p.buffer));
    layerMatrixBytes += bytesOf(parts);
    return { parts, dtype: m.dtype, rows: m.rows, cols: m.cols };
  };
  // Gate and up of one type (and shape) become one interleaved matrix; else each goes up alone.
  const joinGateUp = (layer: number, got: Map<string, HostMatrix | Float32Array>, names: Map<string, string>) => {
    const [g, u] = [got.get('wGate') as HostMatrix, got.get('wUp') as HostMatrix];
    if (g.dtype === u.dtype && g.rows === u.rows && g.cols === u.cols) {
      gateUp[layer] = uploadMatrix(`blk.${layer}.ffn_gate_up.weight`, { ...g, rows: 2 * g.rows, bytes: interleaveRows(g.bytes, u.bytes, tensorByteLength(g.dtype, g.cols)) });
    } else {
      uploaded.set(names.get('wGate')!, uploadMatrix(names.get('wGate')!, g));
      uploaded.set(names.get('wUp')!, uploadMatrix(names.get('wUp')!, u));
    }
  };
  const fuseNames = new Map<string, Map<string, string>>();
  try {
    for (const { row, layer, name } of tensors) {
      const t = opened.tensors.get(name);
      if (!row.field || !t) continue;
      const given = layer === null ? shared[row.field as keyof SharedMatrices] : undefined;
      if (given) uploaded.set(name, given);
      else if (row.fuse && layer !== null) {
        const key = groupKey(layer, row.fuse);
        const got = waiting.get(key) ?? new Map<string, HostMatrix | Float32Array>();
        waiting.set(key, got);
        const names = fuseNames.get(key) ?? new Map<string, string>();
        fuseNames.set(key, names.set(row.field, name));
        const [rows, cols] = t.info.shape as [number, number];
        got.set(row.field, isMatrix(row.kind) ? { dtype: t.info.dtype, rows, cols, bytes: await opened.readTensor(name) } : await opened.readTensorF32(name));
        present.add(name);
        if (got.size === expected.get(key)) {
          waiting.delete(key);
          if (row.fuse === 'qkv') qkv[layer] = joinQkv(layer, got);
          else joinGateUp(layer, got, names);
        }
      } else if (isMatrix(row.kind)) {
        // A stack of experts ([experts, rows, cols]) goes up as one matrix of experts · rows rows,
        // split (when larger than a binding) into parts of whole experts: the routed kernel runs
        // one dispatch per part, each reading the experts it holds.
        const shape = t.info.shape;
        const [rows, cols] = shape.slice(-2) as [number, number];
        const experts = shape.length === 3 ? shape[0]! : undefined;
        const bytes = await opened.readTensor(name);
        const parts = experts
          ? uploadExpertParts(device, t.info.dtype, bytes, { experts, n: rows, k: cols }, maxPartBytes, name)
          : uploadWeightParts(device, t.info.dtype, bytes, { rows, cols }, maxPartBytes, name);
        all.push(...parts.map((p) => p.buffer));
        uploaded.set(name, { parts, dtype: t.info.dtype, rows, cols, ...(experts ? { experts } : {}) });
        // A decode step reads k of a stack's experts, not all of them.
        const moe = opened.config.moe;
        if (layer !== null) layerMatrixBytes += experts && moe ? (bytesOf(parts) * moe.numExpertsUsed) / moe.numExperts : bytesOf(parts);
      } else {
        const values = await opened.readTensorF32(name);
        // Norm weights as applied: offset + w (Gemma's checkpoints store w of 1 + w).
        const offset = row.kind === 'norm' && !row.plainNorm ? opened.config.normWeightOffset : 0;
        const buffer = uploadBuffer(device, offset === 0 ? values : values.map((v) => v + offset), STORAGE, name);
        all.push(buffer);
        uploaded.set(name, buffer);
      }
      bytesDone += t.info.byteLength;
      onProgress?.(name, bytesDone, bytesTotal);
    }
    // Joined q/k/v rows stand as present for the table's check (a missing one is still missing_tensor).
    const assembled = assembleWeights<GpuMatrix, GPUBuffer>(opened.config, (t) => uploaded.get(t.name) ?? (present.has(t.name) ? JOINED : undefined));
    const layers = assembled.layers.map((w, l): GpuLayerWeights => {
      const { wq: _q, wk: _k, wv: _v, bq: _bq, bk: _bk, bv: _bv, ...rest } = w;
      const gu = gateUp[l];
      if (!gu) return { ...rest, qkv: qkv[l]! };
      const { wGate: _g, wUp: _u, ...dense } = rest;
      return { ...dense, qkv: qkv[l]!, gateUp: gu };
    });
    const weights = { ...assembled, layers };
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

/**
 * Gated attention's q_proj ([heads · 2 · headDim] rows: each head's query rows, then its gate rows)
 * as two matrices, every head's query rows and every head's gate rows (whole rows of the file's type).
 */
export function splitGatedQ(m: HostMatrix, heads: number, headDim: number): [HostMatrix, HostMatrix] {
  const half = heads * headDim;
  const both = splitGatedRows(m.bytes, tensorByteLength(m.dtype, m.cols), heads, headDim);
  return [
    { ...m, rows: half, bytes: both.subarray(0, both.length / 2) },
    { ...m, rows: half, bytes: both.subarray(both.length / 2) },
  ];
}

/**
 * Gated attention's q rows (`rowLen` elements each), each head's query rows then its gate rows,
 * as [the queries of every head; the gates of every head]: the weights' bytes, a LoRA B's floats.
 */
export function splitGatedRows<T extends Uint8Array | Float32Array>(src: T, rowLen: number, heads: number, headDim: number): T {
  const out = new (src.constructor as new (n: number) => T)(src.length);
  const [head, half] = [headDim * rowLen, heads * headDim * rowLen];
  for (let h = 0; h < heads; h++) {
    out.set(src.subarray(2 * h * head, (2 * h + 1) * head), h * head);
    out.set(src.subarray((2 * h + 1) * head, (2 * h + 2) * head), half + h * head);
  }
  return out;
}

/** Stands in for a q/k/v tensor in assembleWeights: its rows went into a joined matrix. */
const JOINED = { parts: [], dtype: 'F32', rows: 0, cols: 0 } as GpuMatrix;

function bytesOf(parts: readonly WeightPart[]): number {
  return parts.reduce((n, p) => n + p.buffer.size, 0);
}
