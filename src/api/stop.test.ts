import { describe, expect, it } from 'vitest';
import { StopMatcher } from './stop';

/** Feeds pieces; returns what was released and the hit. */
function run(m: StopMatcher, pieces: string[]) {
  let out = '';
  const released: string[] = [];
  for (const p of pieces) {
    const r = m.push(p);
    released.push(r.text);
    out += r.text;
    if (r.hit) return { out, released, hit: r.hit.matched };
  }
  const r = m.push('', true);
  return { out: out + r.text, released: [...released, r.text], hit: r.hit?.matched };
}

describe('StopMatcher', () => {
  it('holds back a possible stop prefix and never releases any part of the stop', () => {
    const r = run(new StopMatcher(['STOP']), ['abc S', 'T', 'OP tail']);
    expect(r).toMatchObject({ out: 'abc ', hit: 'STOP' });
    for (const t of r.released) expect(t).not.toMatch(/S|T|O|P/);
  });

  it('releases held text when the stop does not follow, and at the end', () => {
    expect(run(new StopMatcher(['STOP']), ['ST', 'ART ST'])).toMatchObject({ out: 'START ST', hit: undefined });
  });

  it('picks the earliest of several stops and keeps it with no_stop_trim', () => {
    expect(run(new StopMatcher(['cd', 'b'], [], true), ['abcd'])).toMatchObject({ out: 'ab', hit: 'b' });
  });

  it('stops at a regex match, trimming what was not yet released', () => {
    expect(run(new StopMatcher([], ['\\d+\\.']), ['pi is 3.14'])).toMatchObject({ out: 'pi is ', hit: '\\d+\\.' });
    // A regex cannot be held back for: text released before the match completes stays released.
    expect(run(new StopMatcher([], ['\\d+\\.']), ['pi is 3', '.14'])).toMatchObject({ out: 'pi is 3', hit: '\\d+\\.' });
  });
});
