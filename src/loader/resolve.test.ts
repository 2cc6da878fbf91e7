import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveDirectory, type StaticServer } from '../testing/server';
import { LoadError } from './errors';
import { resolveModel } from './resolve';

const HUB = 'https://huggingface.co';
let dir: string;
let hub: StaticServer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'loader-resolve-'));
  await mkdir(join(dir, 'folder'));
  await writeFile(join(dir, 'model.gguf'), 'GGUF');
  // The Hub API's model info for two repos, as /api/models/<repo>/revision/<rev> answers.
  const api = join(dir, 'hub', 'api', 'models', 'org', 'tiny-GGUF', 'revision');
  await mkdir(api, { recursive: true });
  const siblings = ['README.md', 'tiny-Q4_K_M.gguf', 'tiny-Q4_K_S.gguf', 'tiny-Q8_0.gguf', 'big/tiny-Q6_K-00001-of-00002.gguf', 'big/tiny-Q6_K-00002-of-00002.gguf'];
  await writeFile(join(api, 'main'), JSON.stringify({ id: 'org/tiny-GGUF', siblings: siblings.map((rfilename) => ({ rfilename })) }));
  hub = await serveDirectory(join(dir, 'hub'));
});

afterAll(async () => {
  await hub?.close();
  await rm(dir, { recursive: true, force: true });
});

const err = (p: Promise<unknown>) => p.then(() => null, (e: unknown) => e as LoadError);

describe('resolveModel on strings', () => {
  it('turns a repo id into its resolve folder, honouring hubBaseURL and @revision', async () => {
    expect(await resolveModel('org/name')).toEqual({ kind: 'folder-url', url: `${HUB}/org/name/resolve/main`, modelKey: `${HUB}/org/name/resolve/main` });
    expect(await resolveModel('org/name@v1.0', { hubBaseURL: 'http://127.0.0.1:9/' })).toMatchObject({ url: 'http://127.0.0.1:9/org/name/resolve/v1.0' });
  });

  it('turns org/name/file.gguf into the file resolve URL', async () => {
    expect(await resolveModel('org/name-GGUF/sub dir/m-Q4_0.gguf')).toMatchObject({
      kind: 'gguf-url',
      url: `${HUB}/org/name-GGUF/resolve/main/sub%20dir/m-Q4_0.gguf`,
    });
  });

  it('keeps plain URLs and tells files from folders by the .gguf suffix', async () => {
    expect(await resolveModel('https://example.com/m/model.gguf?download=1')).toMatchObject({ kind: 'gguf-url', url: 'https://example.com/m/model.gguf?download=1' });
    expect(await resolveModel('https://example.com/models/qwen/')).toMatchObject({ kind: 'folder-url', url: 'https://example.com/models/qwen' });
  });

  it('rewrites Hugging Face page links to resolve URLs', async () => {
    expect(await resolveModel(`${HUB}/org/name/blob/main/x-Q4_0.gguf`)).toMatchObject({ kind: 'gguf-url', url: `${HUB}/org/name/resolve/main/x-Q4_0.gguf` });
    expect(await resolveModel(`${HUB}/org/name/tree/dev`)).toMatchObject({ kind: 'folder-url', url: `${HUB}/org/name/resolve/dev` });
    expect(await resolveModel(`${HUB}/org/name`)).toMatchObject({ kind: 'folder-url', url: `${HUB}/org/name/resolve/main` });
    expect(await resolveModel(`${HUB}/org/name/resolve/main/`)).toMatchObject({ kind: 'folder-url', url: `${HUB}/org/name/resolve/main` });
  });

  it('treats existing paths and path-like strings as local files or folders', async () => {
    expect(await resolveModel(join(dir, 'model.gguf'))).toEqual({ kind: 'gguf-path', path: join(dir, 'model.gguf') });
    expect(await resolveModel(join(dir, 'folder'))).toEqual({ kind: 'folder-path', path: join(dir, 'folder') });
    expect(await resolveModel(new URL(`file://${join(dir, 'model.gguf')}`))).toMatchObject({ kind: 'gguf-path' });
    const e = await err(resolveModel(join(dir, 'nope')));
    expect(e).toMatchObject({ code: 'io', file: join(dir, 'nope') });
  });

  it('refuses input that names nothing it can locate', async () => {
    expect(await err(resolveModel('just-a-name'))).toMatchObject({ code: 'bad_input', file: 'just-a-name' });
    expect(await err(resolveModel('org/name/model.safetensors'))).toMatchObject({ code: 'bad_input' });
  });
});

describe('resolveModel with a quant tag', () => {
  it('finds the GGUF for org/name:Q4_K_M through the Hub API', async () => {
    const r = await resolveModel('org/tiny-GGUF:q4_k_m', { hubBaseURL: hub.url });
    expect(r).toEqual({ kind: 'gguf-url', url: `${hub.url}/org/tiny-GGUF/resolve/main/tiny-Q4_K_M.gguf`, modelKey: `${hub.url}/org/tiny-GGUF/resolve/main/tiny-Q4_K_M.gguf` });
  });

  it('says which quants exist when the tag matches none, and refuses split files', async () => {
    const none = await err(resolveModel('org/tiny-GGUF:Q2_K', { hubBaseURL: hub.url }));
    expect(none).toMatchObject({ code: 'bad_input' });
    expect(none!.message).toContain('tiny-Q8_0.gguf');
    const split = await err(resolveModel('org/tiny-GGUF:Q6_K', { hubBaseURL: hub.url }));
    expect(split!.message).toContain('split');
  });

  it('names the repo when the Hub does not know it', async () => {
    const e = await err(resolveModel('org/unknown:Q4_0', { hubBaseURL: hub.url }));
    expect(e).toMatchObject({ code: 'http', status: 404 });
    expect(e!.message).toContain('org/unknown');
  });
});

describe('resolveModel on picked files', () => {
  const file = (name: string, rel = '') => Object.defineProperty(new File(['x'], name), 'webkitRelativePath', { value: rel });

  it('takes a File as a GGUF', async () => {
    const f = new File(['GGUF'], 'm.gguf');
    expect(await resolveModel(f)).toEqual({ kind: 'gguf-blob', blob: f, name: 'm.gguf' });
  });

  it('takes a picked folder by the paths inside it', async () => {
    const r = await resolveModel([file('config.json', 'qwen/config.json'), file('model.safetensors', 'qwen/model.safetensors')]);
    expect(r.kind).toBe('folder-files');
    if (r.kind !== 'folder-files') return;
    expect(r.name).toBe('qwen');
    expect([...r.files.keys()]).toEqual(['config.json', 'model.safetensors']);
  });

  it('takes a lone GGUF among picked files, and refuses a choice of several', async () => {
    expect(await resolveModel([file('README.md'), file('a.gguf')])).toMatchObject({ kind: 'gguf-blob', name: 'a.gguf' });
    expect(await err(resolveModel([file('a.gguf'), file('b.gguf')]))).toMatchObject({ code: 'bad_input' });
    expect(await err(resolveModel([file('model.safetensors')]))).toMatchObject({ code: 'bad_input' });
  });
});
