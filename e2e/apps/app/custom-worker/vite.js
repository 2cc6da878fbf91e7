// The custom-worker recipe under Vite: Vite resolves the package path and bundles the worker.
export const startWorker = () => new Worker(new URL('webgpu-llm/worker', import.meta.url), { type: 'module' });
