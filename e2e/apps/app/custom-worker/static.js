// The custom-worker recipe with no bundler: the import map names the library's dist/worker.js.
export const startWorker = () => new Worker(import.meta.resolve('webgpu-llm/worker'), { type: 'module' });
