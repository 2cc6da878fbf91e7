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
  /**
   * Element types that stay f32 in the f16 variant: each names an `alias NAME = act;` line of the
   * kernel, rewritten to `alias NAME = f32;` (e.g. the residual stream, f32 at every precision,
   * read or written by an op whose other operands are f16). Nothing changes at f32.
   */
  f32?: readonly string[];
}

const ACT_ALIAS = /^alias act = f32;/m;

/** The aliases a specialisation keeps at f32: none in the f32 variant, where all are f32 anyway. */
function f32Aliases(spec: Specialisation): string[] {
  return spec.precision === 'f16' ? [...new Set(spec.f32 ?? [])].sort() : [];
}

/** The WGSL text of a kernel at a precision, with the aliases `f32` held at f32 (f16 variant only). */
export function kernelSource(kernel: Kernel, precision: Precision = 'f32', f32: readonly string[] = []): string {
  if (precision === 'f32') return kernel.source;
  if (!ACT_ALIAS.test(kernel.source)) {
    throw new Error(`kernel ${kernel.name} has no \`alias act = f32;\` line, so it has no f16 variant`);
  }
  let source = kernel.source.replace(ACT_ALIAS, 'alias act = f16;');
  for (const name of f32) {
    const line = new RegExp(`^alias ${name} = act;`, 'm');
    if (!line.test(source)) throw new Error(`kernel ${kernel.name} has no \`alias ${name} = act;\` line to hold at f32`);
    source = source.replace(line, `alias ${name} = f32;`);
  }
  return 'enable f16;\n' + source;
}

/** The cache key: kernel name + precision (+ its f32 aliases) + sorted override constants. */
export function variantKey(kernel: Kernel, spec: Specialisation = {}): string {
  const constants = Object.entries(spec.constants ?? {})
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  return `${moduleKey(kernel, spec)}/${constants}`;
}

/** The shader module's key: kernel name, precision and the aliases held at f32 (`x_t=f32`...). */
function moduleKey(kernel: Kernel, spec: Specialisation): string {
  const held = f32Aliases(spec).map((a) => `+${a}=f32`).join('');
  return `${kernel.name}/${spec.precision ?? 'f32'}${held}`;
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
    const mkey = moduleKey(kernel, spec);
    let module = this.modules.get(mkey);
    this.device.pushErrorScope('validation');
    if (!module) {
      module = this.device.createShaderModule({ label: mkey, code: kernelSource(kernel, precision, f32Aliases(spec)) });
      this.modules.set(mkey, module);
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
      this.modules.delete(mkey);
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
