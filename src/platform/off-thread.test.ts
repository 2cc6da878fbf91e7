/**
 * OffThread on its own: ops run in order with their results or errors (with the detail the op
 * attached), buffers handed over arrive whole, a call past its time limit terminates the worker
 * and the next call runs on a fresh one (a new epoch), and terminate() fails what was waiting.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { OffThread, OffThreadError, OffThreadExit, OffThreadTimeout } from './off-thread';

const SOURCE = `
let calls = 0;
const ops = {
  add: (a, b) => (calls++, a + b),
  calls: () => calls,
  fail(message) {
    const e = new Error(message);
    e.detail = { why: 'asked to' };
    throw e;
  },
  spin(ms) {
    const end = Date.now() + ms;
    while (Date.now() < end);
    return 'done';
  },
  bytes(n) {
    const a = new Int32Array(n).map((_, i) => i);
    return transfer(a, [a.buffer]);
  },
};
`;

let host: OffThread;
afterAll(() => host?.terminate());

describe('OffThread', () => {
  it('runs ops in order and answers their results, errors with their detail, and handed-over buffers', async () => {
    host = (await OffThread.create(SOURCE))!;
    expect(host).not.toBeNull();
    expect(await Promise.all([host.call('add', [1, 2]), host.call('add', [3, 4]), host.call('calls', [])])).toEqual([3, 7, 2]);
    const e = await host.call('fail', ['no']).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OffThreadError);
    expect(e).toMatchObject({ message: 'no', detail: { why: 'asked to' } });
    const a = await host.call<Int32Array>('bytes', [1000]);
    expect(a).toBeInstanceOf(Int32Array);
    expect(a[999]).toBe(999);
  });

  it('terminates a call past its time limit; the next call runs on a fresh worker', async () => {
    const epoch = host.start();
    const t = performance.now();
    const spinning = host.call('spin', [60_000], 100);
    const waiting = host.call('add', [1, 1]).catch((x: unknown) => x); // queued behind the spin
    await expect(spinning).rejects.toBeInstanceOf(OffThreadTimeout);
    expect(performance.now() - t).toBeLessThan(5_000);
    expect(await waiting).toBeInstanceOf(OffThreadExit);
    expect(await host.call('calls', [])).toBe(0);
    expect(host.start()).toBe(epoch + 1);
  });

  it('fails the calls in flight when terminated', async () => {
    const spinning = host.call('spin', [60_000]);
    host.terminate();
    await expect(spinning).rejects.toBeInstanceOf(OffThreadExit);
    expect(await host.call('add', [2, 2])).toBe(4);
  });
});
