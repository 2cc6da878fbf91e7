/**
 * selfCheck() in Chromium: selfcheck run inside the engine's Worker (its own chunk, loaded on
 * demand), each result streamed to the page through a comlink proxy before the report arrives.
 * Two short checks keep it cheap on SwiftShader: one kernel and one generated model.
 */
import { describe, expect, it } from 'vitest';
import { selfCheck, type SelfCheckResult } from '../index';

describe('selfCheck in the engine worker', () => {
  it('checks a kernel and a generated model on this GPU, streaming each result before the report', async () => {
    const seen: SelfCheckResult[] = [];
    const report = await selfCheck({ only: ['kernel rope', 'engine qwen3'], onResult: (r) => seen.push(r) });
    const a = report.adapter;
    expect([a.vendor, a.architecture, a.description].filter(Boolean).length).toBeGreaterThan(0);
    expect(a.limits.maxStorageBufferBindingSize).toBeGreaterThan(0);
    expect(report.precisions).toContain('f32');
    expect(new Set(report.results.map((r) => `${r.group} ${r.check}`))).toEqual(new Set(['kernel rope', 'model engine']));
    for (const r of report.results) {
      expect(r.maxError, `${r.check} ${r.name}`).toBeLessThanOrEqual(r.tolerance);
      expect(r.pass).toBe(true);
    }
    expect(report.pass).toBe(true);
    expect(seen).toEqual(report.results);
  });

  it('does not pass when nothing was checked', async () => {
    const report = await selfCheck({ precision: 'f32', only: ['no such check'] });
    expect(report.results).toEqual([]);
    expect(report.pass).toBe(false);
  });
});
