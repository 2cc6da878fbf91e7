/** selfCheck() for Node: selfcheck in this process, on Dawn (the `webgpu` package), as `webgpu-llm selfcheck` runs it. */
import { nodeGPU } from '../gpu/node-gpu';
import type { SelfCheckOptions, SelfCheckReport } from '../selfcheck/run';
import { selfCheckOn } from './selfcheck-run';

export async function selfCheck(options: SelfCheckOptions = {}): Promise<SelfCheckReport> {
  return selfCheckOn(await nodeGPU(), options);
}
