import { describe, expect, it } from 'vitest';
import { ProgressEmitter, type LoadProgress } from './progress';

function setup(intervalMs = 50) {
  const events: LoadProgress[] = [];
  let t = 0;
  const emitter = new ProgressEmitter((p) => events.push(p), { intervalMs, now: () => t });
  return { events, emitter, tick: (ms: number) => (t += ms) };
}

describe('ProgressEmitter', () => {
  it('throttles a burst of chunks to one event per interval but always delivers a file\'s first and last', () => {
    const { events, emitter, tick } = setup();
    const f = emitter.phase('download').file('a.gguf', 1000);
    for (let i = 0; i < 100; i++) {
      f.add(10);
      tick(1); // 100 chunks in 100 ms
    }
    const g = emitter.phase('download').file('b.gguf', 10);
    g.add(5); // within 50 ms of the last event, but b's first
    f.done();
    // a's first chunk, one per 50 ms after it, b's first, then a's final 100% one.
    expect(events.map((e) => e.file)).toEqual(['a.gguf', 'a.gguf', 'b.gguf', 'a.gguf']);
    const last = events.at(-1)!;
    expect(last).toMatchObject({ phase: 'download', file: 'a.gguf', bytesDone: 1000, bytesTotal: 1000, totalBytesDone: 1005, totalBytes: 1010 });
  });

  it('reports totals over all files of a phase and a rate over the window', () => {
    const { events, emitter, tick } = setup(0);
    const phase = emitter.phase('download');
    const a = phase.file('a', 500);
    const b = phase.file('b', 1500);
    tick(1000);
    a.add(500);
    tick(1000);
    b.add(1000);
    const e = events.at(-1)!;
    expect(e).toMatchObject({ file: 'b', bytesDone: 1000, bytesTotal: 1500, totalBytesDone: 1500, totalBytes: 2000 });
    expect(e.rateBytesPerSec).toBeCloseTo(750); // 1500 bytes over 2 s
    expect(e.etaSec).toBeCloseTo(500 / 750);
  });

  it('raises a file total when more bytes arrive than announced, so done never exceeds total', () => {
    const { events, emitter } = setup(0);
    const f = emitter.phase('download').file('x', 10);
    f.add(15);
    f.done();
    for (const e of events) expect(e.bytesDone).toBeLessThanOrEqual(e.bytesTotal);
    expect(events.at(-1)).toMatchObject({ bytesDone: 15, bytesTotal: 15, totalBytes: 15 });
  });

  it('completes a file of unknown size at the bytes that arrived', () => {
    const { events, emitter } = setup(0);
    const f = emitter.phase('download').file('x', 0);
    f.add(7);
    f.done();
    expect(events.at(-1)).toMatchObject({ bytesDone: 7, bytesTotal: 7, totalBytesDone: 7, totalBytes: 7 });
  });

  it('keeps phases apart', () => {
    const { events, emitter } = setup(0);
    emitter.phase('cache').file('c', 100).done();
    emitter.phase('upload').file('u', 40).done();
    expect(events.map((e) => [e.phase, e.totalBytes])).toEqual([
      ['cache', 100],
      ['upload', 40],
    ]);
  });
});
