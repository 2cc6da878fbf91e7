/**
 * selfCheck() for pages: selfcheck (../selfcheck/run.ts) run inside an engine Worker, so the page
 * loads none of it; each result comes back through a comlink proxy as it is measured.
 */
import * as Comlink from 'comlink';
import type { SelfCheckOptions as RunOptions, SelfCheckReport, SelfCheckResult } from '../selfcheck/run';
import { openWorker } from './worker-client';

export interface SelfCheckOptions extends RunOptions {
  /** A Worker created from `webgpu-llm/worker` (as createEngine takes); by default one is started and ended here. */
  worker?: Worker;
}

/** Is this GPU computing correctly? Every kernel, then tiny generated models, against the references. */
export async function selfCheck(options: SelfCheckOptions = {}): Promise<SelfCheckReport> {
  const { api, call, stop } = openWorker(options.worker);
  const onResult = options.onResult;
  try {
    return await call(
      api.selfCheck(
        { precision: options.precision, only: options.only && [...options.only] },
        onResult ? Comlink.proxy((r: SelfCheckResult) => onResult(r)) : undefined,
      ),
    );
  } finally {
    stop();
  }
}
