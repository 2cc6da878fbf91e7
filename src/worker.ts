/**
 * `webgpu-llm/worker`: the dedicated Worker that holds the engine. createEngine() starts it by
 * default; a bundler user may create it (`new Worker(new URL('webgpu-llm/worker', import.meta.url),
 * { type: 'module' })`) and pass it as `worker`.
 */
import * as Comlink from 'comlink';
import { createWorkerApi } from './transport/worker-api';

Comlink.expose(createWorkerApi());
