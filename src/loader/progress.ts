/**
 * Typed load progress and a throttled emitter. A load runs in phases (download, cache, upload,
 * compile); each phase reports per-file bytes and the phase's running totals. A UI wants a steady
 * trickle, not one event per network chunk, so events are throttled to about 20 per second, but
 * a file's first event and the event that completes it are always delivered, so a bar names the
 * file at work and never stalls short of 100%.
 */

export type LoadPhase = 'download' | 'cache' | 'upload' | 'compile';

export interface LoadProgress {
  phase: LoadPhase;
  /** The URL, path or name of the file this event is about. */
  file: string;
  /** Bytes of `file` done in this phase. */
  bytesDone: number;
  /** Bytes of `file` in this phase (0 when unknown, e.g. a download without Content-Length). */
  bytesTotal: number;
  /** Bytes done over every file of this phase so far. */
  totalBytesDone: number;
  /**
   * Bytes over every file this phase knows of so far. It can grow while a load runs: a folder's
   * shards become known one after another.
   */
  totalBytes: number;
  /** Recent throughput of the phase over a sliding window, in bytes per second. */
  rateBytesPerSec: number;
  /** Seconds left at the current rate, when the rate and the total are known. */
  etaSec?: number;
}

export type ProgressCallback = (p: LoadProgress) => void;

/** One file's progress within a phase. */
export interface FileProgress {
  /** Adds `n` bytes done. */
  add(n: number): void;
  /** Raises the file's total (a download whose length was unknown, or grew). */
  setTotal(total: number): void;
  /** Marks the file complete (bytesDone = bytesTotal) and emits, unthrottled. */
  done(): void;
}

export interface PhaseProgress {
  file(name: string, bytesTotal: number): FileProgress;
}

export interface ProgressOptions {
  /** Minimum milliseconds between throttled events (default 50: about 20 per second). */
  intervalMs?: number;
  /** Clock in milliseconds (tests). */
  now?: () => number;
  /** Window over which the rate is measured (default 3000 ms). */
  rateWindowMs?: number;
}

/** Tracks every phase of one load and forwards throttled events to `onProgress`. */
export class ProgressEmitter {
  private readonly phases = new Map<LoadPhase, PhaseProgress>();
  private readonly intervalMs: number;
  private readonly now: () => number;
  private readonly rateWindowMs: number;

  constructor(
    private readonly onProgress?: ProgressCallback,
    opts: ProgressOptions = {},
  ) {
    this.intervalMs = opts.intervalMs ?? 50;
    this.now = opts.now ?? (() => (typeof performance !== 'undefined' ? performance.now() : Date.now()));
    this.rateWindowMs = opts.rateWindowMs ?? 3000;
  }

  phase(phase: LoadPhase): PhaseProgress {
    let p = this.phases.get(phase);
    if (!p) {
      p = this.createPhase(phase);
      this.phases.set(phase, p);
    }
    return p;
  }

  private createPhase(phase: LoadPhase): PhaseProgress {
    const emit = this.onProgress;
    const now = this.now;
    const intervalMs = this.intervalMs;
    const windowMs = this.rateWindowMs;
    let totalDone = 0;
    let totalBytes = 0;
    let lastEmit = -Infinity;
    // (time, totalDone) samples within the rate window; the first is the window's start.
    const samples: Array<[number, number]> = [];

    const rate = (t: number): number => {
      samples.push([t, totalDone]);
      while (samples.length > 2 && t - samples[1][0] >= windowMs) samples.shift();
      const [t0, d0] = samples[0];
      const dt = (t - t0) / 1000;
      return dt > 0 ? (totalDone - d0) / dt : 0;
    };

    return {
      file(name, bytesTotal) {
        let done = 0;
        let total = Math.max(0, bytesTotal);
        let finished = false;
        totalBytes += total;
        if (samples.length === 0) samples.push([now(), totalDone]);

        const send = (force: boolean): void => {
          const t = now();
          const r = rate(t);
          if (!emit || (!force && t - lastEmit < intervalMs)) return;
          lastEmit = t;
          const p: LoadProgress = {
            phase,
            file: name,
            bytesDone: done,
            bytesTotal: total,
            totalBytesDone: totalDone,
            totalBytes,
            rateBytesPerSec: r,
          };
          if (r > 0 && totalBytes >= totalDone) p.etaSec = (totalBytes - totalDone) / r;
          emit(p);
        };

        return {
          add(n) {
            if (finished || n <= 0) return;
            const first = done === 0;
            done += n;
            totalDone += n;
            // Bytes past the announced total (a wrong Content-Length) raise the total, so
            // bytesDone never exceeds bytesTotal.
            if (total > 0 && done > total) this.setTotal(done);
            send(first); // a file's first bytes always show, so a UI can name the file at work
          },
          setTotal(t) {
            if (t <= total) return;
            totalBytes += t - total;
            total = t;
          },
          done() {
            if (finished) return;
            finished = true;
            if (done < total) {
              totalDone += total - done;
              done = total;
            } else if (done > total) {
              totalBytes += done - total;
              total = done;
            }
            send(true);
          },
        };
      },
    };
  }
}
