/**
 * Peak GPU memory, counted at the source: wraps a device's `createBuffer` (and each buffer's
 * `destroy`) so every byte the engine allocates — weights, KV cache, run state, staging — is seen,
 * without the engine keeping books. Works on Dawn in Node and on Chromium's GPUDevice alike.
 */
export interface BufferTracker {
  /** Bytes of buffers created and not yet destroyed. */
  readonly live: number;
  /** Highest `live` since the tracker started (or since `resetPeak`). */
  readonly peak: number;
  resetPeak(): void;
  /** Puts the device's own `createBuffer` back. */
  stop(): void;
}

export function trackBuffers(device: GPUDevice): BufferTracker {
  const original = device.createBuffer;
  let live = 0;
  let peak = 0;
  const patched = function (this: GPUDevice, descriptor: GPUBufferDescriptor): GPUBuffer {
    const buffer = original.call(device, descriptor);
    const size = buffer.size;
    live += size;
    peak = Math.max(peak, live);
    const destroy = buffer.destroy;
    let destroyed = false;
    buffer.destroy = function () {
      if (!destroyed) {
        destroyed = true;
        live -= size;
      }
      return destroy.call(buffer);
    };
    return buffer;
  };
  device.createBuffer = patched;
  return {
    get live() {
      return live;
    },
    get peak() {
      return peak;
    },
    resetPeak() {
      peak = live;
    },
    stop() {
      if (device.createBuffer === patched) device.createBuffer = original;
    },
  };
}
