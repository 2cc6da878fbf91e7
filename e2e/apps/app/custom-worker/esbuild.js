// The custom-worker recipe under esbuild, which does not bundle workers: `webgpu-llm/worker` is a
// second entry point written beside the app as worker.js (see the build in bundlers.e2e.ts).
export const startWorker = () => new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
