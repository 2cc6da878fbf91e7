/**
 * The prefix cache's recurrent states (a hybrid model: LFM2's short convolutions, Qwen3.5's
 * DeltaNet, Mamba-2). A cached prefix of an attention model is its KV pages; a hybrid's recurrent
 * layers keep one state per sequence slot that every token overwrites, so a prefix is only
 * reusable where the state at its end was kept. As vLLM's mamba prefix caching ("align": states
 * on the block grid only) and SGLang's MambaRadixCache, states are kept at page boundaries: a
 * snapshot is every recurrent layer's slot state copied (on the GPU) after the step whose tokens
 * end at a page boundary, and it belongs to the prefix-cache node of the page ending there. A
 * hybrid's prefix match ends at the deepest such node; the snapshot is copied into the new
 * sequence's slot before its first step and prefill goes on from there.
 *
 * `SnapshotPool` is the CPU side (which snapshot is free, which node holds which, least recently
 * used first out), owned by the scheduler; `StateSnapshots` the GPU buffers and copies, owned by
 * the step runner (made again on a new device after a loss, when the pool forgets everything).
 */
import { createBuffer, STORAGE } from '../gpu/buffers';
import type { LayerCacheKind, LayerCaches } from './layer-cache';
import type { PrefixNode } from './prefix-cache';

/** Default GPU bytes of the snapshot pool (EngineOptions.stateSnapshots: a count wins). */
export const SNAPSHOT_BYTES_DEFAULT = 128 * 2 ** 20;
/** Snapshots the default budget gives at most (LFM2's states are small: 16 would be plenty), and at least. */
const DEFAULT_MAX = 64;
const DEFAULT_MIN = 2;

/** Bytes of one snapshot: every recurrent layer's slot state (f32). */
export function snapshotBytes(kinds: readonly LayerCacheKind[]): number {
  return kinds.reduce((n, k) => n + (k.kind === 'slot-state' ? k.floats * 4 : 0), 0);
}

/**
 * Snapshots in the pool: `count` if given, else as many as SNAPSHOT_BYTES_DEFAULT holds within
 * [2, 64]; never more than one layer's buffer may hold (maxBufferSize). 0 for a model without
 * recurrent layers (their prefixes need no state).
 */
export function snapshotCount(kinds: readonly LayerCacheKind[], maxBufferSize: number, count?: number): number {
  const bytes = snapshotBytes(kinds);
  if (bytes === 0) return 0;
  const widest = Math.max(...kinds.map((k) => (k.kind === 'slot-state' ? k.floats * 4 : 0)));
  const wanted = count ?? Math.min(DEFAULT_MAX, Math.max(DEFAULT_MIN, Math.floor(SNAPSHOT_BYTES_DEFAULT / bytes)));
  return Math.max(0, Math.min(Math.floor(wanted), Math.floor(maxBufferSize / widest)));
}

/**
 * Which snapshot is free, taken (a step copies a slot's state into it: not yet any node's) or held
 * by a prefix-cache node. `take` gives a free one, else the least recently used held one (its node
 * keeps its page, without a state: a hybrid's match stops before it).
 */
export class SnapshotPool {
  private readonly free: number[] = [];
  private readonly nodeOf = new Map<number, PrefixNode>();
  private readonly byNode = new Map<PrefixNode, number>();
  private readonly lastUse = new Map<number, number>();
  private clock = 0;

  constructor(readonly count: number) {
    this.clear();
  }

  /** A snapshot to copy a state into, or null when every one is taken by a step not yet attached. */
  take(): number | null {
    const free = this.free.pop();
    if (free !== undefined) return free;
    let victim = -1;
    for (const [snap, used] of this.lastUse) if (this.nodeOf.has(snap) && (victim < 0 || used < this.lastUse.get(victim)!)) victim = snap;
    if (victim < 0) return null;
    this.byNode.delete(this.nodeOf.get(victim)!);
    this.nodeOf.delete(victim);
    return victim;
  }

  /** `snap` (taken) holds the state at `node`'s end; false (and `snap` freed) when the node holds one already. */
  attach(snap: number, node: PrefixNode): boolean {
    if (this.byNode.has(node)) {
      this.release(snap);
      return false;
    }
    this.nodeOf.set(snap, node);
    this.byNode.set(node, snap);
    this.lastUse.set(snap, ++this.clock);
    return true;
  }

  /** The snapshot `node` holds (marked used now), if any. */
  of(node: PrefixNode): number | undefined {
    const snap = this.byNode.get(node);
    if (snap !== undefined) this.lastUse.set(snap, ++this.clock);
    return snap;
  }

  /** Whether `node` holds a snapshot (without marking it used). */
  holds(node: PrefixNode): boolean {
    return this.byNode.has(node);
  }

  /** `snap` goes back (taken and never attached, or detached); a held one leaves its node. */
  release(snap: number): void {
    const node = this.nodeOf.get(snap);
    if (node !== undefined) this.byNode.delete(node);
    this.nodeOf.delete(snap);
    this.lastUse.delete(snap);
    this.free.push(snap);
  }

  /** A node left the prefix cache (its page evicted): its snapshot goes with it. */
  dropNode(node: PrefixNode): void {
    const snap = this.byNode.get(node);
    if (snap !== undefined) this.release(snap);
  }

  /** Snapshots held by nodes (tests). */
  get held(): number {
    return this.byNode.size;
  }

  /** Forgets every snapshot (the prefix cache was cleared: a lost device). */
  clear(): void {
    this.nodeOf.clear();
    this.byNode.clear();
    this.lastUse.clear();
    this.free.length = 0;
    for (let s = this.count - 1; s >= 0; s--) this.free.push(s);
  }
}

/** The snapshots on the GPU: per recurrent layer, one f32 buffer [count, floats] beside its slot-state buffer. */
export class StateSnapshots {
  private constructor(private readonly layers: Array<{ state: GPUBuffer; snaps: GPUBuffer; bytes: number }>) {}

  /** Made once (at load, and on a new device after a loss); null where `count` is 0. */
  static create(device: GPUDevice, kinds: readonly LayerCacheKind[], caches: LayerCaches, count: number): StateSnapshots | null {
    if (count === 0) return null;
    const layers = kinds.flatMap((k, l) => {
      if (k.kind !== 'slot-state') return [];
      return [{ state: caches.state(l), snaps: createBuffer(device, count * k.floats * 4, STORAGE, `stateSnapshots.${l}`), bytes: k.floats * 4 }];
    });
    return new StateSnapshots(layers);
  }

  /** GPU bytes of the pool. */
  get bytes(): number {
    return this.layers.reduce((n, l) => n + l.snaps.size, 0);
  }

  /** Records the copy of `snap` into `slot`'s states (before the step's pass: its sequence starts there). */
  load(encoder: GPUCommandEncoder, snap: number, slot: number): void {
    for (const l of this.layers) encoder.copyBufferToBuffer(l.snaps, snap * l.bytes, l.state, slot * l.bytes, l.bytes);
  }

  /** Records the copy of `slot`'s states into `snap` (after the step's pass: the state at the step's end). */
  save(encoder: GPUCommandEncoder, slot: number, snap: number): void {
    for (const l of this.layers) encoder.copyBufferToBuffer(l.state, slot * l.bytes, l.snaps, snap * l.bytes, l.bytes);
  }

  destroy(): void {
    for (const l of this.layers) l.snaps.destroy();
  }
}
