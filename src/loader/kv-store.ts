/**
 * Where persisted KV pages live (src/engine/kv-persist.ts): a directory in Node
 * (./kv-store-node.ts). Names are `<model key>/<page hash>`; the store keeps its total size
 * within a budget by removing the least recently used pages (a read or a write is a use).
 */
export interface KvStore {
  /** Where the pages go (warnings name it). */
  readonly name: string;
  /** Reads what the store holds (names, sizes, last uses); the other calls wait for it. */
  open(): Promise<void>;
  /** Whether a page is there (after `open`). */
  has(name: string): boolean;
  /** A page's bytes, or null when it is not there; a read counts as a use. */
  read(name: string): Promise<Uint8Array<ArrayBuffer> | null>;
  /** Stores a page whole or not at all, then evicts the least recently used past the budget. Throws when the storage refuses (full, denied). */
  write(name: string, bytes: Uint8Array): Promise<void>;
  remove(name: string): Promise<void>;
  /** Records which model (the loader's model key) a model key's pages belong to, so deleting that model can find them. */
  label(model: string, source: string): Promise<void>;
}

/** Default store budgets in bytes. */
export const KV_STORE_BUDGET = { node: 4 * 2 ** 30, browser: 2 ** 30 } as const;

/** A store's files where they live (Node's directory, an OPFS folder): `indexedKvStore` keeps the index and the budget over them. */
export interface KvFiles {
  /** Every page file there: its name, size and last use (leftovers of crashed writes removed). */
  list(): Promise<Array<{ name: string; bytes: number; used: number }>>;
  /** A page file's bytes (throws when it is gone). */
  read(name: string): Promise<Uint8Array<ArrayBuffer>>;
  /** Writes a page file whole or not at all. */
  write(name: string, bytes: Uint8Array): Promise<void>;
  /** Records a use where the files keep it (Node: the file's time), if they do. */
  touch?(name: string): void;
  remove(name: string): Promise<void>;
  label(model: string, source: string): Promise<void>;
}

/** A KvStore over `files`: an index read at open, each read and write a use, the least recently used removed past the budget. */
export function indexedKvStore(name: string, files: KvFiles, budgetBytes: number): KvStore {
  const index = new KvIndex(budgetBytes);
  let opened: Promise<void> | null = null;
  const store: KvStore = {
    name,
    open: () => (opened ??= files.list().then((all) => all.forEach((f) => index.add(f.name, f.bytes, f.used)))),
    has: (page) => index.has(page),
    async read(page) {
      await store.open();
      if (!index.has(page)) return null;
      try {
        const bytes = await files.read(page);
        index.touch(page);
        files.touch?.(page);
        return bytes;
      } catch {
        index.forget(page);
        return null;
      }
    },
    async write(page, bytes) {
      await store.open();
      if (bytes.length > budgetBytes) return;
      await files.write(page, bytes);
      index.add(page, bytes.length);
      // Least recently used first, never the page just written.
      for (const old of index.overBudget(page)) await store.remove(old);
    },
    async remove(page) {
      index.forget(page);
      await files.remove(page).catch(() => {});
    },
    label: (model, source) => files.label(model, source),
  };
  return store;
}

/** What a store holds (each page's size and last use) and which pages go to keep it within its budget. */
class KvIndex {
  private readonly entries = new Map<string, { bytes: number; used: number }>();
  private total = 0;
  private last = 0;

  constructor(readonly budgetBytes: number) {}

  /** Strictly increasing use times: two uses within a millisecond keep their order. */
  private now(): number {
    return (this.last = Math.max(Date.now(), this.last + 0.001));
  }

  has(name: string): boolean {
    return this.entries.has(name);
  }

  /** A page stored (`used`: when, for pages found at open; default now). */
  add(name: string, bytes: number, used = this.now()): void {
    this.forget(name);
    this.entries.set(name, { bytes, used });
    this.total += bytes;
  }

  /** A page used now. */
  touch(name: string): void {
    const e = this.entries.get(name);
    if (e) e.used = this.now();
  }

  forget(name: string): void {
    const e = this.entries.get(name);
    if (e) (this.total -= e.bytes), this.entries.delete(name);
  }

  /** The least recently used pages to remove so the rest fits the budget, never `keep` (the page just written). */
  overBudget(keep: string): string[] {
    const out: string[] = [];
    let total = this.total;
    for (const [name, e] of [...this.entries].sort((a, b) => a[1].used - b[1].used)) {
      if (total <= this.budgetBytes) break;
      if (name === keep) continue;
      out.push(name);
      total -= e.bytes;
    }
    return out;
  }
}
