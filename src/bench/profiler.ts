/**
 * Per-kernel GPU times from `timestamp-query`. The profiler stands in for a step's compute pass
 * (GpuEngine.profiler): it remembers the pipeline and bind groups the ops set, and turns every
 * dispatch into its own pass whose beginning and end are timestamped. More passes than the normal
 * path (which records a whole step into one), so only profiling runs use it.
 */
import type { StepProfiler } from '../engine/engine';

const QUERY_RESOLVE = 0x0200; // GPUBufferUsage.QUERY_RESOLVE
const COPY_SRC = 0x0004;
const MAP_READ_DST = 0x0001 | 0x0008;

/** One step's dispatches, in order: the kernel variant (pipeline label) and its GPU time. */
export interface ProfiledStep {
  dispatches: Array<{ kernel: string; ns: number }>;
}

/** Time per kernel, aggregated over steps. */
export interface KernelTime {
  /** The kernel's name (the pipeline label up to its first `/`, e.g. `matvec`). */
  kernel: string;
  /** Dispatches per step. */
  calls: number;
  /** GPU milliseconds per step. */
  ms: number;
  /** Share of the step's summed kernel time (0..1). */
  share: number;
}

interface Pending {
  readback: GPUBuffer;
  kernels: string[];
}

export class TimestampProfiler implements StepProfiler {
  private readonly querySet: GPUQuerySet;
  private readonly resolve: GPUBuffer;
  private readonly pending: Pending[] = [];
  private kernels: string[] = [];
  private untimed = 0;

  /** `maxDispatches`: per step; dispatches past it run untimed (and are counted in `untimedDispatches`). */
  constructor(
    private readonly device: GPUDevice,
    private readonly maxDispatches = 2048,
  ) {
    if (!device.features.has('timestamp-query')) throw new Error('TimestampProfiler needs the timestamp-query feature, which this device was not granted');
    this.querySet = device.createQuerySet({ type: 'timestamp', count: 2 * maxDispatches, label: 'profiler' });
    this.resolve = device.createBuffer({ size: 16 * maxDispatches, usage: QUERY_RESOLVE | COPY_SRC, label: 'profiler resolve' });
  }

  /** Dispatches that did not fit the query set and ran untimed. */
  get untimedDispatches(): number {
    return this.untimed;
  }

  /** `resume`: the step goes on in another command buffer (a masked step's second one); its dispatches join the step's. */
  begin(encoder: GPUCommandEncoder, resume = false): GPUComputePassEncoder {
    if (!resume) this.kernels = [];
    return this.stepPass(encoder) as unknown as GPUComputePassEncoder;
  }

  /** Resolves every query of the step, those written by earlier command buffers of it too. */
  end(encoder: GPUCommandEncoder): void {
    const n = this.kernels.length;
    if (n === 0) return;
    // A readback buffer per step: profiling runs may allocate; steps are mapped in `collect`.
    const readback = this.device.createBuffer({ size: 16 * n, usage: MAP_READ_DST, label: 'profiler readback' });
    encoder.resolveQuerySet(this.querySet, 0, 2 * n, this.resolve, 0);
    encoder.copyBufferToBuffer(this.resolve, 0, readback, 0, 16 * n);
    this.pending.push({ readback, kernels: this.kernels });
  }

  /** Reads back every step profiled since the last call (all must have been submitted). */
  async collect(): Promise<ProfiledStep[]> {
    const steps: ProfiledStep[] = [];
    for (const { readback, kernels } of this.pending.splice(0)) {
      await readback.mapAsync(0x0001 /* GPUMapMode.READ */);
      const ticks = new BigUint64Array(readback.getMappedRange());
      steps.push({
        dispatches: kernels.map((kernel, i) => {
          const ns = Number(ticks[2 * i + 1]! - ticks[2 * i]!);
          return { kernel, ns: ns > 0 ? ns : 0 };
        }),
      });
      readback.unmap();
      readback.destroy();
    }
    return steps;
  }

  destroy(): void {
    for (const p of this.pending.splice(0)) p.readback.destroy();
    this.querySet.destroy();
    this.resolve.destroy();
  }

  /** The stand-in pass: state calls are remembered, each dispatch becomes one timed pass. */
  private stepPass(encoder: GPUCommandEncoder) {
    let pipeline: GPUComputePipeline | null = null;
    const groups = new Map<number, { group: GPUBindGroup | null; offsets?: Iterable<number> }>();
    const dispatch = (record: (pass: GPUComputePassEncoder) => void) => {
      if (!pipeline) throw new Error('profiler: dispatch before setPipeline');
      const i = this.kernels.length;
      const timed = i < this.maxDispatches;
      if (!timed) this.untimed++;
      const pass = encoder.beginComputePass(
        timed ? { timestampWrites: { querySet: this.querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 } } : {},
      );
      pass.setPipeline(pipeline);
      for (const [index, { group, offsets }] of groups) pass.setBindGroup(index, group, offsets);
      record(pass);
      pass.end();
      if (timed) this.kernels.push(pipeline.label);
    };
    return {
      label: 'profiled step',
      setPipeline(p: GPUComputePipeline) {
        pipeline = p;
      },
      setBindGroup(index: number, group: GPUBindGroup | null, offsets?: Iterable<number>) {
        groups.set(index, { group, offsets });
      },
      dispatchWorkgroups(x: number, y?: number, z?: number) {
        dispatch((pass) => pass.dispatchWorkgroups(x, y, z));
      },
      dispatchWorkgroupsIndirect(buffer: GPUBuffer, offset: number) {
        dispatch((pass) => pass.dispatchWorkgroupsIndirect(buffer, offset));
      },
      pushDebugGroup() {},
      popDebugGroup() {},
      insertDebugMarker() {},
      end() {},
    };
  }
}

/** The kernel name of a pipeline label (`matvec/f32/WG=64,...` → `matvec`). */
export function kernelName(label: string): string {
  return label.split('/')[0] || label || '(unlabelled)';
}

/** Per-kernel time per step, averaged over `steps`, slowest first. */
export function aggregateByKernel(steps: readonly ProfiledStep[]): KernelTime[] {
  if (steps.length === 0) return [];
  const byKernel = new Map<string, { calls: number; ns: number }>();
  for (const step of steps) {
    for (const d of step.dispatches) {
      const name = kernelName(d.kernel);
      const k = byKernel.get(name) ?? { calls: 0, ns: 0 };
      k.calls++;
      k.ns += d.ns;
      byKernel.set(name, k);
    }
  }
  const total = [...byKernel.values()].reduce((n, k) => n + k.ns, 0) || 1;
  return [...byKernel]
    .map(([kernel, k]) => ({ kernel, calls: k.calls / steps.length, ms: k.ns / steps.length / 1e6, share: k.ns / total }))
    .sort((a, b) => b.ms - a.ms);
}
