/**
 * Whether the engine loads the model's MTP head (EngineOptions.mtp, issue #32). The head takes GPU
 * memory a browser tab may not have to spare (its layer, fc and norms, and KV pages as many as the
 * model's, one layer's worth each) and does nothing for a request that does not speculate with
 * it, so it loads only when asked for: `mtp: true` (requests may ask for it), or the engine's
 * default speculation `speculative: {type: "mtp"}` (which needs it). A request asking for it on an
 * engine that did not load it gets a 400 saying how to load it.
 */
import type { ModelConfig } from '../model/config';
import { ModelError } from '../model/errors';
import { BackendError } from './errors';
import { noMtpHead } from './mtp-proposer';

export interface MtpOptions {
  /** Load the model's MTP head (default: only when `speculative` is `{type: "mtp"}`). */
  mtp?: boolean;
  speculative?: { type: string };
}

/**
 * Whether to load the head; a ModelError (invalid_field) when the options contradict each other or
 * ask for a head the model does not ship, before anything goes to the GPU.
 */
export function loadsMtpHead(config: Pick<ModelConfig, 'arch' | 'mtpLayers'>, opts: MtpOptions): boolean {
  const byDefault = opts.speculative?.type === 'mtp';
  if (byDefault && opts.mtp === false) throw new ModelError('invalid_field', 'speculative {type: "mtp"} speculates with the MTP head, which mtp: false leaves unloaded: drop one of the two', 'mtp');
  const wanted = opts.mtp ?? byDefault;
  if (wanted && !config.mtpLayers) throw new ModelError('invalid_field', noMtpHead(config.arch).message, byDefault ? 'speculative' : 'mtp');
  return wanted;
}

/** A request's `speculative: {type: "mtp"}` on an engine that did not load the model's head (400). */
export function mtpHeadNotLoaded(): BackendError {
  return new BackendError(
    'invalid_field',
    400,
    'speculative.type "mtp": this engine was loaded without the model\'s multi-token-prediction head (it takes GPU memory, so it loads only when asked for): load the engine with the option mtp: true (serve --mtp), or with speculative: {type: "mtp"} to make it every request\'s default',
    'speculative',
  );
}
