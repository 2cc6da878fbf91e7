/** The bench report: the JSON document and its plain-text tables. */
import type { MaskCostResult } from './mask-cost';
import type { ModelBenchResult } from './run';
import type { TargetResult } from './target';

export interface BenchReport {
  date: string;
  preset: string;
  arch: string;
  targets: TargetResult[];
  /** The grammar mask's CPU cost per token at real vocabulary sizes (src/bench/mask-cost.ts); absent in older reports. */
  maskCost?: MaskCostResult[];
}

const MiB = 1024 * 1024;

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

const f = (x: number, digits = 1) => (Number.isFinite(x) ? x.toFixed(digits) : '-');

function ok(m: TargetResult['models'][number]): m is ModelBenchResult {
  return !('error' in m);
}

export function formatReport(report: BenchReport): string {
  const what = report.targets.length ? `${report.arch} ${report.preset} preset` : 'CPU only';
  const out: string[] = [`webgpu-llm bench — ${what} — ${report.date}`];
  for (const t of report.targets) {
    const a = t.adapter;
    out.push('', `== ${t.target}: ${a.vendor} ${a.architecture} (${a.description})${t.emulated ? ', CPU-emulated' : ''}, shader-f16 ${a.f16 ? 'yes' : 'no'}, timestamps ${a.timestamps ? 'yes' : 'no'}`);
    for (const n of t.notes) out.push(`   note: ${n}`);
    const lengths = t.settings.promptLengths;
    const header = [
      'format',
      'load ms',
      ...lengths.map((n) => `prefill@${n} tok/s`),
      ...lengths.map((n) => `TTFT@${n} ms`),
      'decode tok/s',
      'JSON tok/s',
      'mask ms/token',
      'peak MiB',
      'MiB/token',
      'decode GB/s',
      'copy GB/s',
      'ratio',
    ];
    const rows = t.models.map((m) =>
      ok(m)
        ? [
            m.format,
            f(m.loadMs, 0),
            ...lengths.map((n) => f(m.prefill.find((p) => p.promptTokens === n)?.tokensPerSecond ?? NaN)),
            ...lengths.map((n) => f(m.prefill.find((p) => p.promptTokens === n)?.ttftMs ?? NaN, 0)),
            f(m.decode.tokensPerSecond, 2),
            f(m.structured.tokensPerSecond, 2),
            f(m.structured.maskMsPerToken, 2),
            f(m.memory.peakBytes / MiB),
            f(m.bandwidth.bytesPerToken / MiB, 2),
            f(m.bandwidth.decodeGBps, 3),
            f(m.bandwidth.copyGBps, 3),
            f(m.bandwidth.ratio, 3),
          ]
        : [m.format, `FAILED: ${m.error}`],
    );
    out.push('', table(header, rows));
    for (const m of t.models.filter(ok)) {
      if (!m.breakdown) continue;
      const d = m.breakdown.decode;
      const p = m.breakdown.prefill ?? [];
      const kernels = [...new Set([...d, ...p].map((k) => k.kernel))];
      const at = (list: typeof d, k: string) => list.find((x) => x.kernel === k);
      const rowsK = kernels.map((k) => {
        const dk = at(d, k);
        const pk = at(p, k);
        const row = [k, dk ? f(dk.calls, 0) : '', dk ? f(dk.ms, 3) : '', dk ? f(dk.share * 100) : ''];
        return m.breakdown!.prefill ? [...row, pk ? f(pk.ms, 3) : '', pk ? f(pk.share * 100) : ''] : row;
      });
      out.push(
        '',
        `${t.target} ${m.format}: GPU time per step by kernel (timestamp queries, one pass per dispatch)`,
        table(['kernel', 'calls', 'decode ms', 'decode %', ...(m.breakdown.prefill ? [`prefill(${m.breakdown.prefillTokens}) ms`, 'prefill %'] : [])], rowsK),
      );
    }
  }
  if (report.maskCost?.length) {
    const m = report.maskCost;
    out.push(
      '',
      '== CPU: grammar mask per token (xgrammar wasm, synthetic byte-level vocabulary, no GPU)',
      `   ${m[0]!.constraint}, matched token by token`,
      '',
      table(
        ['vocab', 'tokens', 'compile ms', 'mask ms/token', 'p50 ms', 'p95 ms', 'max ms'],
        m.map((r) => [String(r.vocab), String(r.tokens), f(r.compileMs, 0), f(r.meanMs, 3), f(r.p50Ms, 3), f(r.p95Ms, 3), f(r.maxMs, 2)]),
      ),
    );
  }
  return out.join('\n');
}
