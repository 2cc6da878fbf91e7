/**
 * The browser KV page store in the Origin Private File System: `<root>/<model key>/<page hash>.kv`,
 * written from wherever the engine runs (its Worker by default) through createWritable, whose
 * swap file replaces the target only on close(), so a crash never leaves half a page under its
 * name. Recency: a file's lastModified when the store opens, each read or write after that (OPFS
 * cannot touch a file's time without rewriting it). A denied quota (QuotaExceededError) is thrown
 * from `write`: the persister then turns itself off with a warning.
 */
import { KV_STORE_BUDGET, type KvStore } from './kv-store';

type Dir = FileSystemDirectoryHandle & { entries(): AsyncIterable<[string, FileSystemHandle]> };

export function opfsKvStore(rootName = 'webgpu-llm-kv', budgetBytes: number = KV_STORE_BUDGET.browser): KvStore {
  const index = new Map<string, { bytes: number; used: number }>();
  let total = 0;
  let last = 0;
  const now = () => (last = Math.max(Date.now(), last + 0.001));
  let rootP: Promise<Dir> | undefined;
  const root = () => (rootP ??= navigator.storage.getDirectory().then((d) => d.getDirectoryHandle(rootName, { create: true }) as Promise<Dir>));
  const split = (name: string) => {
    const at = name.indexOf('/');
    return { model: name.slice(0, at), file: `${name.slice(at + 1)}.kv` };
  };
  const forget = (name: string) => {
    const e = index.get(name);
    if (e) (total -= e.bytes), index.delete(name);
  };
  let opened: Promise<void> | null = null;

  const store: KvStore = {
    name: `OPFS ${rootName}`,
    open: () =>
      (opened ??= (async () => {
        for await (const [model, handle] of (await root()).entries()) {
          if (handle.kind !== 'directory') continue;
          for await (const [file, h] of (handle as Dir).entries()) {
            if (h.kind !== 'file' || !file.endsWith('.kv')) continue;
            const f = await (h as FileSystemFileHandle).getFile();
            index.set(`${model}/${file.slice(0, -3)}`, { bytes: f.size, used: f.lastModified });
            total += f.size;
          }
        }
      })()),
    has: (name) => index.has(name),
    async read(name) {
      await store.open();
      const e = index.get(name);
      if (!e) return null;
      const { model, file } = split(name);
      try {
        const dir = await (await root()).getDirectoryHandle(model);
        const bytes = new Uint8Array(await (await (await dir.getFileHandle(file)).getFile()).arrayBuffer());
        e.used = now();
        return bytes;
      } catch {
        forget(name);
        return null;
      }
    },
    async write(name, bytes) {
      await store.open();
      if (bytes.length > budgetBytes) return;
      const { model, file } = split(name);
      const dir = await (await root()).getDirectoryHandle(model, { create: true });
      const w = await (await dir.getFileHandle(file, { create: true })).createWritable();
      try {
        await w.write(bytes as Uint8Array<ArrayBuffer>);
        await w.close();
      } catch (e) {
        await w.abort().catch(() => {});
        throw e;
      }
      forget(name);
      index.set(name, { bytes: bytes.length, used: now() });
      total += bytes.length;
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
      const { model, file } = split(name);
      await (await root())
        .getDirectoryHandle(model)
        .then((d) => d.removeEntry(file))
        .catch(() => {});
    },
    async label(model, source) {
      const dir = await (await root()).getDirectoryHandle(model, { create: true });
      const w = await (await dir.getFileHandle('source.json', { create: true })).createWritable();
      await w.write(JSON.stringify({ modelKey: source }));
      await w.close();
    },
  };
  return store;
}

/** Removes the KV pages of a model (by the loader's model key) from the OPFS store; whether there were any. */
export async function deleteOpfsKvPages(modelKey: string, rootName = 'webgpu-llm-kv'): Promise<boolean> {
  let root: Dir;
  try {
    root = (await (await navigator.storage.getDirectory()).getDirectoryHandle(rootName)) as Dir;
  } catch {
    return false;
  }
  const doomed: string[] = [];
  for await (const [model, handle] of root.entries()) {
    if (handle.kind !== 'directory') continue;
    const label = await (handle as FileSystemDirectoryHandle)
      .getFileHandle('source.json')
      .then((h) => h.getFile())
      .then((f) => f.text())
      .catch(() => null);
    if (label !== null && (JSON.parse(label) as { modelKey?: unknown }).modelKey === modelKey) doomed.push(model);
  }
  for (const model of doomed) await root.removeEntry(model, { recursive: true });
  return doomed.length > 0;
}
