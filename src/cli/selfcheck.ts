/**
 * `webgpu-llm selfcheck`: runs selfcheck (../selfcheck/run.ts) on the GPU Node's Dawn finds and prints the
 * table, or with --json the whole report as JSON (the table then goes to stderr). Exit status 1 when
 * any check fails.
 */
import { parseArgs } from 'node:util';
import { acquireGPU } from '../gpu/device';
import { formatAdapter, formatResult, formatSummary, RESULT_HEADER } from '../selfcheck/format';
import { describeAdapterForReport, runSelfCheck, type SelfCheckPrecision } from '../selfcheck/run';
import { UsageError, type CliIO } from './io';

export const SELFCHECK_USAGE = `usage: webgpu-llm selfcheck [--precision auto|f32|f16] [--only TEXT ...] [--json]
  checks that this GPU computes the model correctly: every kernel against its reference, then tiny
  generated models through the engine against the CPU reference, with the kernels the engine picks here
  --precision P   auto (default): f32, and f16 where the GPU has shader-f16; f32 or f16: that one alone
  --only TEXT     only checks whose "group check case" contains TEXT (e.g. "kernel attention", "engine qwen3")
  --json          print the report as JSON on stdout (the table goes to stderr)`;

export async function selfCheckCommand(argv: string[], io: CliIO): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { precision: { type: 'string', default: 'auto' }, only: { type: 'string', multiple: true }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    }));
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
  if (values.help) return io.out(SELFCHECK_USAGE + '\n'), 0;
  const precision = values.precision as SelfCheckPrecision;
  if (!['auto', 'f32', 'f16'].includes(precision)) throw new UsageError(`--precision ${precision}: expected auto, f32 or f16`);
  const table = values.json ? io.err : io.out;
  const { nodeGPU } = await import('../gpu/node-gpu');
  const gpu = await acquireGPU({ gpu: await nodeGPU() });
  try {
    table(formatAdapter({ adapter: describeAdapterForReport(gpu) }) + '\n' + RESULT_HEADER + '\n');
    const report = await runSelfCheck(gpu, { precision, only: values.only, onResult: (r) => table(formatResult(r) + '\n') });
    table(formatSummary(report) + '\n');
    if (values.json) io.out(JSON.stringify(report, (_, v) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v), 2) + '\n');
    return report.pass ? 0 : 1;
  } finally {
    gpu.destroy();
  }
}
