/** webgpu-llm/node's selfCheck(): in this process on Dawn (the browser entry's would start a Worker, which Node lacks). */
import { expect, it } from 'vitest';
import { selfCheck, type SelfCheckResult } from '../node';

it('runs selfcheck in this process and reports each result as it comes', async () => {
  const seen: SelfCheckResult[] = [];
  const report = await selfCheck({ precision: 'f32', only: ['kernel rope'], onResult: (r) => seen.push(r) });
  expect(report.results.map((r) => r.name)).toEqual(['neox', 'interleaved']);
  expect(report.results.every((r) => r.maxError <= r.tolerance)).toBe(true);
  expect(report.pass).toBe(true);
  expect(seen).toEqual(report.results);
});
