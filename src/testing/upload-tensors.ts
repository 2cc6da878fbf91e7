/**
 * uploadTensors(): hands an opened model's tensors to a callback one at a time, in file-offset
 * order (sequential reads of each file), reading each through its byte source, with the load's
 * progress and abort. At most two tensors are in memory: the one being handed over and the next
 * one being read. Test support: the loader's tests read a model through it (the engine uploads
 * its weights itself, src/engine/gpu-weights.ts).
 */
import type { TensorInfo } from '../formats/types';
import type { OpenedModel, OpenedTensor } from '../model/open';
import { abortedError, toLoadError } from '../loader/errors';
import { ProgressEmitter, type FileProgress, type ProgressCallback } from '../loader/progress';

/** Receives one tensor's bytes as stored; `name` is the canonical name. */
export type UploadFn = (name: string, info: TensorInfo, bytes: Uint8Array) => void | Promise<void>;

export interface UploadOptions {
  onProgress?: ProgressCallback;
  /** A load's shared emitter (wins over onProgress). */
  progress?: ProgressEmitter;
  signal?: AbortSignal;
  /** Only the tensors this accepts (default all). */
  filter?: (name: string, info: TensorInfo) => boolean;
}

export interface UploadResult {
  tensors: number;
  bytes: number;
}

export async function uploadTensors(
  opened: Pick<OpenedModel, 'tensors'>,
  upload: UploadFn,
  options: UploadOptions | ProgressCallback = {},
): Promise<UploadResult> {
  const opts = typeof options === 'function' ? { onProgress: options } : options;
  const progress = opts.progress ?? new ProgressEmitter(opts.onProgress);
  const { signal } = opts;

  const order = uploadOrder(opened.tensors, opts.filter);
  // Every file's total up front, so the first event already knows the whole size.
  const files = new Map<string, { progress: FileProgress; left: number }>();
  const perFile = new Map<string, number>();
  for (const [, t] of order) perFile.set(t.source.name, (perFile.get(t.source.name) ?? 0) + t.info.byteLength);
  for (const [file, bytes] of perFile) files.set(file, { progress: progress.phase('upload').file(file, bytes), left: bytes });

  const read = (t: OpenedTensor): Promise<Uint8Array> => {
    if (signal?.aborted) return Promise.reject(abortedError(t.source.name));
    return t.source.read(t.info.offset, t.info.byteLength).catch((e: unknown) => {
      throw toLoadError(e, { file: t.source.name }, signal);
    });
  };

  let bytes = 0;
  let next = order.length > 0 ? read(order[0][1]) : undefined;
  for (let i = 0; i < order.length; i++) {
    const [name, t] = order[i];
    const data = await next!;
    // Read the next tensor while this one uploads; a failure surfaces when it is awaited.
    next = i + 1 < order.length ? read(order[i + 1][1]) : undefined;
    next?.catch(() => {});
    if (signal?.aborted) throw abortedError(t.source.name);
    await upload(name, t.info, data);
    bytes += data.length;
    const f = files.get(t.source.name)!;
    f.left -= t.info.byteLength;
    if (f.left === 0) f.progress.done();
    else f.progress.add(t.info.byteLength);
  }
  return { tensors: order.length, bytes };
}

/** Tensors grouped by file (in first-seen order) and sorted by offset within each. */
export function uploadOrder(
  tensors: ReadonlyMap<string, OpenedTensor>,
  filter?: (name: string, info: TensorInfo) => boolean,
): Array<[string, OpenedTensor]> {
  const fileRank = new Map<string, number>();
  const list: Array<[string, OpenedTensor]> = [];
  for (const [name, t] of tensors) {
    if (filter && !filter(name, t.info)) continue;
    if (!fileRank.has(t.source.name)) fileRank.set(t.source.name, fileRank.size);
    list.push([name, t]);
  }
  return list.sort(
    ([, a], [, b]) => fileRank.get(a.source.name)! - fileRank.get(b.source.name)! || a.info.offset - b.info.offset,
  );
}
