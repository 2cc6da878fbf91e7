/**
 * The GPU home of every loaded LoRA adapter: one f32 buffer of A and B matrices, and one entry table
 * the LoRA kernels index by (adapter, matrix). Both are created once, at their full size, so loading
 * or unloading an adapter is a few writeBuffers: no pipeline, bind group or buffer is created, and
 * the forward pass's bind groups stay valid. Writes are queued behind work already submitted, so a
 * step in flight still sees the adapter it was planned with.
 */
import { createBuffer, STORAGE, writeBuffer } from '../gpu/buffers';
import { LORA_ENTRY_WORDS } from '../kernels/lora';
import { splitGatedRows } from './gpu-weights';
import { LORA_TARGETS, type LoraAdapter, type LoraWeight } from '../lora/types';

/**
 * The matrices the GPU adapts, the entry table's columns of a layer: every target, and the gate
 * half of gated attention's q (Qwen3.5: q_proj's rows are each head's query then its gate, which
 * the GPU keeps apart, ./gpu-weights.ts), whose entry reads the q adapter's A and its gate rows of B;
 * and Mamba-2's in_proj rows after z (xBC, dt), which its block writes to regions of their own: their
 * entries read mb_in's A and B's rows from there on (mb_in's own entry the z rows).
 */
export const LORA_MATS = [...LORA_TARGETS, 'q_gate', 'mb_xbc', 'mb_dt'] as const;
export type LoraMat = (typeof LORA_MATS)[number];

/** The entry table's column of a layer's matrix. */
export function loraMat(layer: number, target: LoraMat): number {
  return layer * LORA_MATS.length + LORA_MATS.indexOf(target);
}

export interface LoraPoolLimits {
  /** Adapters loaded at once. */
  maxAdapters: number;
  /** The largest rank an adapter may have (the scratch row of every token). */
  maxRank: number;
  /** Bytes of the weight pool (f32 A and B of every loaded adapter). */
  bytes: number;
  numLayers: number;
  /** Gated attention's q (ModelConfig.attnOutputGate): its heads and head size, to split B's rows into queries and gates. */
  gatedQ?: { heads: number; headDim: number };
  /** Mamba-2's in_proj (ModelConfig.mamba2): the rows of z and of xBC, where B's xBC and dt rows start. */
  mamba2In?: { z: number; xbc: number };
}

export type LoraPoolErrorCode = 'too_many_adapters' | 'rank_too_large' | 'pool_full';

export class LoraPoolError extends Error {
  override readonly name = 'LoraPoolError';
  constructor(
    readonly code: LoraPoolErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** Floats an adapter takes in the pool: A [r, in] and B [out, r] of each matrix. */
export function adapterFloats(adapter: LoraAdapter): number {
  return adapter.weights.reduce((sum, w) => sum + w.rank * (w.inFeatures + w.outFeatures), 0);
}

interface Loaded {
  name: string;
  ranges: Array<[start: number, length: number]>;
  mats: number[];
}

export class LoraPool {
  readonly numMats: number;
  /** f32 [bytes / 4]: the A and B matrices of every loaded adapter. */
  readonly weights: GPUBuffer;
  /** vec4<u32> [maxAdapters · numMats]: A's offset, B's offset, rank (0: matrix not adapted), scale bits. */
  readonly entries: GPUBuffer;
  private readonly table: Uint32Array;
  /** Loaded adapters adapting each matrix: the forward pass skips a matrix no adapter touches. */
  private readonly matUse: Uint16Array;
  private readonly loaded: (Loaded | undefined)[];
  /** Free float ranges of the pool, sorted by start, never adjacent. */
  private free: Array<[start: number, length: number]>;

  private constructor(
    private readonly device: GPUDevice,
    readonly limits: LoraPoolLimits,
  ) {
    this.numMats = limits.numLayers * LORA_MATS.length;
    const floats = Math.max(1, Math.floor(limits.bytes / 4));
    this.weights = createBuffer(device, floats * 4, STORAGE, 'lora pool');
    this.table = new Uint32Array(limits.maxAdapters * this.numMats * LORA_ENTRY_WORDS);
    this.entries = createBuffer(device, this.table.byteLength, STORAGE, 'lora entries');
    this.loaded = new Array(limits.maxAdapters).fill(undefined);
    this.matUse = new Uint16Array(this.numMats);
    this.free = [[0, floats]];
  }

  static create(device: GPUDevice, limits: LoraPoolLimits): LoraPool {
    return new LoraPool(device, limits);
  }

  /** Names of the loaded adapters by id. */
  get names(): (string | undefined)[] {
    return this.loaded.map((l) => l?.name);
  }

  /** Whether any loaded adapter adapts the matrix (a column of the entry table). */
  adapts(mat: number): boolean {
    return this.matUse[mat]! > 0;
  }

  /** Floats still free (possibly in several ranges). */
  get freeFloats(): number {
    return this.free.reduce((s, [, n]) => s + n, 0);
  }

  /**
   * Uploads a fitted adapter (q/k rows already in the base's order) and returns its id, the value a
   * step row carries to select it. `scale` multiplies the adapter's own alpha / rank.
   */
  load(adapter: LoraAdapter, name: string, scale = 1): number {
    const id = this.loaded.indexOf(undefined);
    if (id < 0) throw new LoraPoolError('too_many_adapters', `${this.limits.maxAdapters} LoRA adapters are loaded already (${this.names.join(', ')}): unload one first, or raise lora.maxAdapters`);
    const rank = Math.max(0, ...adapter.weights.map((w) => w.rank));
    if (rank > this.limits.maxRank) throw new LoraPoolError('rank_too_large', `${adapter.file}: rank ${rank} is above the engine's largest LoRA rank ${this.limits.maxRank}: raise lora.maxRank`);
    const ranges: Array<[number, number]> = [];
    const undo = () => ranges.forEach((r) => this.release(r));
    const rows = new Uint32Array(this.numMats * LORA_ENTRY_WORDS);
    const scales = new Float32Array(rows.buffer);
    const mats: number[] = [];
    const entry = (mat: number, a: number, b: number, w: LoraWeight) => {
      const e = mat * LORA_ENTRY_WORDS;
      rows[e] = a;
      rows[e + 1] = b;
      rows[e + 2] = w.rank;
      scales[e + 3] = w.scale * scale;
      mats.push(mat);
    };
    for (const w of adapter.weights) {
      const [aLen, bLen] = [w.rank * w.inFeatures, w.outFeatures * w.rank];
      const start = this.take(aLen + bLen);
      if (start < 0) {
        undo();
        const need = (adapterFloats(adapter) * 4) / 2 ** 20;
        throw new LoraPoolError('pool_full', `${adapter.file}: the LoRA pool has ${((this.freeFloats * 4) / 2 ** 20).toFixed(2)} MiB free of ${(this.limits.bytes / 2 ** 20).toFixed(2)} MiB, and this adapter needs ${need.toFixed(2)} MiB: unload one, or raise lora.poolBytes`);
      }
      ranges.push([start, aLen + bLen]);
      writeBuffer(this.device, this.weights, start * 4, w.a);
      const gated = w.target === 'q' ? this.limits.gatedQ : undefined;
      // Gated q: B's query rows (every head's), then its gate rows, each half an entry of its own.
      writeBuffer(this.device, this.weights, (start + aLen) * 4, gated ? splitGatedRows(w.b, w.rank, gated.heads, gated.headDim) : w.b);
      entry(loraMat(w.layer, w.target), start, start + aLen, w);
      if (gated) entry(loraMat(w.layer, 'q_gate'), start, start + aLen + bLen / 2, w);
      const mb = w.target === 'mb_in' ? this.limits.mamba2In : undefined;
      if (mb) {
        entry(loraMat(w.layer, 'mb_xbc'), start, start + aLen + mb.z * w.rank, w);
        entry(loraMat(w.layer, 'mb_dt'), start, start + aLen + (mb.z + mb.xbc) * w.rank, w);
      }
    }
    this.setRows(id, rows);
    for (const m of mats) this.matUse[m]!++;
    this.loaded[id] = { name, ranges, mats };
    return id;
  }

  /** Frees an adapter's entries and pool ranges; steps already submitted still read what they had. */
  unload(id: number): void {
    const l = this.loaded[id];
    if (!l) return;
    this.setRows(id, new Uint32Array(this.numMats * LORA_ENTRY_WORDS));
    l.ranges.forEach((r) => this.release(r));
    for (const m of l.mats) this.matUse[m]!--;
    this.loaded[id] = undefined;
  }

  destroy(): void {
    this.weights.destroy();
    this.entries.destroy();
  }

  private setRows(id: number, rows: Uint32Array): void {
    const at = id * rows.length;
    this.table.set(rows, at);
    writeBuffer(this.device, this.entries, at * 4, rows);
  }

  /** First fit: the start of `n` free floats, or -1. */
  private take(n: number): number {
    const i = this.free.findIndex(([, len]) => len >= n);
    if (i < 0) return -1;
    const [start, len] = this.free[i]!;
    if (len === n) this.free.splice(i, 1);
    else this.free[i] = [start + n, len - n];
    return start;
  }

  private release([start, n]: [number, number]): void {
    this.free.push([start, n]);
    this.free.sort((a, b) => a[0] - b[0]);
    const merged: Array<[number, number]> = [];
    for (const r of this.free) {
      const prev = merged[merged.length - 1];
      if (prev && prev[0] + prev[1] === r[0]) prev[1] += r[1];
      else merged.push([r[0], r[1]]);
    }
    this.free = merged;
  }
}
