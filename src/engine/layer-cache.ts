/**
 * What each layer keeps per sequence between steps. Attention layers keep a K and a V row per
 * token in pages of the shared pool (./kv-pages.ts): it grows with the sequence, and the prefix
 * cache shares full pages between sequences. Recurrent layers (short convolutions, linear
 * attention, as in hybrid families) keep a fixed-size state per sequence slot instead, which each
 * step overwrites in place. A model declares each layer's kind; the page pool is sized from the
 * paged layers alone, and a sequence taking a slot starts from a zeroed state.
 */
import { createBuffer, STORAGE } from '../gpu/buffers';
import { deltaNetConvDim, layerBlocks, mamba2ConvDim, type MixerKind, type ModelConfig } from '../model/config';

export type LayerCacheKind =
  /** K and V rows of `kvHeads × headDim` act elements per token, in pages. */
  | { kind: 'paged-kv'; kvHeads: number; headDim: number }
  /** `floats` f32 values per sequence slot (a recurrent layer's state). */
  | { kind: 'slot-state'; floats: number };

/** What each kind of token mixer keeps per sequence: attention its K and V rows, paged; the recurrent mixers a state per slot. */
const MIXER_CACHE: Readonly<Record<MixerKind, (config: ModelConfig) => LayerCacheKind>> = {
  attention: (c) => ({ kind: 'paged-kv', kvHeads: c.numKvHeads, headDim: c.headDim }),
  shortconv: (c) => ({ kind: 'slot-state', floats: (c.shortConv!.kernel - 1) * c.hiddenSize }),
  // Qwen3.5's DeltaNet: its conv's last kernel − 1 inputs, and a headKDim × headVDim matrix per value head.
  deltanet: (c) => {
    const d = c.deltaNet!;
    return { kind: 'slot-state', floats: (d.convKernel - 1) * deltaNetConvDim(d) + d.numVHeads * d.headKDim * d.headVDim };
  },
  // Granite 4.0-H's Mamba-2: its conv's last kernel − 1 inputs, and a headDim × stateSize matrix per head.
  mamba2: (c) => {
    const m = c.mamba2!;
    return { kind: 'slot-state', floats: (m.convKernel - 1) * mamba2ConvDim(m) + m.numHeads * m.headDim * m.stateSize };
  },
};

/** Each layer's cache kind, from its mixer (`layerBlocks`). */
export function layerCacheKinds(config: ModelConfig): LayerCacheKind[] {
  return Array.from({ length: config.numLayers }, (_, l) => MIXER_CACHE[layerBlocks(config, l).mixer](config));
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

export type LayerCache = { kind: 'paged-kv'; k: GPUBuffer; v: GPUBuffer } | { kind: 'slot-state'; state: GPUBuffer; floats: number };

/** Every layer's cache buffers, made once at load. */
export class LayerCaches {
  private constructor(
    private readonly device: GPUDevice,
    private readonly layers: LayerCache[],
    private readonly zeros: Float32Array<ArrayBuffer>,
  ) {}

  static create(device: GPUDevice, kinds: readonly LayerCacheKind[], a: { numPages: number; pageSize: number; maxSeqs: number; actBytes: number }): LayerCaches {
    const layers = kinds.map((k, l): LayerCache => {
      if (k.kind === 'paged-kv') {
        const bytes = a.numPages * a.pageSize * rowBytes(k, a.actBytes);
        return { kind: 'paged-kv', k: createBuffer(device, bytes, STORAGE, `kCache.${l}`), v: createBuffer(device, bytes, STORAGE, `vCache.${l}`) };
      }
      return { kind: 'slot-state', state: createBuffer(device, a.maxSeqs * k.floats * 4, STORAGE, `state.${l}`), floats: k.floats };
    });
    const widest = Math.max(0, ...layers.map((c) => (c.kind === 'slot-state' ? c.floats : 0)));
    return new LayerCaches(device, layers, new Float32Array(widest));
  }

  /** Layer `l`'s paged K and V buffers ([numPages, pageSize, kvHeads, headDim] act each). */
  paged(l: number): { k: GPUBuffer; v: GPUBuffer } {
    const c = this.layers[l];
    if (c?.kind !== 'paged-kv') throw new Error(`layer ${l} keeps no paged K/V`);
    return c;
  }

  /** Layer `l`'s state buffer (f32 [maxSeqs, floats]). */
  state(l: number): GPUBuffer {
    const c = this.layers[l];
    if (c?.kind !== 'slot-state') throw new Error(`layer ${l} keeps no slot state`);
    return c.state;
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
