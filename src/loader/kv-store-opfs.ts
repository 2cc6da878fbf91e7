/**
 * The browser KV page store in the Origin Private File System: `<root>/<model key>/<page hash>.kv`,
 * written from wherever the engine runs (its Worker by default) through createWritable, whose
 * swap file replaces the target only on close(), so a crash never leaves half a page under its
 * name. Recency: a file's lastModified when the store opens, each read or write after that (OPFS
 * cannot touch a file's time without rewriting it). A denied quota (QuotaExceededError) is thrown
 * from `write`: the persister then turns itself off with a warning.
 */
import { indexedKvStore, KV_STORE_BUDGET, type KvStore } from './kv-store';

type Dir = FileSystemDirectoryHandle & { entries(): AsyncIterable<[string, FileSystemHandle]> };

export function opfsKvStore(rootName = 'webgpu-llm-kv', budgetBytes: number = KV_STORE_BUDGET.browser): KvStore {
  let rootP: Promise<Dir> | undefined;
  const root = () => (rootP ??= navigator.storage.getDirectory().then((d) => d.getDirectoryHandle(rootName, { create: true }) as Promise<Dir>));
  const split = (name: string) => {
    const at = name.indexOf('/');
    return { model: name.slice(0, at), file: `${name.slice(at + 1)}.kv` };
  };
  /** Writes `data` to `file` in the model's folder (made if needed), whole or not at all. */
  const put = async (model: string, file: string, data: Uint8Array | string): Promise<void> => {
    const dir = await (await root()).getDirectoryHandle(model, { create: true });
    const w = await (await dir.getFileHandle(file, { create: true })).createWritable();
    try {
      await w.write(data as Uint8Array<ArrayBuffer> | string);
      await w.close();
    } catch (e) {
      await w.abort().catch(() => {});
      throw e;
    }
  };
  return indexedKvStore(
    `OPFS ${rootName}`,
    {
      async list() {
        const out: Array<{ name: string; bytes: number; used: number }> = [];
        for await (const [model, handle] of (await root()).entries()) {
          if (handle.kind !== 'directory') continue;
          for await (const [file, h] of (handle as Dir).entries()) {
            if (h.kind !== 'file' || !file.endsWith('.kv')) continue;
            const f = await (h as FileSystemFileHandle).getFile();
            out.push({ name: `${model}/${file.slice(0, -3)}`, bytes: f.size, used: f.lastModified });
          }
        }
        return out;
      },
      async read(name) {
        const { model, file } = split(name);
        const dir = await (await root()).getDirectoryHandle(model);
        return new Uint8Array(await (await (await dir.getFileHandle(file)).getFile()).arrayBuffer());
      },
      write: (name, bytes) => {
        const { model, file } = split(name);
        return put(model, file, bytes);
      },
      async remove(name) {
        const { model, file } = split(name);
        await (await (await root()).getDirectoryHandle(model)).removeEntry(file);
      },
      label: (model, source) => put(model, 'source.json', JSON.stringify({ modelKey: source })),
    },
    budgetBytes,
  );
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
