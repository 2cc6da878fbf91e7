/**
 * Dawn in Node reaches the GPU through Vulkan. On a machine without a GPU the system's Mesa ICDs
 * (lavapipe included) give Dawn no usable adapter, but Chromium ships SwiftShader's ICD: point the
 * Vulkan loader at it, so `webgpu-llm generate` and the bench just work there. Must run before
 * the `webgpu` package creates its instance.
 */
import { existsSync, readdirSync } from 'node:fs';

export const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
const ICD_DIRS = ['/usr/share/vulkan/icd.d', '/etc/vulkan/icd.d'];
/** ICDs that run on the CPU or do nothing: not a reason to leave SwiftShader out. */
const SOFTWARE_ICD = /lvp|swiftshader|mock/i;
/** Device nodes a hardware Vulkan driver needs (DRM render nodes, NVIDIA, WSL's dxg). */
const GPU_NODES = ['/dev/dri', '/dev/nvidia0', '/dev/dxg'];

export interface VulkanProbe {
  exists(path: string): boolean;
  list(dir: string): string[];
}

const system: VulkanProbe = {
  exists: existsSync,
  list: (dir) => {
    try {
      return readdirSync(dir);
    } catch {
      return [];
    }
  },
};

/** A hardware ICD is installed and a GPU device node exists for it. */
export function hasHardwareVulkan(probe: VulkanProbe = system): boolean {
  const icds = ICD_DIRS.flatMap((d) => probe.list(d)).filter((f) => f.endsWith('.json') && !SOFTWARE_ICD.test(f));
  return icds.length > 0 && GPU_NODES.some((p) => probe.exists(p));
}

/**
 * Sets VK_ICD_FILENAMES to SwiftShader when it is unset, SwiftShader is installed and no hardware
 * Vulkan is. Returns the ICD it chose, or null when it left the environment alone.
 */
export function useSwiftShaderIfNoGPU(env: NodeJS.ProcessEnv = process.env, probe: VulkanProbe = system): string | null {
  if (env.VK_ICD_FILENAMES || env.WEBGPU_LLM_REAL_GPU) return null;
  if (!probe.exists(SWIFTSHADER_ICD) || hasHardwareVulkan(probe)) return null;
  env.VK_ICD_FILENAMES = SWIFTSHADER_ICD;
  return SWIFTSHADER_ICD;
}
