/**
 * The bench in Chromium: `npm run bench` opens this page (served by Vite, so `.wgsl` imports work)
 * and calls `window.runBench` with fixture URLs from its static server.
 */
import { acquireGPU, type GPUDescription } from '../../gpu/device';
import type { BenchSettings } from '../run';
import { runTarget, type TargetResult } from '../target';

declare global {
  interface Window {
    runBench(args: { models: Array<{ format: string; url: string }>; overrides: Partial<BenchSettings> }): Promise<TargetResult>;
    /** The adapter this page gets, before any model runs (the bench skips an emulated Chromium beside a real Node GPU). */
    benchAdapter(): Promise<GPUDescription>;
    benchReady: boolean;
  }
}

const logEl = document.getElementById('log')!;

window.runBench = async ({ models, overrides }) => {
  const gpu = await acquireGPU();
  try {
    return await runTarget('chromium', gpu, models.map((m) => ({ format: m.format, location: m.url })), overrides, (line) => {
      console.log(line);
      logEl.textContent += '\n' + line;
    });
  } finally {
    gpu.destroy();
  }
};
window.benchAdapter = async () => {
  const gpu = await acquireGPU();
  try {
    return gpu.info;
  } finally {
    gpu.destroy();
  }
};
window.benchReady = true;
