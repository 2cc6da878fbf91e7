import { createBuffer, readBuffer, STORAGE, UNIFORM, uploadBuffer, bindBuffers } from './buffers';
import type { GPUContext } from './device';
import { fromGPUError } from './errors';
import { pipelineCache, type Kernel, type Specialisation } from './pipelines';

export { pipelineCache };

/** One binding of a test dispatch; binding index = position in the list. */
export type TestBinding =
  | { input: ArrayBufferView } // read-only storage
  | { inout: ArrayBufferView } // read-write storage, read back after the dispatch
  | { output: number } // read-write storage of this many bytes, zero-filled, read back
  | { uniform: ArrayBuffer | ArrayBufferView };


/**
 * Runs one kernel once and returns the read-back `inout`/`output` buffers, in binding order.
 * The small way to exercise a kernel from a test; the engine records its own command buffers.
 */
export async function runKernel(
  gpu: GPUContext,
  kernel: Kernel,
  spec: Specialisation,
  bindings: TestBinding[],
  workgroups: [number, number?, number?],
): Promise<ArrayBuffer[]> {
  const { device } = gpu;
  const pipeline = await pipelineCache(device).get(kernel, spec);
  const buffers: GPUBuffer[] = [];
  const readBack: GPUBuffer[] = [];
  device.pushErrorScope('validation');
  for (const b of bindings) {
    if ('input' in b) buffers.push(uploadBuffer(device, b.input, STORAGE));
    else if ('inout' in b) readBack.push(pushed(buffers, uploadBuffer(device, b.inout, STORAGE)));
    else if ('output' in b) readBack.push(pushed(buffers, createBuffer(device, b.output, STORAGE)));
    else buffers.push(uploadBuffer(device, ArrayBuffer.isView(b.uniform) ? b.uniform : new Uint8Array(b.uniform), UNIFORM));
  }
  const bindGroup = bindBuffers(device, pipeline, buffers);
  const encoder = device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, bindGroup);
  pass.dispatchWorkgroups(workgroups[0], workgroups[1] ?? 1, workgroups[2] ?? 1);
  pass.end();
  device.queue.submit([encoder.finish()]);
  const error = await device.popErrorScope();
  if (error) throw fromGPUError(error, `dispatch of ${kernel.name}`);
  const results = await Promise.all(
    readBack.map((buffer) => readBuffer(device, buffer, sizeOf(bindings[buffers.indexOf(buffer)]!))),
  );
  for (const buffer of buffers) buffer.destroy();
  return results;
}

function pushed(list: GPUBuffer[], buffer: GPUBuffer): GPUBuffer {
  list.push(buffer);
  return buffer;
}

function sizeOf(b: TestBinding): number {
  if ('output' in b) return b.output;
  if ('inout' in b) return b.inout.byteLength;
  return 0;
}
