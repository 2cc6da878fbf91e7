import { fromGPUError, NO_ADAPTER_HELP, NO_WEBGPU_HELP, WebGPUError } from './errors';

/** What the engine learnt about the GPU it got; shown in the demo and in `/v1/models`. */
export interface GPUDescription {
  vendor: string;
  architecture: string;
  description: string;
  isFallbackAdapter: boolean;
  /** The adapter's kind ('discrete GPU', 'integrated GPU', 'CPU', …) where the browser tells it (Chrome's WebGPU developer features); else ''. */
  type: string;
  /** `shader-f16` was granted: the f16 kernels may run. */
  f16: boolean;
  /** `subgroups` was granted. */
  subgroups: boolean;
  /** `timestamp-query` was granted (per-kernel timings in the bench). */
  timestamps: boolean;
  /** WGSL's `packed_4x8_integer_dot_product` language feature is there (`dot4I8Packed`: the engine's `integerDot` option). */
  integerDot: boolean;
  /** Smallest and largest subgroup size the adapter reports (0 when unknown). */
  subgroupMinSize: number;
  subgroupMaxSize: number;
  maxBufferSize: number;
  maxStorageBufferBindingSize: number;
  maxComputeWorkgroupStorageSize: number;
  maxComputeInvocationsPerWorkgroup: number;
}

export interface GPUContext {
  device: GPUDevice;
  info: GPUDescription;
  /** Resolves when the device is lost for any reason other than our own `destroy()`. */
  lost: Promise<WebGPUError>;
  /** Errors nobody captured with an error scope, e.g. from a dispatch; listeners are called, never swallowed. */
  onError(listener: (error: WebGPUError) => void): () => void;
  destroy(): void;
}

export interface AcquireOptions {
  /** The `GPU` object: `navigator.gpu` in pages and workers (the default), `webgpu`'s `create([])` in Node. */
  gpu?: GPU;
  powerPreference?: GPUPowerPreference;
  /** Do not request `shader-f16` even if offered (to test the f32 path on a real GPU). */
  disableF16?: boolean;
}

const OPTIONAL_FEATURES: GPUFeatureName[] = ['shader-f16', 'subgroups', 'timestamp-query'];

/** Limits we ask for at the adapter's maximum: model weights need big bindings and buffers. */
const LIMITS_AT_MAX = [
  'maxBufferSize',
  'maxStorageBufferBindingSize',
  'maxComputeWorkgroupStorageSize',
  'maxComputeInvocationsPerWorkgroup',
  'maxComputeWorkgroupSizeX',
  'maxComputeWorkgroupSizeY',
  'maxComputeWorkgroupsPerDimension',
  'maxStorageBuffersPerShaderStage',
] as const;

/** Finds an adapter, requests a device with every useful feature and the adapter's limits. */
export async function acquireGPU(options: AcquireOptions = {}): Promise<GPUContext> {
  const gpu = options.gpu ?? (globalThis.navigator as Navigator | undefined)?.gpu;
  if (!gpu) throw new WebGPUError('webgpu_unavailable', NO_WEBGPU_HELP);

  const adapter = await gpu.requestAdapter({ powerPreference: options.powerPreference ?? 'high-performance' });
  if (!adapter) throw new WebGPUError('no_adapter', NO_ADAPTER_HELP);

  const requiredFeatures = OPTIONAL_FEATURES.filter(
    (f) => adapter.features.has(f) && !(f === 'shader-f16' && options.disableF16),
  );
  const requiredLimits: Record<string, number> = {};
  for (const name of LIMITS_AT_MAX) requiredLimits[name] = adapter.limits[name];

  const device = await adapter.requestDevice({ requiredFeatures, requiredLimits, label: 'webgpu-llm' });
  const adapterInfo = (adapter as GPUAdapter & { info?: GPUAdapterInfo }).info;
  const anyInfo = adapterInfo as (GPUAdapterInfo & { subgroupMinSize?: number; subgroupMaxSize?: number; isFallbackAdapter?: boolean }) | undefined;
  const info: GPUDescription = {
    vendor: adapterInfo?.vendor ?? '',
    architecture: adapterInfo?.architecture ?? '',
    description: adapterInfo?.description ?? '',
    type: adapterType(adapterInfo),
    isFallbackAdapter: Boolean(anyInfo?.isFallbackAdapter ?? (adapter as { isFallbackAdapter?: boolean }).isFallbackAdapter),
    f16: device.features.has('shader-f16'),
    subgroups: device.features.has('subgroups'),
    timestamps: device.features.has('timestamp-query'),
    integerDot: (gpu as GPU & { wgslLanguageFeatures?: ReadonlySet<string> }).wgslLanguageFeatures?.has('packed_4x8_integer_dot_product') ?? false,
    subgroupMinSize: anyInfo?.subgroupMinSize ?? 0,
    subgroupMaxSize: anyInfo?.subgroupMaxSize ?? 0,
    maxBufferSize: device.limits.maxBufferSize,
    maxStorageBufferBindingSize: device.limits.maxStorageBufferBindingSize,
    maxComputeWorkgroupStorageSize: device.limits.maxComputeWorkgroupStorageSize,
    maxComputeInvocationsPerWorkgroup: device.limits.maxComputeInvocationsPerWorkgroup,
  };

  let destroyed = false;
  const listeners = new Set<(e: WebGPUError) => void>();
  const emit = (e: WebGPUError) => {
    if (listeners.size === 0) console.error(e);
    for (const l of listeners) l(e);
  };

  const lost = device.lost.then((lostInfo) => {
    const error = new WebGPUError(
      'device_lost',
      `The GPU device was lost (${lostInfo.reason}: ${lostInfo.message || 'no message'}). ` +
        'This happens after a driver reset, a GPU hang or running out of memory; reload the model to continue.',
      { reason: lostInfo.reason },
    );
    if (!destroyed) emit(error);
    return error;
  });

  device.addEventListener('uncapturederror', (event) => {
    emit(fromGPUError((event as GPUUncapturedErrorEvent).error));
  });

  return {
    device,
    info,
    lost,
    onError(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    destroy() {
      destroyed = true;
      device.destroy();
    },
  };
}

/** The adapter info's non-standard `type` (Chrome's WebGPU developer features), or ''. */
function adapterType(info: GPUAdapterInfo | undefined): string {
  const type = (info as { type?: unknown } | undefined)?.type;
  return typeof type === 'string' ? type : '';
}

/**
 * The device's loss if it is lost within `ms`, else null. A loss shows first as a failed call (a
 * mapAsync rejects with an error of its own); `device.lost` resolves a moment later.
 */
export function lostSoon(gpu: Pick<GPUContext, 'lost'>, ms = 200): Promise<WebGPUError | null> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([gpu.lost, new Promise<null>((ok) => (timer = setTimeout(() => ok(null), ms)))]).finally(() => clearTimeout(timer));
}
