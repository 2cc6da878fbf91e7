/**
 * The Node KV page store: one file per page, `<dir>/<model key>/<page hash>.kv`, written to a temp
 * file and renamed into place (a crash never leaves half a page under its name). Recency is the
 * file's modification time, set again on each read, so the least-recently-used order survives a
 * restart; `open` reads it back from the directory. `node:*` modules are imported on first use so
 * this module stays loadable in a browser bundle.
 */
import { indexedKvStore, KV_STORE_BUDGET, type KvStore } from './kv-store';

export function nodeKvStore(dir: string, budgetBytes: number = KV_STORE_BUDGET.node): KvStore {
  const fs = () => import('node:fs/promises');
  const path = (name: string) => `${dir}/${name}.kv`;
  let temps = 0;
  return indexedKvStore(
    dir,
    {
      async list() {
        const { readdir, stat, unlink } = await fs();
        const out: Array<{ name: string; bytes: number; used: number }> = [];
        for (const model of await readdir(dir).catch(() => [] as string[])) {
          for (const file of await readdir(`${dir}/${model}`).catch(() => [] as string[])) {
            const full = `${dir}/${model}/${file}`;
            // A temp file is what a crashed write left.
            if (file.endsWith('.tmp')) await unlink(full).catch(() => {});
            if (!file.endsWith('.kv')) continue;
            const st = await stat(full).catch(() => null);
            if (st?.isFile()) out.push({ name: `${model}/${file.slice(0, -3)}`, bytes: st.size, used: st.mtimeMs });
          }
        }
        return out;
      },
      async read(name) {
        const buf = await (await fs()).readFile(path(name));
        return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength) as Uint8Array<ArrayBuffer>;
      },
      touch(name) {
        void fs().then(({ utimes }) => utimes(path(name), new Date(), new Date()).catch(() => {}));
      },
      async write(name, bytes) {
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
      },
      remove: async (name) => (await fs()).unlink(path(name)),
      async label(model, source) {
        const { mkdir, writeFile } = await fs();
        await mkdir(`${dir}/${model}`, { recursive: true });
        await writeFile(`${dir}/${model}/${SOURCE_FILE}`, JSON.stringify({ modelKey: source }));
      },
    },
    budgetBytes,
  );
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
