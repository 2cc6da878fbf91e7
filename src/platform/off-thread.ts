/**
 * A worker thread that runs named operations for the main thread, so that work which can take
 * long (a grammar's compile, a long prompt's tokenization) leaves the event loop free: a server
 * keeps answering `/health` and other requests meanwhile.
 *
 * Node only (node:worker_threads): `OffThread.create` answers null elsewhere, and callers then do
 * the work where they are (in a browser the engine usually runs in a Worker already). The
 * worker's code is a CommonJS script given as a string, so it needs no file of its own in any
 * build (vitest, vite-node, dist/node.js): it defines `const ops = { name(...args) {...} }` and
 * each `call` runs one op with structured-clone arguments, one call at a time, in order. An op
 * that returns `transfer(value, buffers)` hands those ArrayBuffers over instead of copying them.
 *
 * A call may carry a time limit. Nothing else can stop a running wasm function or regex, so past
 * the limit the worker is terminated, the call rejects with OffThreadTimeout, and the next call
 * starts a fresh worker: `epoch` tells callers that the state they sent to the old one is gone.
 *
 * Worker scripts name Node's modules without the `node:` scheme (`require('worker_threads')`):
 * they travel as text in every build, the browser files included (never run there), where a
 * `node:` specifier reads as an import to bundle checks; Node resolves both forms alike.
 */

type NodeWorker = import('node:worker_threads').Worker;
type WorkerClass = typeof import('node:worker_threads').Worker;

/** The call ran past its time limit; the worker was terminated. */
export class OffThreadTimeout extends Error {
  override name = 'OffThreadTimeout';
}

/** The worker stopped before answering (terminated, out of memory, crashed). */
export class OffThreadExit extends Error {
  override name = 'OffThreadExit';
}

/** An op threw in the worker: its message, and the fields the worker's error carried in `detail`. */
export class OffThreadError extends Error {
  override name = 'OffThreadError';
  constructor(
    message: string,
    readonly detail: Record<string, unknown>,
  ) {
    super(message);
  }
}

/**
 * Appended to every worker script: runs each message's op in turn and posts its result, or the
 * error's message plus any `detail` object the op attached to it (structured clone keeps no
 * class, so the main thread gets plain data).
 */
const PRELUDE = `
const TRANSFER = Symbol('transfer');
const transfer = (value, buffers) => ({ [TRANSFER]: buffers, value });
`;
const LOOP = `
;(() => {
  const { parentPort } = require('worker_threads');
  let chain = Promise.resolve();
  parentPort.on('message', ({ id, op, args }) => {
    chain = chain.then(async () => {
      try {
        const result = await ops[op](...args);
        if (result && result[TRANSFER]) parentPort.postMessage({ id, ok: true, value: result.value }, result[TRANSFER]);
        else parentPort.postMessage({ id, ok: true, value: result });
      } catch (e) {
        const message = e instanceof Error ? e.message : String(e);
        parentPort.postMessage({ id, ok: false, error: { message, detail: (e && e.detail) || {} } });
      }
    });
  });
})();
`;

interface Pending {
  resolve(value: unknown): void;
  reject(e: Error): void;
  timer?: ReturnType<typeof setTimeout>;
}

type Reply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: { message: string; detail: Record<string, unknown> } };

export class OffThread {
  private worker: NodeWorker | null = null;
  private epochs = 0;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();

  private constructor(
    private readonly Worker: WorkerClass,
    private readonly source: string,
    private readonly workerData: unknown,
  ) {}

  /** A host for `source` (started on its first call), or null where worker threads do not exist. */
  static async create(source: string, workerData?: unknown): Promise<OffThread | null> {
    if (!isNode()) return null;
    try {
      const { Worker } = await import('node:worker_threads');
      return new OffThread(Worker, PRELUDE + source + LOOP, workerData);
    } catch {
      return null;
    }
  }

  /** Starts the worker if none runs; returns its epoch (a new number for each worker started). */
  start(): number {
    if (!this.worker) {
      const w = new this.Worker(this.source, { eval: true, workerData: this.workerData });
      // An idle worker must not keep the process alive; a call in flight refs it (see call).
      w.unref();
      w.on('message', (m: Reply) => this.settle(m));
      w.on('error', (e: Error) => this.stop(w, new OffThreadExit(`the worker thread failed: ${e.message}`)));
      w.on('exit', (code: number) => this.stop(w, new OffThreadExit(`the worker thread exited (code ${code})`)));
      this.worker = w;
      this.epochs++;
    }
    return this.epochs;
  }

  /** Runs `op(...args)` in the worker. With `timeoutMs`, past it the worker is terminated and the call rejects with OffThreadTimeout. */
  call<T>(op: string, args: unknown[], timeoutMs?: number): Promise<T> {
    this.start();
    const w = this.worker!;
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const p: Pending = { resolve: resolve as (v: unknown) => void, reject };
      if (timeoutMs !== undefined)
        p.timer = setTimeout(() => {
          this.pending.delete(id);
          reject(new OffThreadTimeout(`${op} took longer than ${timeoutMs} ms`));
          this.terminate();
        }, Math.max(0, timeoutMs));
      this.pending.set(id, p);
      if (this.pending.size === 1) w.ref();
      w.postMessage({ id, op, args });
    });
  }

  /**
   * Stops the worker (only if it is still the one of `epoch`, when given); calls in flight reject
   * with OffThreadExit. The next call starts a fresh one.
   */
  terminate(epoch?: number): void {
    const w = this.worker;
    if (!w || (epoch !== undefined && epoch !== this.epochs)) return;
    this.stop(w, new OffThreadExit('the worker thread was terminated'));
    void w.terminate();
  }

  private settle(m: Reply): void {
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    clearTimeout(p.timer);
    if (this.pending.size === 0) this.worker?.unref();
    if (m.ok) p.resolve(m.value);
    else p.reject(new OffThreadError(m.error.message, m.error.detail));
  }

  /** Forgets worker `w` (when still current) and fails what was waiting on it. */
  private stop(w: NodeWorker, reason: Error): void {
    if (this.worker !== w) return;
    this.worker = null;
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(reason);
    }
    this.pending.clear();
  }
}

/** Node (and not a browser test runner that defines `process`): where worker threads exist. */
export function isNode(): boolean {
  return typeof process === 'object' && typeof process.versions?.node === 'string' && typeof document === 'undefined';
}
