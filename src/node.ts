// webgpu-llm/node: the Node entry. WebGPU comes from the `webgpu` package (Dawn).
export * from './index';
export { nodeGPU } from './gpu/node-gpu';
