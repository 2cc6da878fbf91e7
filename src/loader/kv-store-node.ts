/**
 * The Node KV page store: one file per page, `<dir>/<model key>/<page hash>.kv`, written to a temp
 * file and renamed into place (a crash never leaves half a page under its name). Recency is the
 * file's modification time, set again on each read, so the least-recently-used order survives a
 * restart; `open` reads it back from the directory. `node:*` modules are imported on first use so
 * this module stays loadable in a browser bundle.
 */
import { KV_STORE_BUDGET, type KvStore } from './kv-store';

export function nodeKvStore(dir: string, budgetBytes: number = KV_STORE_BUDGET.node): KvStore {
  const fs = () => import('node:fs/promises');
  /** Size and last use of each page, by name. */
  const index = new Map<string, { bytes: number; used: number }>();
  let total = 0;
  let opened: Promise<void> | null = null;
  const path = (name: string) => `${dir}/${name}.kv`;
  let temps = 0;
  // Strictly increasing use times: two uses within a millisecond keep their order.
  let last = 0;
  const now = () => (last = Math.max(Date.now(), last + 0.001));

  const forget = (name: string) => {
    const e = index.get(name);
    if (e) (total -= e.bytes), index.delete(name);
  };

  const store: KvStore = {
    name: dir,
    open: () =>
      (opened ??= (async () => {
        const { readdir, stat, unlink } = await fs();
        for (const model of await readdir(dir).catch(() => [] as string[])) {
          for (const file of await readdir(`${dir}/${model}`).catch(() => [] as string[])) {
            const full = `${dir}/${model}/${file}`;
            // A temp file is what a crashed write left.
            if (file.endsWith('.tmp')) await unlink(full).catch(() => {});
            if (!file.endsWith('.kv')) continue;
            const st = await stat(full).catch(() => null);
            if (!st?.isFile()) continue;
            index.set(`${model}/${file.slice(0, -3)}`, { bytes: st.size, used: st.mtimeMs });
            total += st.size;
          }
        }
      })()),
    has: (name) => index.has(name),
    async read(name) {
      await store.open();
      const e = index.get(name);
      if (!e) return null;
      const { readFile, utimes } = await fs();
      try {
        const buf = await readFile(path(name));
        e.used = now();
        void utimes(path(name), new Date(), new Date()).catch(() => {});
        return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength) as Uint8Array<ArrayBuffer>;
      } catch {
        forget(name);
        return null;
      }
    },
    async write(name, bytes) {
      await store.open();
      if (bytes.length > budgetBytes) return;
      const { mkdir, writeFile, rename, unlink } = await fs();
      const file = path(name);
      const tmp = `${file}.${process.pid}.${++temps}.tmp`;
      try {
        await mkdir(file.slice(0, file.lastIndexOf('/')), { recursive: true });
        await writeFile(tmp, bytes);
        await rename(tmp, file);
      } catch (e) {
        await unlink(tmp).catch(() => {});
        throw e;
      }
      forget(name);
      index.set(name, { bytes: bytes.length, used: now() });
      total += bytes.length;
      // Least recently used first, never the page just written.
      if (total > budgetBytes) {
        const order = [...index].filter(([n]) => n !== name).sort((a, b) => a[1].used - b[1].used);
        for (const [n] of order) {
          if (total <= budgetBytes) break;
          await store.remove(n);
        }
      }
    },
    async remove(name) {
      forget(name);
      await (await fs()).unlink(path(name)).catch(() => {});
    },
    async label(model, source) {
      const { mkdir, writeFile } = await fs();
      await mkdir(`${dir}/${model}`, { recursive: true });
      await writeFile(`${dir}/${model}/${SOURCE_FILE}`, JSON.stringify({ modelKey: source }));
    },
  };
  return store;
}

/** The file naming the loaded model a model key's pages came from (KvStore.label). */
const SOURCE_FILE = 'source.json';

/** Removes the KV pages of a model (by the loader's model key) from `dir`; whether there were any. */
export async function deleteKvPages(dir: string, modelKey: string): Promise<boolean> {
  const { readdir, readFile, rm } = await import('node:fs/promises');
  let found = false;
  for (const model of await readdir(dir).catch(() => [] as string[])) {
    const label = await readFile(`${dir}/${model}/${SOURCE_FILE}`, 'utf8').catch(() => null);
    if (label === null || (JSON.parse(label) as { modelKey?: unknown }).modelKey !== modelKey) continue;
    await rm(`${dir}/${model}`, { recursive: true, force: true });
    found = true;
  }
  return found;
}

/** Where Node keeps KV pages unless told otherwise: `kv` in the model cache directory. */
export async function defaultKvDir(): Promise<string> {
  const { defaultCacheDir } = await import('./cache-node');
  return `${await defaultCacheDir()}/kv`;
}
