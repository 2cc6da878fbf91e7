/**
 * selfcheck on a device of its own, freed after: what the engine Worker runs for the page's
 * selfCheck() (loaded there with a dynamic import, so it is a chunk of its own) and what Node's
 * selfCheck() runs in its process.
 */
import { acquireGPU } from '../gpu/device';
import { runSelfCheck, type SelfCheckOptions, type SelfCheckReport } from '../selfcheck/run';

/** `gpu`: the `GPU` object (navigator.gpu by default; Dawn's in Node). */
export async function selfCheckOn(gpu: GPU | undefined, options: SelfCheckOptions): Promise<SelfCheckReport> {
  const context = await acquireGPU({ gpu });
  try {
    return await runSelfCheck(context, options);
  } finally {
    context.destroy();
  }
}
