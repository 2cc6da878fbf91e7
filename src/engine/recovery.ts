/**
 * Recovery from a lost GPU device (issue #33): when the device is lost for any reason but our own
 * `destroy()` (a driver reset, a GPU switch, a backgrounded tab, another tab's memory), a new
 * device is acquired with the same adapter options and the engine rebuilds on it (weights read
 * again from the model's source, which is the loader's cache: no second download; pipelines;
 * LoRA adapters). The scheduler puts every running sequence back in the queue, to be fed its
 * tokens again (./scheduler.ts `recover`): sampling follows (seed, tokens drawn), so streams go on
 * as if nothing happened.
 *
 * This file holds the policy and the bookkeeping, not the GPU work: which device is current,
 * whether it is lost, one rebuild at a time (a loss during a rebuild starts it again), the limit of
 * losses in a window, and the failure that makes the engine unusable (no adapter, a rebuild that
 * fails, or too many losses: every sequence then ends with the `device_lost` error).
 */
import { lostSoon, type GPUContext } from '../gpu/device';
import { WebGPUError } from '../gpu/errors';
import { nextTask } from './backend-util';

export interface RecoveryOptions {
  /** A new device, acquired as the lost one was (the same adapter options). */
  acquire(): Promise<GPUContext>;
  /** Losses recovered from within `windowMs`; one more ends the engine (default 3). */
  maxLosses?: number;
  /** The window of `maxLosses`, in ms (default 60 000). */
  windowMs?: number;
  /** Each new device, as soon as it is acquired (the host listens to its errors and its loss). */
  onDevice?(gpu: GPUContext): void;
}

export const RECOVERY_DEFAULTS = { maxLosses: 3, windowMs: 60_000 } as const;

/** What the engine does for a recovery. */
export interface RecoveryHooks {
  /** The current device was lost: the scheduler sets its sequences aside (called at once, before the rebuild). */
  lost(): void;
  /** Frees what lived on the lost device and builds it all on `gpu`; throws when it cannot. */
  rebuild(gpu: GPUContext): Promise<void>;
  /** The engine was disposed: no recovery. */
  disposed(): boolean;
}

export class DeviceRecovery {
  /** Recoveries completed since load. */
  recoveries = 0;
  /** Set when recovery gave up: the engine is unusable and this is what every request ends with. */
  failure: WebGPUError | null = null;
  private current: GPUContext;
  /** The current device's loss, until a rebuild replaced it. */
  private lostNow: WebGPUError | null = null;
  private recovering: Promise<void> | null = null;
  /** When each loss happened (ms), within the window. */
  private readonly times: number[] = [];

  constructor(
    gpu: GPUContext,
    /** Absent: a loss ends the engine (no recovery). */
    private readonly options: RecoveryOptions | undefined,
    private readonly hooks: RecoveryHooks,
  ) {
    this.current = gpu;
    this.watch(gpu);
  }

  /** The device the engine runs on now. */
  get gpu(): GPUContext {
    return this.current;
  }

  /** A rebuild is under way. */
  get active(): boolean {
    return this.recovering !== null;
  }

  /**
   * Resolves once the engine runs on a live device (at once when the current one is not lost),
   * or rejects with the failure that ends the engine.
   */
  recover(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    this.start();
    return this.recovering ?? Promise.resolve();
  }

  private watch(gpu: GPUContext): void {
    void gpu.lost.then((e) => {
      if (gpu !== this.current || this.failure || this.hooks.disposed()) return;
      this.lostNow = e;
      this.hooks.lost();
      this.start();
    });
  }

  private start(): void {
    if (this.recovering || !this.lostNow || this.failure) return;
    const p = this.run(this.lostNow)
      .then(
        () => void this.recoveries++,
        (e: unknown) => {
          this.failure = e instanceof WebGPUError ? e : this.lostNow!;
          throw this.failure;
        },
      )
      .finally(() => {
        this.recovering = null;
        // The new device was lost between the rebuild's last look and now.
        if (this.lostNow) this.start();
      });
    p.catch(() => {});
    this.recovering = p;
  }

  private async run(loss: WebGPUError): Promise<void> {
    const maxLosses = this.options?.maxLosses ?? RECOVERY_DEFAULTS.maxLosses;
    const windowMs = this.options?.windowMs ?? RECOVERY_DEFAULTS.windowMs;
    for (;;) {
      if (!this.options || this.hooks.disposed()) throw loss;
      const now = Date.now();
      this.times.push(now);
      while (this.times[0]! <= now - windowMs) this.times.shift();
      if (this.times.length > maxLosses)
        throw new WebGPUError('device_lost', `${loss.message} (The device was lost ${this.times.length} times in ${windowMs / 1000} s: the engine stopped recovering.)`, { reason: (loss as { reason?: string }).reason });
      let gpu: GPUContext | null = null;
      try {
        gpu = await this.options.acquire();
        this.options.onDevice?.(gpu);
        await this.hooks.rebuild(gpu);
      } catch {
        const again = gpu && (await lostSoon(gpu));
        if (again) {
          loss = again;
          continue;
        }
        gpu?.destroy();
        // No adapter, or a device that cannot hold the model: the engine ends with the loss.
        throw loss;
      }
      this.current = gpu;
      this.lostNow = null;
      this.watch(gpu);
      // A loss during the rebuild is reported by now: start again.
      await nextTask();
      if (!this.lostNow) return;
      loss = this.lostNow;
    }
  }
}
