// webgpu-llm/node: the Node entry. WebGPU comes from the `webgpu` package (Dawn).
export * from './index';
export { nodeGPU } from './gpu/node-gpu';
export { fileSource } from './formats/source';
export { writeChunks } from './formats/node-write';
// In Node the engine runs in this process: this createEngine replaces the browser one.
export { createEngine, type NodeEngineOptions } from './transport/node-engine';
export { selfCheck } from './transport/node-selfcheck';
export { serve, type ServeOptions, type Server } from './transport/node-server';
export { serveCommand, parseServeArgs, SERVE_USAGE, type ServeArgs } from './cli/serve';
export { UsageError } from './cli/io';
