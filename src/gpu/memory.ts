/**
 * Is the model close to the device's memory? WebGPU tells nothing of a GPU's memory (Chrome's
 * `memoryHeaps` is behind a developer flag), so this reasons from what there is:
 *
 * - Where the GPU's memory is: a discrete GPU has its own; integrated GPUs (laptops, Apple
 *   silicon, phones) and CPU adapters take theirs from system memory. The adapter's `type`
 *   (Chrome with WebGPU developer features) says so when present; else the vendor does (NVIDIA:
 *   discrete; Apple, Qualcomm, ARM, Imagination, Intel: shared, Intel's Arc cards being the
 *   exception we cannot tell; AMD could be either); a fallback or software adapter is the CPU's.
 *   Unknown counts as shared: most WebGPU clients are laptops and phones.
 * - How much system memory: `os.totalmem()` in Node; `navigator.deviceMemory` in Chromium pages
 *   and workers, which rounds down and stops at 8 GiB (so 8 means "at least 8"); nothing in
 *   Safari and Firefox. A device that grants no more than WebGPU's default limits (a 128 MiB
 *   binding, a 256 MiB buffer) is taken as a phone-class device of 4 GiB when nothing else is known.
 * - The budget: on shared memory, half of it, since the OS, the browser and the other pages keep
 *   the rest and browsers lose the GPU (or the tab) well before the system runs out; on a discrete
 *   GPU three quarters of system memory, because WebGPU shows nothing of its own memory and
 *   consumer GPUs seldom have more memory than the system they sit in, so only a model near the
 *   system's size is flagged there.
 * The warning says what the engine allocated (weights, KV cache, the rest) against that budget.
 */
import type { GPUDescription } from './device';

export type MemoryKind = 'discrete' | 'shared';

export interface SystemMemory {
  bytes: number;
  /** `navigator.deviceMemory`'s 8 GiB cap: the machine has at least this much. */
  atLeast: boolean;
  /** Where the figure came from, for the message. */
  source: string;
}

export interface MemoryUse {
  weights: number;
  kvCache: number;
  /** Activations, logits, staging and readback buffers. */
  other: number;
}

const GiB = 2 ** 30;
/** WebGPU's default limits: a device that grants no more is likely a phone or a small integrated GPU. */
const DEFAULT_BINDING = 128 * 2 ** 20;
const DEFAULT_BUFFER = 256 * 2 ** 20;
/** What such a device is taken to have when nothing else is known. */
const SMALL_DEVICE = 4 * GiB;
const SHARED_SHARE = 0.5;
const DISCRETE_SHARE = 0.75;

/** Whether the adapter has memory of its own (see the file comment for the rules). */
export function memoryKind(info: Pick<GPUDescription, 'vendor' | 'architecture' | 'description' | 'isFallbackAdapter'> & { type?: string }): MemoryKind {
  const type = (info.type ?? '').toLowerCase();
  if (type.includes('discrete')) return 'discrete';
  if (type.includes('integrated') || type.includes('cpu')) return 'shared';
  if (info.isFallbackAdapter || /swiftshader|llvmpipe|lavapipe/i.test(`${info.architecture} ${info.description}`)) return 'shared';
  return /nvidia/i.test(info.vendor) ? 'discrete' : 'shared';
}

/** The system's memory as this runtime tells it (Node's os, the browser's navigator.deviceMemory), or undefined. */
export function systemMemory(): SystemMemory | undefined {
  // process.getBuiltinModule (Node ≥ 20.16) reaches `os` without an import a browser bundle would see.
  const node = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process;
  const os = node?.getBuiltinModule?.('os') as { totalmem?: () => number } | undefined;
  if (os?.totalmem) return { bytes: os.totalmem(), atLeast: false, source: 'os.totalmem()' };
  const gib = (globalThis.navigator as { deviceMemory?: number } | undefined)?.deviceMemory;
  if (typeof gib === 'number' && gib > 0) return { bytes: gib * GiB, atLeast: gib >= 8, source: 'navigator.deviceMemory' };
  return undefined;
}

/**
 * The warning for a model that uses `use` on a device of `kind` with these limits, given the
 * system's memory (or `undefined` when unknown), or `memoryBytes`, what the caller says the GPU
 * may use (then the budget, whatever the rest says); null when it is within the budget.
 */
export function memoryWarning(a: {
  use: MemoryUse;
  kind: MemoryKind;
  system: SystemMemory | undefined;
  limits: Pick<GPUDescription, 'maxStorageBufferBindingSize' | 'maxBufferSize'>;
  memoryBytes?: number;
}): string | null {
  const total = a.use.weights + a.use.kvCache + a.use.other;
  let against: string;
  if (a.memoryBytes !== undefined) {
    if (total <= a.memoryBytes) return null;
    against = `more than the ${gib(a.memoryBytes)} the GPU may use (memoryBytes)`;
  } else {
    const small = a.limits.maxStorageBufferBindingSize <= DEFAULT_BINDING && a.limits.maxBufferSize <= DEFAULT_BUFFER;
    const system = a.system ?? (small ? { bytes: SMALL_DEVICE, atLeast: false, source: 'assumed: the device grants only default limits, as phones do' } : undefined);
    if (!system) return null;
    const share = a.kind === 'shared' ? SHARED_SHARE : DISCRETE_SHARE;
    if (total <= system.bytes * share) return null;
    const where = a.kind === 'shared' ? 'shares' : 'sits beside';
    against = `more than ${Math.round(share * 100)}% of the ${system.atLeast ? 'at least ' : ''}${gib(system.bytes)} of system memory the GPU ${where} (${system.source})`;
  }
  return (
    `This model takes about ${gib(total)} of GPU memory (weights ${gib(a.use.weights)}, KV cache ${gib(a.use.kvCache)}, other ${gib(a.use.other)}), ${against}: ` +
    'it may run slowly, fail to allocate, or lose the GPU. A smaller or more quantised model, or a lower kvCacheTokens or contextLength, leaves more room.'
  );
}

function gib(bytes: number): string {
  return bytes >= GiB ? `${(bytes / GiB).toFixed(1)} GiB` : `${Math.round(bytes / 2 ** 20)} MiB`;
}
