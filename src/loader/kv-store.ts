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
