/**
 * The engine's loaded LoRA adapters by name: each one's place in the GPU pool (./lora-pool.ts), the
 * prefix-cache namespace its sequences key their pages under, and the requests using it. A name
 * stands for one set of weights: loading it again needs an unload first, and each load gets a new
 * namespace, so pages computed with an earlier adapter of the same name are never matched.
 * Unloading refuses new requests at once, waits for the requests in flight to finish, then frees
 * the adapter's pool ranges and drops its cached pages.
 */
import { LORA_TARGETS, type LoraAdapter } from '../lora/types';
import type { LoraInfo } from './types';
import { LoraExistsError, LoraNotFoundError, LoraPoolFullError } from './errors';
import { LoraPoolError, type LoraPool } from './lora-pool';

/** A request's hold on an adapter, released when the request ends. */
export interface LoraLease {
  readonly id: number;
  readonly key: string;
  /** The namespace its pages are stored under across restarts (kv-persist.ts adapterFingerprint), when KV persistence is on. */
  readonly storedKey?: string;
  release(): void;
}

interface Entry {
  info: LoraInfo;
  /** Kept to load it again into a new device's pool (`reload`). */
  adapter: LoraAdapter;
  id: number;
  key: string;
  storedKey?: string;
  inFlight: number;
  closing: boolean;
  idle: (() => void) | null;
}

export class LoraRegistry {
  private readonly entries = new Map<string, Entry>();
  private loads = 0;

  constructor(
    /** The pool, created on the first load with room for at least `floats` at rank `rank` (its pipelines come with it, once). */
    private readonly pool: (floats: number, rank: number) => Promise<LoraPool>,
    /** An adapter is gone: forget the pages keyed under its namespace. */
    private readonly onUnloaded: (key: string) => void,
  ) {}

  get names(): string[] {
    return [...this.entries.keys()];
  }

  list(): LoraInfo[] {
    return [...this.entries.values()].map((e) => ({ ...e.info, targets: [...e.info.targets] }));
  }

  has(name: string): boolean {
    const e = this.entries.get(name);
    return e !== undefined && !e.closing;
  }

  /** Puts a fitted adapter (its q/k rows in the base's order) into the pool under `name`. */
  async add(name: string, adapter: LoraAdapter, source: string, scale: number, storedKey?: string): Promise<LoraInfo> {
    if (this.entries.has(name)) throw new LoraExistsError(name);
    const floats = adapter.weights.reduce((sum, w) => sum + w.rank * (w.inFeatures + w.outFeatures), 0);
    const pool = await this.pool(floats, Math.max(0, ...adapter.weights.map((w) => w.rank)));
    if (this.entries.has(name)) throw new LoraExistsError(name); // loaded by a concurrent call meanwhile
    let id: number;
    try {
      id = pool.load(adapter, name, scale);
    } catch (e) {
      if (e instanceof LoraPoolError) throw new LoraPoolFullError(e.message);
      throw e;
    }
    const targets = LORA_TARGETS.filter((t) => adapter.weights.some((w) => w.target === t));
    const info: LoraInfo = { name, source, format: adapter.format, rank: Math.max(0, ...adapter.weights.map((w) => w.rank)), targets, scale };
    this.entries.set(name, { info, adapter, id, key: `lora:${name}#${++this.loads}`, ...(storedKey ? { storedKey } : {}), inFlight: 0, closing: false, idle: null });
    return { ...info, targets: [...targets] };
  }

  /** A request's hold on `name`; throws LoraNotFoundError when it is not loaded (or being unloaded). */
  acquire(name: string, param: string | null = 'model'): LoraLease {
    const e = this.entries.get(name);
    if (!e || e.closing) throw new LoraNotFoundError(name, this.names.filter((n) => this.has(n)), param);
    e.inFlight++;
    let released = false;
    return {
      // Read at each step: a new device's pool may place the adapter elsewhere (`reload`).
      get id() {
        return e.id;
      },
      key: e.key,
      ...(e.storedKey ? { storedKey: e.storedKey } : {}),
      release: () => {
        if (released) return;
        released = true;
        if (--e.inFlight === 0) e.idle?.();
      },
    };
  }

  /**
   * Loads every adapter again into `pool`, a new device's (the old one was lost with its device),
   * in the order they were placed; requests in flight follow their adapter to its new place.
   */
  reload(pool: LoraPool): void {
    for (const e of [...this.entries.values()].sort((a, b) => a.id - b.id)) e.id = pool.load(e.adapter, e.info.name, e.info.scale);
  }

  /**
   * Refuses new requests for `name` from this call on (synchronously), then, once the requests in
   * flight finished, frees it from `pool`.
   */
  remove(name: string, pool: () => Promise<LoraPool>): Promise<void> {
    const e = this.entries.get(name);
    if (!e || e.closing) return Promise.reject(new LoraNotFoundError(name, this.names.filter((n) => this.has(n)), 'lora_name'));
    e.closing = true;
    const idle = e.inFlight > 0 ? new Promise<void>((resolve) => (e.idle = resolve)) : Promise.resolve();
    return idle.then(async () => {
      (await pool()).unload(e.id);
      this.onUnloaded(e.key);
      this.entries.delete(name);
    });
  }
}

export type { LoraInfo };
