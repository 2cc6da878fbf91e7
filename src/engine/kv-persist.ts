/**
 * The prefix cache kept across restarts and reloads: full KV pages of the prefix cache
 * (./prefix-cache.ts) are written to a store (src/loader/kv-store.ts) behind the scenes, and a
 * prompt whose prefix the GPU no longer holds gets them uploaded instead of computed.
 *
 * Writing never waits on the step loop: as a page enters the prefix cache (right after the step
 * that fills it was submitted), its copy into a staging buffer is queued on the GPU behind that
 * step, in one command buffer for every page that entered in the same turn; mapping, hashing
 * and the file write run while later steps do. Staging buffers are made once per device; when all are
 * being read back, pages wait (and are dropped if evicted meanwhile). A store that refuses a write
 * (a full disk, a denied quota) turns persistence off with a warning; a request never fails for it.
 *
 * Reading happens before a sequence is queued (`restore`): the pages after its longest prefix on
 * the GPU, as long as the store has them in order, are read, checked (./kv-page-file.ts: a
 * corrupt, truncated or foreign file is removed with a warning, and the prompt computes from
 * there), written into free pages of the pool and entered into the prefix cache, where the
 * sequence's admission adopts them like any cached page (they count as `cached_tokens`).
 */
import type { OpenedModel } from '../model/open';
import type { KvStore } from '../loader/kv-store';
import { decodePageFile, encodePageFile, hashKey, pageName, type PageKey } from './kv-page-file';
import type { KvPages } from './kv-pages';
import type { LoraAdapter } from '../lora/types';
import type { PrefixCache, PrefixNode } from './prefix-cache';

/** One paged layer's K and V buffers and the bytes of one token's row in each. */
export interface PagedLayer {
  k: GPUBuffer;
  v: GPUBuffer;
  rowBytes: number;
}

/** What the persister reads and writes on the device now (a new one after a recovered loss). */
export interface PersistTarget {
  device: GPUDevice;
  layers: readonly PagedLayer[];
}

export interface KvPersistOptions {
  store: KvStore;
  /** The loader's model key, recorded beside the pages so deleting the cached model removes them too. */
  source?: string;
  /** Default console.warn. */
  warn?: (message: string) => void;
}

/** Bytes of staging buffers per device (two halves: one is filled while the other is read back). */
const STAGING_BYTES = 16 * 2 ** 20;
/** Page bytes waiting for the store at most; past it new pages are not persisted until it catches up. */
const MAX_QUEUED_BYTES = 64 * 2 ** 20;
/** The KV sequence id restored pages are allocated under (never a slot). */
const RESTORE_SEQ = -1;

/**
 * The model's fingerprint: a hash of its configuration, its tensors' names, types and shapes, and
 * the first and last KiB of each tensor's bytes (a fine-tune of the same architecture differs in
 * all of them; hashing every weight would cost a second read of the model).
 */
export async function modelFingerprint(opened: OpenedModel): Promise<string> {
  const names = [...opened.tensors.keys()].sort();
  const chunks: Uint8Array[] = [];
  const table: Array<string | number> = [JSON.stringify(opened.config)];
  for (const name of names) {
    const { info, source } = opened.tensors.get(name)!;
    table.push(name, info.dtype, info.shape.join('x'), info.byteLength);
    const n = Math.min(1024, info.byteLength);
    chunks.push(await source.read(info.offset, n));
    if (info.byteLength > n) chunks.push(await source.read(info.offset + info.byteLength - n, n));
  }
  return hashKey(table, chunks);
}

/**
 * The namespace an adapter's pages are stored under: a hash of its content (every A and B, ranks,
 * scales, q/k row order) and the load's scale, so a restarted engine loading the same adapter, under
 * any name, reads them back, and another adapter (or the base, namespace '') never does.
 */
export async function adapterFingerprint(adapter: LoraAdapter, scale: number): Promise<string> {
  const table: Array<string | number> = [adapter.qkRows, scale];
  const chunks: Uint8Array[] = [];
  for (const w of adapter.weights) {
    table.push(w.layer, w.target, w.rank, w.inFeatures, w.outFeatures, w.scale);
    for (const t of [w.a, w.b]) chunks.push(new Uint8Array(t.buffer, t.byteOffset, t.byteLength));
  }
  return `lora:${await hashKey(table, chunks)}`;
}

interface Pending {
  page: number;
  node: PrefixNode;
  key: PageKey;
}

export class KvPersister {
  private readonly store: KvStore;
  private readonly warn: (message: string) => void;
  private disabled = false;
  /** Prefix-cache namespace -> the namespace its pages are stored under; the base model's is ''. */
  private readonly namespaces = new Map<string, string>([['', '']]);
  private pending: Pending[] = [];
  private scheduled = false;
  /** The device the staging buffers belong to, and those not being read back. */
  private stagingDevice: GPUDevice | null = null;
  private idle: GPUBuffer[] = [];
  private readonly pagesPerStaging: number;
  private queuedBytes = 0;
  /** Staging buffers being read back. */
  private reading = 0;
  /** Devices known lost: what their staging buffers read back is not written. */
  private readonly lost = new WeakSet<GPUDevice>();
  private writes: Promise<void> = Promise.resolve();
  /** Pages written and restored since load (tests and stats). */
  readonly counters = { written: 0, restored: 0, refused: 0 };

  constructor(
    opts: KvPersistOptions,
    /** The model key (fingerprint, precision, layout): every page name and file carries it. */
    readonly modelKey: string,
    private readonly kv: KvPages,
    private readonly prefix: PrefixCache,
    private readonly target: () => PersistTarget,
    readonly pageBytes: number,
  ) {
    this.store = opts.store;
    this.warn = opts.warn ?? ((m) => console.warn(`webgpu-llm: ${m}`));
    this.pagesPerStaging = Math.max(1, Math.floor(STAGING_BYTES / 2 / pageBytes));
    prefix.onCached = (page, ids, namespace, node, marked) => !marked && this.cached(page, ids, namespace, node);
  }

  /**
   * Stores the pages of prefix-cache namespace `namespace` (a loaded adapter's, new at each load)
   * under `stored` (its content's: adapterFingerprint), until `forget`.
   */
  name(namespace: string, stored: string): void {
    this.namespaces.set(namespace, stored);
  }

  /** An adapter was unloaded: its namespace's pages are gone. */
  forget(namespace: string): void {
    if (namespace !== '') this.namespaces.delete(namespace);
  }

  /** Waits for the store's index (before the first request) and for writes under way (tests, shutdown). */
  async settle(): Promise<void> {
    await this.store.open().catch(() => {});
    for (;;) {
      if (this.pending.length && this.idle.length) this.flush();
      const w = this.writes;
      await w;
      // Pages still pending with no staging buffer left and none being read: their buffers went with a lost device.
      if (w === this.writes && !this.reading && (!this.pending.length || !this.idle.length)) return;
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  private off(why: string): void {
    if (this.disabled) return;
    this.disabled = true;
    this.pending = [];
    this.warn(`KV persistence is off: ${why}`);
  }

  /** A page entered the prefix cache (its step already submitted): queue its copy for this turn's flush (`ids` are its own copy). */
  private cached(page: number, ids: readonly number[], namespace: string, node: PrefixNode): void {
    // Pages after an image are not persisted (their key is the image's hash, not the ids): `marked`.
    const stored = this.namespaces.get(namespace);
    if (this.disabled || stored === undefined) return;
    if (this.queuedBytes + this.pageBytes > MAX_QUEUED_BYTES) return;
    this.pending.push({ page, node, key: { model: this.modelKey, namespace: stored, pageSize: this.kv.pageSize, ids } });
    this.queuedBytes += this.pageBytes;
    if (!this.scheduled) (this.scheduled = true), queueMicrotask(() => this.flush());
  }

  /** The staging buffers of the device now (made once per device). */
  private stagingFor(device: GPUDevice): void {
    if (this.stagingDevice === device) return;
    for (const b of this.idle) b.destroy();
    this.stagingDevice = device;
    void device.lost.then(() => this.lost.add(device));
    const size = this.pagesPerStaging * this.pageBytes;
    this.idle = [0, 1].map((i) => device.createBuffer({ size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST, label: `kv persist staging ${i}` }));
  }

  /**
   * Copies pending pages into free staging buffers, behind every step submitted so far, and reads
   * them back. A page the prefix cache evicted meanwhile is skipped: its page may hold another's
   * K/V by now.
   */
  private flush(): void {
    this.scheduled = false;
    if (this.disabled) return;
    const { device, layers } = this.target();
    this.stagingFor(device);
    const ps = this.kv.pageSize;
    while (this.pending.length && this.idle.length) {
      const batch: Pending[] = [];
      while (batch.length < this.pagesPerStaging && this.pending.length) {
        const p = this.pending.shift()!;
        if (this.prefix.holds(p.node)) batch.push(p);
        else this.queuedBytes -= this.pageBytes;
      }
      if (!batch.length) return;
      const buffer = this.idle.pop()!;
      const encoder = device.createCommandEncoder({ label: 'kv persist' });
      batch.forEach((p, i) => {
        let at = i * this.pageBytes;
        for (const l of layers) {
          const bytes = ps * l.rowBytes;
          for (const src of [l.k, l.v]) encoder.copyBufferToBuffer(src, p.page * bytes, buffer, at, bytes), (at += bytes);
        }
      });
      device.queue.submit([encoder.finish()]);
      this.reading++;
      buffer.mapAsync(GPUMapMode.READ).then(
        () => {
          const bytes = new Uint8Array(buffer.getMappedRange(0, batch.length * this.pageBytes)).slice();
          buffer.unmap();
          if (this.stagingDevice === device) this.idle.push(buffer);
          // A task later, so a loss of the device has been seen: a lost device's copies may not have run.
          setTimeout(() => {
            this.reading--;
            batch.forEach((p, i) => {
              if (this.lost.has(device) || !this.prefix.holds(p.node)) this.queuedBytes -= this.pageBytes;
              else this.write(p.key, bytes.subarray(i * this.pageBytes, (i + 1) * this.pageBytes));
            });
            if (this.pending.length) this.flush();
          });
        },
        () => {
          this.reading--;
          // The device was lost under the read: those pages are gone (the prefix cache forgot them too).
          this.queuedBytes -= batch.length * this.pageBytes;
        },
      );
    }
  }

  /** Hashes and stores one page, one write at a time. */
  private write(key: PageKey, payload: Uint8Array): void {
    this.writes = this.writes.then(async () => {
      this.queuedBytes -= this.pageBytes;
      if (this.disabled) return;
      const name = await pageName(key);
      if (this.store.has(name)) return;
      try {
        await this.store.write(name, await encodePageFile(key, payload));
        this.counters.written++;
      } catch (e) {
        this.off(`cannot write to ${this.store.name}: ${(e as Error).message}`);
      }
    });
  }

  /**
   * Uploads the stored pages that continue the longest prefix of `ids` the GPU holds, up to
   * `maxTokens` tokens (a prompt keeps its last token to compute), into the prefix cache.
   */
  async restore(ids: readonly number[], maxTokens: number, namespace = ''): Promise<void> {
    const stored = this.namespaces.get(namespace);
    if (this.disabled || stored === undefined) return;
    try {
      await this.store.open();
    } catch (e) {
      return this.off(`cannot read ${this.store.name}: ${(e as Error).message}`);
    }
    const ps = this.kv.pageSize;
    const full = Math.floor(Math.min(maxTokens, ids.length) / ps);
    const have = this.prefix.match(ids, maxTokens, namespace).length;
    const payloads: Uint8Array<ArrayBuffer>[] = [];
    for (let p = have; p < full; p++) {
      const key: PageKey = { model: this.modelKey, namespace: stored, pageSize: ps, ids: ids.slice(0, (p + 1) * ps) };
      const name = await pageName(key);
      if (!this.store.has(name)) break;
      const file = await this.store.read(name);
      if (!file) break;
      const got = await decodePageFile(file, key, this.pageBytes);
      if ('refused' in got) {
        this.counters.refused++;
        this.warn(`KV page ${name} in ${this.store.name} ignored and removed: ${got.refused}`);
        await this.store.remove(name);
        break;
      }
      payloads.push(got.payload);
    }
    if (!payloads.length || this.disabled) return;
    // The reads took a while: the GPU may hold more (or less) of the prefix now.
    const matched = this.prefix.match(ids, maxTokens, namespace);
    if (matched.length < have || matched.length >= have + payloads.length) return;
    const fresh = payloads.slice(matched.length - have);
    // Under a sequence id of its own, so the pages it holds are not reclaimed while it allocates.
    this.kv.adopt(RESTORE_SEQ, matched);
    try {
      this.kv.append(RESTORE_SEQ, fresh.length * ps);
    } catch {
      this.kv.release(RESTORE_SEQ);
      return; // no room in the pool now: the prompt computes them
    }
    const table = this.kv.table(RESTORE_SEQ);
    const { device, layers } = this.target();
    fresh.forEach((payload, i) => {
      const page = table[matched.length + i]!;
      let at = 0;
      for (const l of layers) {
        const bytes = ps * l.rowBytes;
        for (const dst of [l.k, l.v]) device.queue.writeBuffer(dst, page * bytes, payload, at, bytes), (at += bytes);
      }
    });
    // Restored pages enter the prefix cache without being written back.
    const hook = this.prefix.onCached;
    this.prefix.onCached = null;
    this.prefix.extend(ids, table, this.prefix.cursor(namespace), table.length * ps);
    this.prefix.onCached = hook;
    this.kv.release(RESTORE_SEQ);
    this.counters.restored += fresh.length;
  }

  destroy(): void {
    this.disabled = true;
    for (const b of this.idle) b.destroy();
    this.idle = [];
  }
}
