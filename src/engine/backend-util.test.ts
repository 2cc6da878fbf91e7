import { describe, expect, it } from 'vitest';
import { RequestQueue } from './backend-util';

describe('RequestQueue', () => {
  it('runs holders one at a time, and a waiter aborted in the queue leaves at once without letting the next overtake', async () => {
    const queue = new RequestQueue();
    const order: string[] = [];
    const a = await queue.acquire();
    const ctl = new AbortController();
    const b = queue.acquire(ctl.signal);
    const c = queue.acquire().then((release) => (order.push('c'), release));
    ctl.abort();
    expect(await b).toBeNull();
    order.push('b left');
    await new Promise((ok) => setImmediate(ok));
    expect(order).toEqual(['b left']); // c still waits for a
    a();
    (await c)();
    expect(order).toEqual(['b left', 'c']);
    // An already aborted signal never waits; an unaborted one gets its turn as usual.
    const done = new AbortController();
    done.abort();
    const hold = await queue.acquire();
    expect(await queue.acquire(done.signal)).toBeNull();
    hold();
    expect(typeof (await queue.acquire(new AbortController().signal))).toBe('function');
  });
});
