/** selfcheck's report as text: the adapter, then one table row per check. */
import type { SelfCheckReport, SelfCheckResult } from './run';

/** An error or tolerance as the table shows it (NaN, 0 and infinities spelt out). */
export const num = (v: number) => (Number.isNaN(v) ? 'NaN' : v === 0 ? '0' : !Number.isFinite(v) ? String(v) : v.toExponential(2));

export function formatAdapter(r: Pick<SelfCheckReport, 'adapter'>): string {
  const a = r.adapter;
  const name = [a.vendor, a.architecture, a.description].filter(Boolean).join(' / ') || 'unknown adapter';
  const caps = [a.f16 && 'shader-f16', a.subgroups && `subgroups ${a.subgroupMinSize}–${a.subgroupMaxSize}`, a.integerDot && 'integer dot', a.timestamps && 'timestamps', a.isFallbackAdapter && 'fallback (CPU)'].filter(Boolean);
  return `adapter: ${name}${caps.length ? ` (${caps.join(', ')})` : ''}`;
}

export const RESULT_HEADER = `${'check'.padEnd(20)} ${'case'.padEnd(28)} ${'prec'.padEnd(4)} ${'max error'.padStart(10)} ${'tolerance'.padStart(10)}  result`;

export function formatResult(r: SelfCheckResult): string {
  const check = r.group === 'model' ? 'engine' : r.check;
  return `${check.padEnd(20)} ${r.name.padEnd(28)} ${r.precision.padEnd(4)} ${num(r.maxError).padStart(10)} ${num(r.tolerance).padStart(10)} ${r.ms.toFixed(0).padStart(7)}  ${r.pass ? 'pass' : 'FAIL'}${r.problem ? `  ${r.problem}` : ''}`;
}

export function formatSummary(r: SelfCheckReport): string {
  const failed = r.results.filter((x) => !x.pass).length;
  const missing = r.unavailable.length ? `; asked for ${r.unavailable.join(', ')}, which this adapter cannot run` : '';
  return `${r.pass ? 'PASS' : 'FAIL'}: ${r.results.length - failed} of ${r.results.length} checks passed in ${r.seconds.toFixed(1)} s (${r.precisions.join(', ')})${missing}`;
}

export function formatReport(r: SelfCheckReport): string {
  return [formatAdapter(r), RESULT_HEADER, ...r.results.map(formatResult), formatSummary(r)].join('\n');
}
