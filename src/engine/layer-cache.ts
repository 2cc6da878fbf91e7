/**
 * What each layer keeps per sequence between steps. Attention layers keep a K and a V row per
 * token in pages of the shared pool (./kv-pages.ts): it grows with the sequence, and the prefix
 * cache shares full pages between sequences. Recurrent layers (short convolutions, linear
 * attention, as in hybrid families) keep a fixed-size state per sequence slot instead, which each
 * step overwrites in place. A model declares each layer's kind; the page pool is sized from the
 * paged layers alone, and a sequence taking a slot starts from a zeroed state.
 *
 * Speculative decoding: a verify step feeds a sequence's proposals as rows on its slot, and the
 * tokens past the first rejected one must leave no trace. Paged layers drop their rows (the
 * scheduler truncates the pages); a recurrent kind whose kernels walk such a run of rows and leave
 * the state after each row in a checkpoint row (shaders/lib/verify_runs.wgsl) declares `rollsBack`:
 * its buffer holds a checkpoint row per step row after the slots, and after the sampler the
 * state_rollback op (src/kernels/state-rollback.ts) puts the checkpoint at the first miss in the
 * slot. A model speculates only when every recurrent layer rolls back.
 */
import { createBuffer, STORAGE } from '../gpu/buffers';
import { deltaNetConvDim, layerBlocks, mamba2ConvDim, type MixerKind, type ModelConfig } from '../model/config';

export type LayerCacheKind =
  /** K and V rows of `kvHeads × headDim` act elements per token, in pages. */
  | { kind: 'paged-kv'; kvHeads: number; headDim: number }
  /**
   * `floats` f32 values per sequence slot (a recurrent layer's state); `rollsBack`: its kernels
   * checkpoint verify runs (above), so it keeps a checkpoint row per step row too (absent: no).
   */
  | { kind: 'slot-state'; floats: number; rollsBack?: boolean };

/** What each kind of token mixer keeps per sequence: attention its K and V rows, paged; the recurrent mixers a state per slot. */
const MIXER_CACHE: Readonly<Record<MixerKind, (config: ModelConfig) => LayerCacheKind>> = {
  attention: (c) => ({ kind: 'paged-kv', kvHeads: c.numKvHeads, headDim: c.headDim }),
  shortconv: (c) => ({ kind: 'slot-state', floats: (c.shortConv!.kernel - 1) * c.hiddenSize, rollsBack: true }),
  // Qwen3.5's DeltaNet: its conv's last kernel − 1 inputs, and a headKDim × headVDim matrix per value head.
  deltanet: (c) => {
    const d = c.deltaNet!;
    return { kind: 'slot-state', floats: (d.convKernel - 1) * deltaNetConvDim(d) + d.numVHeads * d.headKDim * d.headVDim, rollsBack: true };
  },
  // Granite 4.0-H's Mamba-2: its conv's last kernel − 1 inputs, and a headDim × stateSize matrix per head.
  mamba2: (c) => {
    const m = c.mamba2!;
    return { kind: 'slot-state', floats: (m.convKernel - 1) * mamba2ConvDim(m) + m.numHeads * m.headDim * m.stateSize, rollsBack: true };
  },
};

/** Each layer's cache kind, from its mixer (`layerBlocks`). */
export function layerCacheKinds(config: ModelConfig): LayerCacheKind[] {
  return Array.from({ length: config.numLayers }, (_, l) => MIXER_CACHE[layerBlocks(config, l).mixer](config));
}

/** Whether a verify step's rejected rows can be rolled back in every layer (speculative decoding). */
export function rollsBack(kinds: readonly LayerCacheKind[]): boolean {
  return kinds.every((k) => k.kind !== 'slot-state' || k.rollsBack === true);
}

/** Bytes of one token's K (or V) row in one paged layer. */
export function rowBytes(k: Extract<LayerCacheKind, { kind: 'paged-kv' }>, actBytes: number): number {
  return k.kvHeads * k.headDim * actBytes;
}

/** Bytes one page holds over every paged layer (K and V). */
export function pageBytes(kinds: readonly LayerCacheKind[], pageSize: number, actBytes: number): number {
  return kinds.reduce((n, k) => n + (k.kind === 'paged-kv' ? 2 * pageSize * rowBytes(k, actBytes) : 0), 0);
}

/** Pages the largest paged layer's K (or V) buffer may hold within one storage binding. */
export function pagesPerBinding(kinds: readonly LayerCacheKind[], pageSize: number, actBytes: number, maxBindingBytes: number): number {
  const widest = Math.max(0, ...kinds.map((k) => (k.kind === 'paged-kv' ? rowBytes(k, actBytes) : 0)));
  return widest === 0 ? Infinity : Math.floor(maxBindingBytes / (pageSize * widest));
}

export type LayerCache = { kind: 'paged-kv'; k: GPUBuffer; v: GPUBuffer } | { kind: 'slot-state'; state: GPUBuffer; floats: number; rollsBack: boolean };

/** Every layer's cache buffers, made once at load. */
export class LayerCaches {
  private constructor(
    private readonly device: GPUDevice,
    private readonly layers: LayerCache[],
    private readonly zeros: Float32Array<ArrayBuffer>,
    /** The first checkpoint row of a rolling-back state buffer (after its slots): row r's is slot `checkpointRow + r`. */
    readonly checkpointRow: number,
  ) {}

  static create(device: GPUDevice, kinds: readonly LayerCacheKind[], a: { numPages: number; pageSize: number; maxSeqs: number; rows?: number; actBytes: number }): LayerCaches {
    const layers = kinds.map((k, l): LayerCache => {
      if (k.kind === 'paged-kv') {
        const bytes = a.numPages * a.pageSize * rowBytes(k, a.actBytes);
        return { kind: 'paged-kv', k: createBuffer(device, bytes, STORAGE, `kCache.${l}`), v: createBuffer(device, bytes, STORAGE, `vCache.${l}`) };
      }
      // The slots, then (rolling back) a checkpoint row per step row: at most `rows` (default: one per slot).
      const rows = a.maxSeqs + (k.rollsBack ? (a.rows ?? a.maxSeqs) : 0);
      return { kind: 'slot-state', state: createBuffer(device, rows * k.floats * 4, STORAGE, `state.${l}`), floats: k.floats, rollsBack: k.rollsBack === true };
    });
    const widest = Math.max(0, ...layers.map((c) => (c.kind === 'slot-state' ? c.floats : 0)));
    return new LayerCaches(device, layers, new Float32Array(widest), a.maxSeqs);
  }

  /** Layer `l`'s paged K and V buffers ([numPages, pageSize, kvHeads, headDim] act each). */
  paged(l: number): { k: GPUBuffer; v: GPUBuffer } {
    const c = this.layers[l];
    if (c?.kind !== 'paged-kv') throw new Error(`layer ${l} keeps no paged K/V`);
    return c;
  }

  /** Layer `l`'s state buffer (f32 [maxSeqs, floats], then as many checkpoint rows when it rolls back). */
  state(l: number): GPUBuffer {
    const c = this.layers[l];
    if (c?.kind !== 'slot-state') throw new Error(`layer ${l} keeps no slot state`);
    return c.state;
  }

  /** The layers whose state rolls back, each with its buffer and floats per slot (the state_rollback op's). */
  rollingBack(): Array<{ layer: number; state: GPUBuffer; floats: number }> {
    return this.layers.flatMap((c, layer) => (c.kind === 'slot-state' && c.rollsBack ? [{ layer, state: c.state, floats: c.floats }] : []));
  }

  /** GPU bytes of every layer's cache. */
  get bytes(): number {
    return this.layers.reduce((n, c) => n + (c.kind === 'paged-kv' ? c.k.size + c.v.size : c.state.size), 0);
  }

  /**
   * A sequence takes `slot`: its recurrent states start from zero (queue writes land in order
   * with submits, so steps already submitted for the slot's previous sequence read theirs first).
   * Paged layers need nothing: the sequence's pages are its own.
   */
  resetSlot(slot: number): void {
    for (const c of this.layers) {
      if (c.kind === 'slot-state') this.device.queue.writeBuffer(c.state, slot * c.floats * 4, this.zeros, 0, c.floats);
    }
  }

  destroy(): void {
    for (const c of this.layers) {
      if (c.kind === 'paged-kv') {
        c.k.destroy();
        c.v.destroy();
      } else c.state.destroy();
    }
  }
}
