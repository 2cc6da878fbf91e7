/** How long the event loop is held while work runs: what the off-thread tests (issue #19) measure. */
import { expect } from 'vitest';

/** The longest gap between ticks of a 10 ms timer while `work` runs, in ms. */
export async function longestStall(work: () => Promise<unknown>): Promise<number> {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 10);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  return Math.max(longest, performance.now() - last);
}

/**
 * Polls `/health` through `handle` every 5 ms until `done` settles; the longest time between two
 * answers in ms (what a client waits for one while the loop is held). Every answer must be 200.
 */
export async function slowestHealth(handle: (r: Request) => Promise<Response>, done: Promise<unknown>): Promise<number> {
  let settled = false;
  void done.finally(() => (settled = true));
  let slowest = 0;
  let last = performance.now();
  while (!settled) {
    const r = await handle(new Request('http://localhost/health'));
    expect(r.status).toBe(200);
    const now = performance.now();
    slowest = Math.max(slowest, now - last);
    last = now;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  // A loop held until `done` settled shows only here: no answer came in between.
  return Math.max(slowest, performance.now() - last);
}
