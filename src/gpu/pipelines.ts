import { fromGPUError, WebGPUError } from './errors';

/** A WGSL kernel: one file of `shaders/`, with one `main` compute entry point. */
export interface Kernel {
  /** The file's base name, e.g. `rms_norm`; part of the pipeline-cache key. */
  name: string;
  source: string;
}

export type Precision = 'f32' | 'f16';

export interface Specialisation {
  /** Values for the shader's `override` constants (workgroup sizes, tile shapes, flags). */
  constants?: Record<string, number>;
  /**
   * Activation precision. The f16 variant prepends `enable f16;` and rewrites the kernel's single
   * `alias act = f32;` line: the only textual substitution, for what `override` cannot express.
   */
  precision?: Precision;
}

const ACT_ALIAS = /^alias act = f32;/m;

/** The WGSL text of a kernel at a precision. */
export function kernelSource(kernel: Kernel, precision: Precision = 'f32'): string {
  if (precision === 'f32') return kernel.source;
  if (!ACT_ALIAS.test(kernel.source)) {
    throw new Error(`kernel ${kernel.name} has no \`alias act = f32;\` line, so it has no f16 variant`);
  }
  return 'enable f16;\n' + kernel.source.replace(ACT_ALIAS, 'alias act = f16;');
}

/** The cache key: kernel name + precision + sorted override constants. */
export function variantKey(kernel: Kernel, spec: Specialisation = {}): string {
  const constants = Object.entries(spec.constants ?? {})
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  return `${kernel.name}/${spec.precision ?? 'f32'}/${constants}`;
}

/**
 * Compiles each kernel variant once. All pipelines are created at model load, never in the token
 * loop; `get` is async so compilation can overlap weight upload.
 */
export class PipelineCache {
  private readonly modules = new Map<string, GPUShaderModule>();
  private readonly pipelines = new Map<string, Promise<GPUComputePipeline>>();

  constructor(private readonly device: GPUDevice) {}

  get size(): number {
    return this.pipelines.size;
  }

  get(kernel: Kernel, spec: Specialisation = {}): Promise<GPUComputePipeline> {
    const key = variantKey(kernel, spec);
    let pipeline = this.pipelines.get(key);
    if (!pipeline) {
      pipeline = this.compile(kernel, spec, key);
      this.pipelines.set(key, pipeline);
      // A failed compile must not poison the cache for a later retry.
      pipeline.catch(() => this.pipelines.delete(key));
    }
    return pipeline;
  }

  private async compile(kernel: Kernel, spec: Specialisation, key: string): Promise<GPUComputePipeline> {
    const precision = spec.precision ?? 'f32';
    const moduleKey = `${kernel.name}/${precision}`;
    let module = this.modules.get(moduleKey);
    this.device.pushErrorScope('validation');
    if (!module) {
      module = this.device.createShaderModule({ label: moduleKey, code: kernelSource(kernel, precision) });
      this.modules.set(moduleKey, module);
    }
    let pipeline: GPUComputePipeline | undefined;
    let failure: unknown;
    try {
      pipeline = await this.device.createComputePipelineAsync({
        label: key,
        layout: 'auto',
        compute: { module, entryPoint: 'main', constants: spec.constants },
      });
    } catch (e) {
      failure = e;
    }
    const scoped = await this.device.popErrorScope();
    if (failure || scoped || !pipeline) {
      this.modules.delete(moduleKey);
      const messages = await compilationMessages(module);
      const cause = scoped ? fromGPUError(scoped, `kernel ${key}`).message : String(failure);
      throw new WebGPUError('validation', `Kernel ${key} failed to compile: ${cause}${messages}`);
    }
    return pipeline;
  }
}

async function compilationMessages(module: GPUShaderModule): Promise<string> {
  try {
    const info = await module.getCompilationInfo();
    const errors = info.messages.filter((m) => m.type === 'error');
    return errors.map((m) => `\n  ${m.lineNum}:${m.linePos} ${m.message}`).join('');
  } catch {
    return '';
  }
}

const caches = new WeakMap<GPUDevice, PipelineCache>();

/** The device's one pipeline cache: the engine and the tests share its compiled variants. */
export function pipelineCache(device: GPUDevice): PipelineCache {
  let cache = caches.get(device);
  if (!cache) caches.set(device, (cache = new PipelineCache(device)));
  return cache;
}
