/** Buffer helpers. Everything here is for load time and tests: the token loop allocates nothing. */

export const STORAGE = 0x80 | 0x08 | 0x04; // STORAGE | COPY_DST | COPY_SRC (GPUBufferUsage values)
export const UNIFORM = 0x40 | 0x08; // UNIFORM | COPY_DST
export const READBACK = 0x01 | 0x08; // MAP_READ | COPY_DST

/** WebGPU copies and writes move whole 4-byte words. */
export function align4(bytes: number): number {
  return Math.ceil(bytes / 4) * 4;
}

export function createBuffer(device: GPUDevice, size: number, usage: number, label?: string): GPUBuffer {
  return device.createBuffer({ size: Math.max(4, align4(size)), usage, label });
}

/** A new buffer holding `data` (padded to 4 bytes). */
export function uploadBuffer(device: GPUDevice, data: ArrayBufferView, usage = STORAGE, label?: string): GPUBuffer {
  const buffer = createBuffer(device, data.byteLength, usage, label);
  writeBuffer(device, buffer, 0, data);
  return buffer;
}

/** `queue.writeBuffer` for views of any length (the tail is padded to a whole word). */
export function writeBuffer(device: GPUDevice, buffer: GPUBuffer, offset: number, data: ArrayBufferView): void {
  const bytes = new Uint8Array(data.buffer as ArrayBuffer, data.byteOffset, data.byteLength);
  const whole = bytes.byteLength & ~3;
  if (whole > 0) device.queue.writeBuffer(buffer, offset, bytes, 0, whole);
  if (whole < bytes.byteLength) {
    const tail = new Uint8Array(4);
    tail.set(bytes.subarray(whole));
    device.queue.writeBuffer(buffer, offset + whole, tail);
  }
}

/** Copies `size` bytes of `buffer` back to the CPU (tests and load-time checks only). */
export async function readBuffer(device: GPUDevice, buffer: GPUBuffer, size = buffer.size, offset = 0): Promise<ArrayBuffer> {
  const staging = device.createBuffer({ size: align4(size), usage: READBACK, label: 'readback' });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(buffer, offset, staging, 0, align4(size));
  device.queue.submit([encoder.finish()]);
  await staging.mapAsync(0x0001 /* GPUMapMode.READ */);
  const copy = staging.getMappedRange().slice(0, size);
  staging.unmap();
  staging.destroy();
  return copy;
}

/**
 * Packs a `Params` uniform: fields in declaration order, each a u32, i32 or f32 (WGSL's 4-byte
 * scalars), padded to 16 bytes as uniform buffers require.
 */
/** A u32 buffer [n] holding 0, 1, …, n−1: the default row → slot map of the sampler and the penalties op. */
export function identityRows(device: GPUDevice, n: number, label?: string): GPUBuffer {
  return uploadBuffer(device, Uint32Array.from({ length: n }, (_, i) => i), STORAGE, label);
}

export function packParams(fields: Array<['u32' | 'i32' | 'f32', number]>): ArrayBuffer {
  const buffer = new ArrayBuffer(Math.max(16, Math.ceil((fields.length * 4) / 16) * 16));
  const view = new DataView(buffer);
  fields.forEach(([type, value], i) => {
    if (type === 'f32') view.setFloat32(i * 4, value, true);
    else if (type === 'i32') view.setInt32(i * 4, value, true);
    else view.setUint32(i * 4, value, true);
  });
  return buffer;
}

/** What a binding reads: a whole buffer, or a region of one (the step's packed metadata, src/engine/step.ts). */
export type BufferRef = GPUBuffer | GPUBufferBinding;

/** A bind group for a pipeline's group 0 with `buffers` at bindings 0, 1, 2, … (layout 'auto'). */
export function bindBuffers(device: GPUDevice, pipeline: GPUComputePipeline, buffers: readonly BufferRef[]): GPUBindGroup {
  return device.createBindGroup({
    layout: pipeline.getBindGroupLayout(0),
    entries: buffers.map((ref, binding) => ({ binding, resource: 'buffer' in ref ? ref : { buffer: ref } })),
  });
}
