/**
 * openModelWithCache() over real HTTP: a local "hub" (`/org/name/resolve/main/...`) served by
 * serveDirectory behind a counting proxy, so tests can see every request, and a nodeDirCache in
 * a temp dir.
 */
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { ensureFixture } from '../testing/fixtures/shared';
import type { FixturePaths } from '../testing/fixtures/write';
import { serveDirectory, type StaticServer } from '../testing/server';
import { nodeDirCache } from './cache-node';
import { LoadError } from './errors';
import { openModelWithCache } from './open';
import type { LoadProgress } from './progress';
import { startCountingProxy, type CountingProxy } from '../testing/hf-proxy';
import { uploadTensors } from '../testing/upload-tensors';

const HF_FILES = ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'model.safetensors'];

let paths: FixturePaths;
let scratch: string;
let server: StaticServer;
let proxy: CountingProxy;
let cacheDir: string;
const FOLDER = () => `${proxy.url}/org/tiny/resolve/main`;
const GGUF = () => `${proxy.url}/org/tiny-GGUF/resolve/main/tiny-Q4_0.gguf`;

beforeAll(async () => {
  paths = await ensureFixture({ arch: 'llama', preset: 'tiny' });
  scratch = await mkdtemp(join(tmpdir(), 'loader-open-'));
  const repo = join(scratch, 'hub', 'org', 'tiny', 'resolve', 'main');
  await mkdir(repo, { recursive: true });
  for (const f of HF_FILES) await copyFile(join(paths.hf.F16!, f), join(repo, f));
  const ggufRepo = join(scratch, 'hub', 'org', 'tiny-GGUF', 'resolve', 'main');
  await mkdir(ggufRepo, { recursive: true });
  await copyFile(paths.gguf.Q4_0!, join(ggufRepo, 'tiny-Q4_0.gguf'));

  // Broken files: a GGUF cut in half, one with the wrong magic, a folder of an unknown arch.
  const bad = join(scratch, 'hub', 'bad');
  await mkdir(join(bad, 'gemma'), { recursive: true });
  const gguf = await readFile(paths.gguf.Q4_0!);
  await writeFile(join(bad, 'truncated.gguf'), gguf.subarray(0, gguf.length >> 1));
  await writeFile(join(bad, 'wrong-magic.gguf'), Buffer.concat([Buffer.from('GGUX'), gguf.subarray(4)]));
  for (const f of HF_FILES) await copyFile(join(paths.hf.F16!, f), join(bad, 'gemma', f));
  const config = JSON.parse(await readFile(join(bad, 'gemma', 'config.json'), 'utf8')) as Record<string, unknown>;
  await writeFile(join(bad, 'gemma', 'config.json'), JSON.stringify({ ...config, model_type: 'rwkv7' }));

  server = await serveDirectory(join(scratch, 'hub'));
  proxy = await startCountingProxy(server.url);
});

afterAll(async () => {
  await proxy?.close();
  await server?.close();
  await rm(scratch, { recursive: true, force: true });
});

beforeEach(async () => {
  cacheDir = await mkdtemp(join(scratch, 'cache-'));
  proxy.requests.length = 0;
  proxy.options = {};
});

const loadError = (p: Promise<unknown>) =>
  p.then(
    () => expect.unreachable('the load should have failed'),
    (e: unknown) => {
      expect(e).toBeInstanceOf(LoadError);
      return e as LoadError;
    },
  );

/** Progress must never go backwards, per file and in total, within each phase. */
function expectMonotonic(events: LoadProgress[]): void {
  const perFile = new Map<string, number>();
  const total = new Map<string, number>();
  for (const e of events) {
    const key = `${e.phase} ${e.file}`;
    expect(e.bytesDone).toBeGreaterThanOrEqual(perFile.get(key) ?? 0);
    expect(e.totalBytesDone).toBeGreaterThanOrEqual(total.get(e.phase) ?? 0);
    expect(e.bytesDone).toBeLessThanOrEqual(e.bytesTotal);
    perFile.set(key, e.bytesDone);
    total.set(e.phase, e.totalBytesDone);
  }
}

describe('openModelWithCache on a Hugging Face repo id', () => {
  it('downloads once with progress ending at 100%, then loads from the cache with no requests', async () => {
    const cache = nodeDirCache(cacheDir);
    const events: LoadProgress[] = [];
    const first = await openModelWithCache('org/tiny', { hubBaseURL: proxy.url, cache, onProgress: (p) => events.push(p) });
    expect(first.resolved).toMatchObject({ kind: 'folder-url', url: FOLDER() });
    expect(first.config).toMatchObject({ arch: 'llama', hiddenSize: 256 });
    expect(first.tokenizer.json).toHaveProperty('model');

    const downloads = events.filter((e) => e.phase === 'download');
    expectMonotonic(downloads);
    const weights = `${FOLDER()}/model.safetensors`;
    const size = (await stat(join(paths.hf.F16!, 'model.safetensors'))).size;
    expect(downloads.filter((e) => e.file === weights).at(-1)).toMatchObject({ bytesDone: size, bytesTotal: size });
    const last = downloads.at(-1)!;
    expect(last.totalBytesDone).toBe(last.totalBytes);
    expect(proxy.requests.filter((r) => r.path.endsWith('model.safetensors'))).toEqual([{ method: 'GET', path: '/org/tiny/resolve/main/model.safetensors', range: undefined }]);

    proxy.requests.length = 0;
    events.length = 0;
    const second = await openModelWithCache('org/tiny', { hubBaseURL: proxy.url, cache, onProgress: (p) => events.push(p) });
    expect(proxy.requests).toEqual([]); // not even the 404s for optional files are asked again
    expect(events.every((e) => e.phase === 'cache')).toBe(true);
    expect(events.map((e) => e.file)).toContain(weights);
    expect(await second.readTensor('blk.1.attn_q.weight')).toEqual(await first.readTensor('blk.1.attn_q.weight'));
    const direct = await openModel(paths.hf.F16!);
    expect(await second.readTensorF32('output.weight')).toEqual(await direct.readTensorF32('output.weight'));
  });

  it('lists the cached model with its size and deletes it, after which a load downloads again', async () => {
    const cache = nodeDirCache(cacheDir);
    await openModelWithCache('org/tiny', { hubBaseURL: proxy.url, cache });
    let total = 0;
    for (const f of HF_FILES) total += (await stat(join(paths.hf.F16!, f))).size;
    const [model, ...others] = await cache.list();
    expect(others).toEqual([]);
    expect(model).toMatchObject({ modelKey: FOLDER(), url: FOLDER(), bytes: total });
    expect(model.files.map((f) => f.url.slice(FOLDER().length + 1)).sort()).toEqual([...HF_FILES].sort());

    expect(await cache.delete(model.modelKey)).toBe(true);
    expect(await cache.list()).toEqual([]);
    expect(await readdir(cacheDir)).toEqual([]);
    proxy.requests.length = 0;
    await openModelWithCache('org/tiny', { hubBaseURL: proxy.url, cache });
    expect(proxy.requests.some((r) => r.path.endsWith('model.safetensors'))).toBe(true);
  });

  it('works against a server that ignores Range, downloading each file once', async () => {
    proxy.options = { ignoreRange: true };
    const cache = nodeDirCache(cacheDir);
    const m = await openModelWithCache(`${FOLDER()}/`, { cache });
    expect(m.tensors.size).toBeGreaterThan(10);
    const weightGets = proxy.requests.filter((r) => r.path.endsWith('model.safetensors'));
    expect(weightGets).toHaveLength(1);
    // Without a cache, range reads fall back to whole-file reads and still work.
    const uncached = await openModelWithCache(GGUF(), { cache: false });
    expect((await uncached.readTensor('blk.0.ffn_up.weight')).length).toBe(uncached.tensors.get('blk.0.ffn_up.weight')!.info.byteLength);
  });
});

describe('openModelWithCache on a GGUF URL, and uploadTensors', () => {
  it('streams every tensor once in file-offset order with upload progress to 100%', async () => {
    const cache = nodeDirCache(cacheDir);
    const events: LoadProgress[] = [];
    const m = await openModelWithCache('org/tiny-GGUF/tiny-Q4_0.gguf', { hubBaseURL: proxy.url, cache, onProgress: (p) => events.push(p) });
    expect(m.format).toBe('gguf');
    const seen: Array<[string, number, number]> = [];
    const result = await uploadTensors(m, (name, info, bytes) => void seen.push([name, info.offset, bytes.length]), (p) => events.push(p));
    expect(seen.map(([n]) => n).sort()).toEqual([...m.tensors.keys()].sort());
    const offsets = seen.map(([, o]) => o);
    expect(offsets).toEqual([...offsets].sort((a, b) => a - b));
    for (const [name, , length] of seen) expect(length).toBe(m.tensors.get(name)!.info.byteLength);
    expect(result).toEqual({ tensors: seen.length, bytes: seen.reduce((s, [, , n]) => s + n, 0) });

    const uploads = events.filter((e) => e.phase === 'upload');
    expectMonotonic(uploads);
    expect(uploads.at(-1)).toMatchObject({ file: GGUF(), bytesDone: result.bytes, bytesTotal: result.bytes, totalBytesDone: result.bytes });

    proxy.requests.length = 0;
    const again = await openModelWithCache(GGUF(), { cache });
    await uploadTensors(again, () => {});
    expect(proxy.requests).toEqual([]);
  });

  it('stops an upload when the signal fires, with the abort error', async () => {
    const m = await openModelWithCache(paths.gguf.Q4_0!, { cache: false });
    const ac = new AbortController();
    let calls = 0;
    const e = await loadError(
      uploadTensors(m, () => {
        if (++calls === 3) ac.abort();
      }, { signal: ac.signal }),
    );
    expect(e.code).toBe('aborted');
    expect(calls).toBe(3);
  });
});

describe('aborting a download', () => {
  it('stops mid-file and leaves nothing in the cache', async () => {
    const cache = nodeDirCache(cacheDir);
    const ac = new AbortController();
    let abortedAt = -1;
    const e = await loadError(
      openModelWithCache(GGUF(), {
        cache,
        signal: ac.signal,
        onProgress: (p) => {
          if (p.phase === 'download' && p.bytesDone > 0 && p.bytesDone < p.bytesTotal && abortedAt < 0) {
            abortedAt = p.bytesDone;
            ac.abort();
          }
        },
      }),
    );
    expect(e).toMatchObject({ code: 'aborted', file: GGUF() });
    expect(abortedAt).toBeGreaterThan(0);
    expect(await cache.list()).toEqual([]);
    expect(await readdir(cacheDir)).toEqual([]);
  });

  it('keeps the small files of a folder but not the weights it was cut off in', async () => {
    const cache = nodeDirCache(cacheDir);
    const ac = new AbortController();
    const weights = `${FOLDER()}/model.safetensors`;
    const e = await loadError(
      openModelWithCache(FOLDER(), {
        cache,
        signal: ac.signal,
        onProgress: (p) => p.file === weights && p.bytesDone > 0 && ac.abort(),
      }),
    );
    expect(e.code).toBe('aborted');
    expect(await cache.has(weights)).toBe(false);
    expect((await readdir(cacheDir)).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });
});

describe('load errors name the file and the problem', () => {
  it('a truncated GGUF', async () => {
    const url = `${proxy.url}/bad/truncated.gguf`;
    const cache = nodeDirCache(cacheDir);
    const e = await loadError(openModelWithCache(url, { cache }));
    expect(e).toMatchObject({ code: 'out_of_range', file: url });
    expect(e.message).toMatch(/^http.*truncated\.gguf: tensor ".*" occupies bytes .* but the file is only \d+ bytes/);
    expect(await cache.list()).toEqual([]); // a copy that cannot be opened is not kept
  });

  it('a connection dropped mid-download', async () => {
    proxy.options = { cutAfter: (p) => (p.endsWith('.gguf') ? 100_000 : undefined) };
    const cache = nodeDirCache(cacheDir);
    const e = await loadError(openModelWithCache(GGUF(), { cache }));
    expect(['network', 'truncated']).toContain(e.code);
    expect(e.file).toBe(GGUF());
    expect(await readdir(cacheDir)).toEqual([]);
  });

  it('a file with the wrong magic', async () => {
    const url = `${proxy.url}/bad/wrong-magic.gguf`;
    const e = await loadError(openModelWithCache(url, { cache: nodeDirCache(cacheDir) }));
    expect(e).toMatchObject({ code: 'bad_magic', file: url });
    expect(e.message).toContain('not a GGUF file');
  });

  it('an HTML 404 page, and an HTML page served as the file', async () => {
    const url = `${proxy.url}/org/gone/resolve/main/model.gguf`;
    proxy.options = {
      respond: (p) =>
        p.includes('/gone/')
          ? { status: 404, headers: { 'Content-Type': 'text/html' }, body: '<!doctype html><h1>Not found</h1>' }
          : p.includes('/spa/')
            ? { status: 200, headers: { 'Content-Type': 'text/html; charset=utf-8' }, body: '<!doctype html><div id=app></div>' }
            : undefined,
    };
    const cache = nodeDirCache(cacheDir);
    const e = await loadError(openModelWithCache(url, { cache }));
    expect(e).toMatchObject({ code: 'http', status: 404, file: url });
    expect(e.message).toContain('not found (HTTP 404');
    const spa = `${proxy.url}/spa/model.gguf`;
    expect(await loadError(openModelWithCache(spa, { cache }))).toMatchObject({ code: 'not_a_model_file', file: spa });
    expect(await cache.list()).toEqual([]);
    // Without a cache, the GGUF reader sees the page and says so.
    const direct = await loadError(openModelWithCache(`${proxy.url}/spa/x.gguf`, { cache: false }));
    expect(direct.code).toBe('bad_magic');
    expect(direct.message).toContain('HTML');
  });

  it('a folder without config.json, and one of an unsupported architecture', async () => {
    const cache = nodeDirCache(cacheDir);
    const missing = await loadError(openModelWithCache(`${proxy.url}/org/nothing/resolve/main`, { cache }));
    expect(missing).toMatchObject({ code: 'missing_file', file: `${proxy.url}/org/nothing/resolve/main/config.json` });
    const gemma = await loadError(openModelWithCache(`${proxy.url}/bad/gemma`, { cache }));
    expect(gemma).toMatchObject({ code: 'unsupported_arch', file: `${proxy.url}/bad/gemma/config.json` });
    expect(gemma.message).toContain('rwkv7');
  });

  it('an input that is no model location', async () => {
    expect(await loadError(openModelWithCache('not a model', { cache: false }))).toMatchObject({ code: 'bad_input' });
  });
});

describe('openModelWithCache on local files', () => {
  it('opens a path, a File and a picked folder without the network or the cache', async () => {
    const cache = nodeDirCache(cacheDir);
    const fromPath = await openModelWithCache(paths.gguf.Q4_0!, { cache });
    const file = new File([await readFile(paths.gguf.Q4_0!)], 'tiny-Q4_0.gguf');
    const fromFile = await openModelWithCache(file, { cache });
    expect(await fromFile.readTensor('output.weight')).toEqual(await fromPath.readTensor('output.weight'));

    const picked = await Promise.all(
      HF_FILES.map(async (f) => Object.defineProperty(new File([await readFile(join(paths.hf.F16!, f))], f), 'webkitRelativePath', { value: `tiny/${f}` })),
    );
    const fromFolder = await openModelWithCache(picked, { cache });
    expect(fromFolder.format).toBe('safetensors');
    expect(fromFolder.resolved).toMatchObject({ kind: 'folder-files', name: 'tiny' });
    expect(await fromFolder.readTensor('output_norm.weight')).toEqual(await (await openModel(paths.hf.F16!)).readTensor('output_norm.weight'));
    expect(proxy.requests).toEqual([]);
    expect(await readdir(cacheDir)).toEqual([]);
  });
});
