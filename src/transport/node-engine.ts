/** createEngine() for Node: the engine in this process, on Dawn (the `webgpu` package). */
import { nodeGPU } from '../gpu/node-gpu';
import { createLocalEngine } from './local';
import type { CreateEngineOptions, EngineHandle } from './types';

export type NodeEngineOptions = Omit<CreateEngineOptions, 'worker'>;

export async function createEngine(options: NodeEngineOptions): Promise<EngineHandle> {
  const { worker: _, ...rest } = options as CreateEngineOptions;
  return createLocalEngine({ ...rest, gpu: await nodeGPU() });
}
