/**
 * Per-dispatch GPU times from `timestamp-query`. The profiler stands in for a step's compute pass
 * (GpuEngine.profiler): it remembers the pipeline and bind groups the ops set, and turns every
 * dispatch into its own pass whose beginning and end are timestamped. More passes than the normal
 * path (which records a whole step into one), so only profiling runs use it. Each dispatch is
 * named by its op's label and bytes (declared with its bind group, src/kernels/op.ts), so time
 * adds up per op role (q, k, …, lm_head) and per kernel, and bytes ÷ time gives each op's GB/s.
 */
import type { StepProfiler } from '../engine/engine';
import { dispatchInfo, type StepShape } from '../kernels/op';

const QUERY_RESOLVE = 0x0200; // GPUBufferUsage.QUERY_RESOLVE
const COPY_SRC = 0x0004;
const MAP_READ_DST = 0x0001 | 0x0008;

/** One dispatch of a profiled step. */
export interface ProfiledDispatch {
  /** The kernel variant (its pipeline label). */
  kernel: string;
  /** The op's role (q, k, v, o, gate, up, down, lm_head, attention, attn_norm, …); `(unlabelled)` when its op declared none. */
  role?: string;
  /** The op's layer; absent outside the layers. */
  layer?: number;
  /** Bytes the dispatch must read and write (src/kernels/op.ts DispatchInfo); absent when undeclared. */
  bytes?: number;
  /** GPU time of its pass. */
  ns: number;
}

/** One step's dispatches, in order. */
export interface ProfiledStep {
  dispatches: ProfiledDispatch[];
  /** From the first dispatch's start to the last one's end: its GPU time with the gaps between passes. */
  spanNs?: number;
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

/** Time and bytes per op role (all layers together), aggregated over steps. */
export interface OpTime {
  role: string;
  /** Dispatches per step. */
  calls: number;
  /** GPU milliseconds per step. */
  ms: number;
  /** Bytes per step (read + written). */
  bytes: number;
  /** bytes ÷ GPU time, in GB/s (1e9 bytes/s); NaN when the time rounds to 0. */
  gbPerSecond: number;
  /** Share of the steps' summed dispatch time (0..1). */
  share: number;
  /** gbPerSecond ÷ the copy kernel's GB/s on the same device (null when no copy figure is given). */
  copyShare: number | null;
}

type Recorded = Omit<ProfiledDispatch, 'ns'>;

interface Pending {
  readback: GPUBuffer;
  dispatches: Recorded[];
}

export class TimestampProfiler implements StepProfiler {
  private readonly querySet: GPUQuerySet;
  private readonly resolve: GPUBuffer;
  private readonly pending: Pending[] = [];
  private dispatches: Recorded[] = [];
  private shape: StepShape = { tokens: 0, seqs: 0, keys: [] };
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
  /** `shape`: the step's, for the dispatches' bytes (the engine passes it; tests may leave it out). */
  begin(encoder: GPUCommandEncoder, resume = false, shape?: StepShape): GPUComputePassEncoder {
    if (!resume) this.dispatches = [];
    if (shape) this.shape = shape;
    return this.stepPass(encoder) as unknown as GPUComputePassEncoder;
  }

  /** Resolves every query of the step, those written by earlier command buffers of it too. */
  end(encoder: GPUCommandEncoder): void {
    const n = this.dispatches.length;
    if (n === 0) return;
    // A readback buffer per step: profiling runs may allocate; steps are mapped in `collect`.
    const readback = this.device.createBuffer({ size: 16 * n, usage: MAP_READ_DST, label: 'profiler readback' });
    encoder.resolveQuerySet(this.querySet, 0, 2 * n, this.resolve, 0);
    encoder.copyBufferToBuffer(this.resolve, 0, readback, 0, 16 * n);
    this.pending.push({ readback, dispatches: this.dispatches });
  }

  /** Reads back every step profiled since the last call (all must have been submitted). */
  async collect(): Promise<ProfiledStep[]> {
    const steps: ProfiledStep[] = [];
    for (const { readback, dispatches } of this.pending.splice(0)) {
      await readback.mapAsync(0x0001 /* GPUMapMode.READ */);
      const ticks = new BigUint64Array(readback.getMappedRange());
      const span = Number(ticks[2 * dispatches.length - 1]! - ticks[0]!);
      steps.push({
        dispatches: dispatches.map((d, i) => {
          const ns = Number(ticks[2 * i + 1]! - ticks[2 * i]!);
          return { ...d, ns: ns > 0 ? ns : 0 };
        }),
        spanNs: span > 0 ? span : 0,
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
      const i = this.dispatches.length;
      const timed = i < this.maxDispatches;
      if (!timed) this.untimed++;
      const pass = encoder.beginComputePass(
        timed ? { timestampWrites: { querySet: this.querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 } } : {},
      );
      pass.setPipeline(pipeline);
      for (const [index, { group, offsets }] of groups) pass.setBindGroup(index, group, offsets);
      record(pass);
      pass.end();
      if (timed) {
        const info = dispatchInfo(groups.get(0)?.group);
        this.dispatches.push(
          info
            ? { kernel: pipeline.label, role: info.role, layer: info.layer, bytes: info.bytes(this.shape) }
            : { kernel: pipeline.label, role: UNLABELLED },
        );
      }
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

/** The role of a dispatch whose op declared no label (describeDispatch). */
export const UNLABELLED = '(unlabelled)';

/**
 * Per-op-role time, bytes and GB/s per step, averaged over `steps`, slowest first. `copyGBps`: the
 * copy kernel's bandwidth on the same device, the yardstick for `copyShare`.
 */
export function aggregateByOp(steps: readonly ProfiledStep[], copyGBps: number | null = null): OpTime[] {
  if (steps.length === 0) return [];
  const byRole = new Map<string, { calls: number; ns: number; bytes: number }>();
  for (const step of steps) {
    for (const d of step.dispatches) {
      const role = d.role ?? UNLABELLED;
      const r = byRole.get(role) ?? { calls: 0, ns: 0, bytes: 0 };
      r.calls++;
      r.ns += d.ns;
      r.bytes += d.bytes ?? 0;
      byRole.set(role, r);
    }
  }
  const total = [...byRole.values()].reduce((n, r) => n + r.ns, 0) || 1;
  return [...byRole]
    .map(([role, r]) => {
      const gbPerSecond = gbps(r.bytes, r.ns);
      return {
        role,
        calls: r.calls / steps.length,
        ms: r.ns / steps.length / 1e6,
        bytes: r.bytes / steps.length,
        gbPerSecond,
        share: r.ns / total,
        copyShare: copyGBps && Number.isFinite(gbPerSecond) ? gbPerSecond / copyGBps : null,
      };
    })
    .sort((a, b) => b.ms - a.ms);
}

/** Bytes over nanoseconds in GB/s (1e9 bytes/s = bytes per ns); NaN for no time. */
export function gbps(bytes: number, ns: number): number {
  return ns > 0 ? bytes / ns : NaN;
}

/** A profiled step's totals: dispatches, summed dispatch time, span and bytes. */
export function stepTotals(step: ProfiledStep): { dispatches: number; ns: number; spanNs: number; bytes: number } {
  let ns = 0;
  let bytes = 0;
  for (const d of step.dispatches) {
    ns += d.ns;
    bytes += d.bytes ?? 0;
  }
  return { dispatches: step.dispatches.length, ns, spanNs: step.spanNs ?? ns, bytes };
}
