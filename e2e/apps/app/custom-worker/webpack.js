// The custom-worker recipe under webpack 5: webpack resolves the package path and bundles the worker.
export const startWorker = () => new Worker(new URL('webgpu-llm/worker', import.meta.url), { type: 'module' });
