/**
 * LoRA adapters in the API, as SGLang and vLLM serve them: a request picks a loaded adapter with
 * `model: "<model id>:<adapter>"` (or `default:<adapter>`), or with `lora_path: "<adapter>"`; the
 * `model` form wins when both are given. `POST /load_lora_adapter` `{lora_name, lora_path}` and
 * `POST /unload_lora_adapter` `{lora_name}` manage them at run time, and `GET /v1/models` lists each
 * as its own model with its `parent`. Unloading an adapter in use waits for its requests to finish;
 * from the call on, new requests naming it get a 404.
 */
import type { Backend, LoraInfo } from '../engine/types';
import { LoraNotFoundError } from '../engine/errors';
import { ApiError, invalid } from './errors';
import { num, readField, str, type Json } from './protocol/field';

/** `model` split into a backend id and an adapter name, when it names an adapter of a loaded model. */
export function splitAdapter(model: string, all: readonly Backend[]): { backend: Backend; adapter: string } | null {
  for (const b of all) if (model.startsWith(`${b.id}:`) && model.length > b.id.length + 1) return { backend: b, adapter: model.slice(b.id.length + 1) };
  if (all.length === 1 && model.startsWith('default:') && model.length > 'default:'.length) return { backend: all[0]!, adapter: model.slice('default:'.length) };
  return null;
}

/**
 * The backend a request runs on, with `adapter` chosen: a view of it whose generate and
 * scorePrompt pass the adapter on. Throws a 404 naming the adapter when it is not loaded (the
 * engine checks again as the request starts: an unload may come in between).
 */
export function withAdapter(backend: Backend, adapter: string, param: 'model' | 'lora_path'): Backend {
  // A backend without adapters (the CPU reference) has none loaded: the same 404.
  const loaded = backend.loras?.() ?? [];
  if (!loaded.some((l) => l.name === adapter)) throw new LoraNotFoundError(adapter, loaded.map((l) => l.name), param);
  return new Proxy(backend, {
    get(target, key) {
      if (key === 'generate') return (request: Parameters<Backend['generate']>[0]) => target.generate({ ...request, lora: adapter, loraParam: param });
      if (key === 'scorePrompt' && target.scorePrompt) return (ids: number[], top: number) => target.scorePrompt!(ids, top, adapter);
      const v = Reflect.get(target, key, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** `GET /v1/models` entries of a model's adapters (as vLLM lists them: `parent` the base, `root` the source). */
export function adapterCards(backend: Backend, created: number): Array<Record<string, unknown>> {
  return (backend.loras?.() ?? []).map((l: LoraInfo) => ({
    id: `${backend.id}:${l.name}`,
    object: 'model',
    created,
    owned_by: 'webgpu-llm',
    max_model_len: backend.contextLength,
    parent: backend.id,
    root: l.source,
    lora: { name: l.name, rank: l.rank, targets: l.targets, scale: l.scale, format: l.format },
  }));
}

/** The adapters of every model, by name → source (SGLang's `loaded_adapters`). */
function loadedAdapters(all: readonly Backend[]): Record<string, string> {
  return Object.fromEntries(all.flatMap((b) => (b.loras?.() ?? []).map((l) => [l.name, l.source])));
}

/** The model a management request acts on: its `model` field, or the only one loaded. */
function target(b: Json, all: readonly Backend[]): Backend {
  const id = readField(b, 'model', str);
  const backend = id === undefined || id === 'default' ? all[0] : all.find((x) => x.id === id);
  if (!backend) throw invalid('model', `no loaded model is called ${JSON.stringify(id)}`, 'model_not_found');
  if (!backend.loadLora || !backend.unloadLora) throw invalid('model', `the model ${backend.id} takes no LoRA adapters (only the WebGPU engine does)`, 'lora_unsupported');
  return backend;
}

/** `POST /load_lora_adapter` `{lora_name, lora_path, scale?, model?}`. */
export async function loadAdapter(b: Json, all: readonly Backend[]): Promise<Record<string, unknown>> {
  const name = readField(b, 'lora_name', str, true)!;
  const path = readField(b, 'lora_path', str, true)!;
  const scale = readField(b, 'scale', num({}));
  if (name === '') throw invalid('lora_name', 'lora_name must not be empty');
  if (name.includes(':')) throw invalid('lora_name', 'lora_name must not contain ":" (requests name an adapter as "<model>:<adapter>")');
  const backend = target(b, all);
  let info: LoraInfo;
  try {
    info = await backend.loadLora!(name, path, scale !== undefined ? { scale } : {});
  } catch (e) {
    throw asLoadFailure(e);
  }
  return { success: true, error_message: null, lora_name: info.name, model: `${backend.id}:${info.name}`, loaded_adapters: loadedAdapters(all) };
}

/**
 * An adapter that cannot be read (LoadError: not found, unreachable, not a known format) or does
 * not fit the model (LoraError: wrong base, missing tensors, unsupported targets) is the request's
 * fault: a 400 naming `lora_path`, the file and the problem. Matched by name: the API sits below
 * the loader and the LoRA readers.
 */
function asLoadFailure(e: unknown): unknown {
  const err = e as { name?: string; code?: string; message?: string };
  if (err?.name === 'LoraError' || err?.name === 'LoadError') return new ApiError(400, `lora_path: ${err.message}`, 'invalid_request_error', 'lora_path', err.code ?? null, { cause: e });
  return e;
}

/** `POST /unload_lora_adapter` `{lora_name, model?}`: answers once the adapter's requests finished and it is gone. */
export async function unloadAdapter(b: Json, all: readonly Backend[]): Promise<Record<string, unknown>> {
  const name = readField(b, 'lora_name', str, true)!;
  await target(b, all).unloadLora!(name);
  return { success: true, error_message: null, lora_name: name, loaded_adapters: loadedAdapters(all) };
}
