/**
 * resolveModel(): what the user typed or picked, as a model location.
 *  - a URL: a `.gguf` file, or a folder (a Hugging Face `resolve/<rev>` base, or any static dir);
 *    Hugging Face page links (`/blob/`, `/tree/`, the repo page) become their `resolve` URLs
 *  - a Hugging Face repo id: `org/name` (the safetensors folder), `org/name/path/file.gguf`,
 *    `org/name:Q4_K_M` (the GGUF whose name carries that quant, found through the Hub API),
 *    each with an optional `@revision` after the name
 *  - a File/Blob (a GGUF), or the Files of a folder picked with `webkitdirectory`
 *  - in Node, a path to a `.gguf` file or a folder (or a `file:` URL)
 */
import { LoadError } from './errors';

export type ModelInput = string | URL | Blob | readonly File[] | FileList;

export type ResolvedModel =
  /** A GGUF file over HTTP(S). `modelKey` groups its cache entries. */
  | { kind: 'gguf-url'; url: string; modelKey: string }
  /** A Hugging Face style folder over HTTP(S): `url` has no trailing slash. */
  | { kind: 'folder-url'; url: string; modelKey: string }
  | { kind: 'gguf-path'; path: string }
  | { kind: 'folder-path'; path: string }
  | { kind: 'gguf-blob'; blob: Blob; name: string }
  /** Picked files by their path inside the picked folder (`config.json`, `model.safetensors`). */
  | { kind: 'folder-files'; files: Map<string, Blob>; name: string };

export interface ResolveOptions {
  /** The Hub for repo ids (default https://huggingface.co); tests point it at a local server. */
  hubBaseURL?: string;
  /** Revision when the input names none (default `main`). */
  revision?: string;
  signal?: AbortSignal;
  /** Extra request options for the Hub API (an `Authorization` header for gated repos). */
  init?: RequestInit;
}

const DEFAULT_HUB = 'https://huggingface.co';
const isNode = typeof process !== 'undefined' && !!process.versions?.node;
/** `org/name`, then `@rev`, then `:quant` or `/path/in/repo`. Hub names: letters, digits, `-_.`. */
const REPO_ID = /^([\w.-]+)\/([\w.-]+)(?:@([\w./-]+?))?(?::([\w.-]+)|\/(.+))?$/;

export async function resolveModel(input: ModelInput, opts: ResolveOptions = {}): Promise<ResolvedModel> {
  if (typeof input !== 'string' && !(input instanceof URL)) return resolvePicked(input);
  const text = input.toString().trim();
  if (text === '') throw new LoadError('bad_input', '', 'no model given: pass a URL, a Hugging Face repo id, a file or a path');
  const hub = (opts.hubBaseURL ?? DEFAULT_HUB).replace(/\/+$/, '');

  if (/^https?:\/\//i.test(text)) return fromURL(text, hub);
  if (text.startsWith('file:')) {
    const { fileURLToPath } = await import('node:url');
    return fromPath(fileURLToPath(text));
  }
  if (isNode && (await looksLikePath(text))) return fromPath(text);
  // In a page, a path is relative to the page (a model served beside the app).
  if (!isNode && /^(\/|\.\.?\/)/.test(text) && typeof location !== 'undefined') return fromURL(new URL(text, location.href).href, hub);

  const m = REPO_ID.exec(text);
  if (!m) {
    throw new LoadError(
      'bad_input',
      text,
      'not a URL, a path or a Hugging Face repo id (org/name, org/name/file.gguf or org/name:Q4_K_M)',
    );
  }
  const [, org, name, rev = opts.revision ?? 'main', quant, file] = m;
  const base = `${hub}/${org}/${name}/resolve/${rev}`;
  if (file) {
    if (!/\.gguf$/i.test(file)) throw new LoadError('bad_input', text, 'a file in a repo id must be a .gguf file; name the repo alone for a safetensors model');
    return gguf(`${base}/${file.split('/').map(encodeURIComponent).join('/')}`);
  }
  if (quant) return gguf(`${base}/${await findQuantFile(hub, `${org}/${name}`, rev, quant, opts)}`);
  return folder(base);
}

function gguf(url: string): ResolvedModel {
  return { kind: 'gguf-url', url, modelKey: url };
}

function folder(url: string): ResolvedModel {
  const base = url.replace(/\/+$/, '');
  return { kind: 'folder-url', url: base, modelKey: base };
}

/** A URL as given, except that Hugging Face page links on `hub` become file/folder URLs. */
function fromURL(url: string, hub: string): ResolvedModel {
  const u = new URL(url);
  const h = new URL(hub);
  if (u.origin === h.origin) {
    const rest = u.pathname.slice(h.pathname.replace(/\/+$/, '').length);
    // /org/name/blob/rev/file -> resolve; /org/name/tree/rev -> folder; /org/name -> folder on main
    const m = /^\/([^/]+)\/([^/]+)(?:\/(blob|tree|resolve)\/([^/]+)(\/.*)?)?\/?$/.exec(rest);
    if (m && !['api', 'datasets', 'spaces'].includes(m[1])) {
      const [, org, name, kind, rev = 'main', path = ''] = m;
      const base = `${h.origin}${h.pathname.replace(/\/+$/, '')}/${org}/${name}/resolve/${rev}`;
      if (kind !== 'tree' && /\.gguf$/i.test(path)) return gguf(base + path);
      if (!kind || kind === 'tree' || (kind === 'resolve' && path.replace(/\/+$/, '') === '')) return folder(base + path);
    }
  }
  return /\.gguf$/i.test(u.pathname) ? gguf(url) : folder(url);
}

async function looksLikePath(text: string): Promise<boolean> {
  if (/^(\/|\.\.?([\\/]|$)|~[\\/]|[a-zA-Z]:[\\/]|\\\\)/.test(text)) return true;
  // `org/name` may also be a relative folder; one that exists on disk wins.
  const { stat } = await import('node:fs/promises');
  return (await stat(text).catch(() => null)) !== null;
}

async function fromPath(path: string): Promise<ResolvedModel> {
  let p = path;
  if (/^~[\\/]/.test(p)) p = (await import('node:os')).homedir() + p.slice(1);
  const { stat } = await import('node:fs/promises');
  const st = await stat(p).catch(() => null);
  if (!st) throw new LoadError('io', p, 'no such file or folder');
  if (st.isDirectory()) return { kind: 'folder-path', path: p };
  if (/\.safetensors$/i.test(p)) throw new LoadError('bad_input', p, 'a safetensors file needs its folder (config.json, tokenizer.json): give the folder');
  return { kind: 'gguf-path', path: p };
}

/** A picked File/Blob (a GGUF), or the Files of a picked folder. */
function resolvePicked(input: Blob | readonly File[] | FileList): ResolvedModel {
  if (input instanceof Blob) {
    const name = (input as Partial<File>).name || 'model.gguf';
    if (/\.safetensors$/i.test(name)) throw new LoadError('bad_input', name, 'a safetensors file needs its folder (config.json, tokenizer.json): pick the folder');
    return { kind: 'gguf-blob', blob: input, name };
  }
  const list = Array.from(input as ArrayLike<File>);
  if (list.length === 0) throw new LoadError('bad_input', '', 'no files were picked');
  const files = new Map<string, Blob>();
  // webkitdirectory gives `picked/sub/file`; keep the path inside the picked folder.
  for (const f of list) files.set(relativeName(f), f);
  const top = (list[0].webkitRelativePath || '').split('/')[0] || 'picked files';
  // A model folder, or a PEFT adapter folder (openLoraWithCache takes picked folders too).
  if (files.has('config.json') || files.has('adapter_config.json')) return { kind: 'folder-files', files, name: top };
  const ggufs = [...files.keys()].filter((n) => /\.gguf$/i.test(n));
  if (ggufs.length === 1) return { kind: 'gguf-blob', blob: files.get(ggufs[0])!, name: ggufs[0] };
  if (ggufs.length > 1) throw new LoadError('bad_input', top, `several GGUF files were picked (${ggufs.join(', ')}): pick one`);
  throw new LoadError('bad_input', top, 'the picked files hold no config.json (a Hugging Face folder), adapter_config.json (a PEFT adapter) or .gguf file');
}

function relativeName(f: File): string {
  const rel = f.webkitRelativePath;
  return rel && rel.includes('/') ? rel.slice(rel.indexOf('/') + 1) : f.name;
}

/**
 * The GGUF file of `repo` whose name carries `quant` (`Q4_K_M` matches `model-Q4_K_M.gguf` and
 * `model.q4_k_m.gguf`, not `Q4_K_M_L`), listed through the Hub API. Split files (`-00001-of-`)
 * are refused: they need joining.
 */
async function findQuantFile(hub: string, repo: string, rev: string, quant: string, opts: ResolveOptions): Promise<string> {
  const api = `${hub}/api/models/${repo}/revision/${encodeURIComponent(rev)}`;
  let res: Response;
  try {
    res = await fetch(api, { ...opts.init, signal: opts.signal });
  } catch (e) {
    throw new LoadError('network', api, `cannot list the repository's files: ${(e as Error).message}`, undefined, { cause: e });
  }
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    throw new LoadError('http', api, `cannot list the files of ${repo} (HTTP ${res.status})`, res.status);
  }
  let names: string[];
  try {
    const body = (await res.json()) as { siblings?: Array<{ rfilename?: unknown }> };
    names = (body.siblings ?? []).map((s) => s.rfilename).filter((n): n is string => typeof n === 'string');
  } catch (e) {
    throw new LoadError('http', api, `the Hub's file list is not valid JSON: ${(e as Error).message}`);
  }
  const q = quant.toLowerCase().replace(/[.-]/g, '_');
  const matches = names.filter((n) => {
    if (!/\.gguf$/i.test(n)) return false;
    const stem = n.split('/').pop()!.slice(0, -5).toLowerCase().replace(/[.-]/g, '_');
    return new RegExp(`(^|_)${q}($|_)`).test(stem);
  });
  const whole = matches.filter((n) => !/-\d{5}-of-\d{5}\.gguf$/i.test(n));
  if (whole.length === 1) return whole[0];
  const repoURL = `${hub}/${repo}`;
  if (whole.length > 1) throw new LoadError('bad_input', repoURL, `several GGUF files match ${quant} (${whole.join(', ')}): name the file`);
  if (matches.length > 0) throw new LoadError('bad_input', repoURL, `${quant} is split into several files (${matches[0]}, ...), which webgpu-llm cannot join yet`);
  const available = names.filter((n) => /\.gguf$/i.test(n));
  throw new LoadError(
    'bad_input',
    repoURL,
    `no GGUF file for ${quant}` + (available.length ? ` (the repo has ${available.join(', ')})` : ' (the repo has no GGUF files)'),
  );
}
