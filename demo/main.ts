import { acquireGPU } from '../src/gpu/device';
import { WebGPUError } from '../src/gpu/errors';

const status = document.querySelector<HTMLParagraphElement>('#status')!;
const info = document.querySelector<HTMLPreElement>('#gpu-info')!;

try {
  const gpu = await acquireGPU();
  status.textContent = gpu.info.f16 ? 'WebGPU ready (f16 kernels)' : 'WebGPU ready (f32 kernels: this GPU has no shader-f16)';
  status.dataset.state = 'ready';
  info.textContent = JSON.stringify(gpu.info, null, 2);
} catch (e) {
  status.dataset.state = 'error';
  status.textContent = e instanceof WebGPUError ? e.message : `Unexpected error: ${String(e)}`;
}
