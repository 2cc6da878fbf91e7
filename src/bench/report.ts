/** The bench report: the JSON document and its plain-text tables. */
import { BATCHING_GOALS, type BatchingResult, type GoalCheck } from './batching';
import type { MaskCostResult } from './mask-cost';
import type { ContextDecodeResult } from './decode';
import type { OpTime } from './profiler';
import type { ModelBenchResult } from './run';
import type { MtpBench, MtpSpeculativeRun, SpeculativeRun } from './speculative';
import type { TargetResult } from './target';

export interface BenchReport {
  date: string;
  preset: string;
  arch: string;
  targets: TargetResult[];
  /** Targets not run, and why (e.g. Chromium's adapter is emulated where Node's is not); absent in older reports. */
  skipped?: Array<{ target: string; reason: string }>;
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
    for (const m of t.models.filter(ok)) {
      if (m.breakdown?.decodeOps) out.push('', ...formatOps(`${t.target} ${m.format}`, m, m.breakdown.decodeOps, m.breakdown.prefillOps ?? null, m.breakdown.prefillTokens));
    }
    for (const m of t.models.filter(ok)) {
      if (m.toolCall) out.push('', ...formatToolCall(`${t.target} ${m.format}`, m.toolCall));
    }
    for (const m of t.models.filter(ok)) {
      if (m.speculative) out.push('', ...formatSpeculative(`${t.target} ${m.format}`, m.speculative, t.emulated));
    }
    for (const m of t.models.filter(ok)) {
      if (m.restart) out.push('', formatRestart(`${t.target} ${m.format}`, m.restart));
    }
    for (const m of t.models.filter(ok)) {
      if (m.contexts) out.push('', ...formatContexts(`${t.target} ${m.format}`, m.contexts));
    }
    for (const m of t.models.filter(ok)) {
      if (m.batching) out.push('', ...formatBatching(`${t.target} ${m.format}`, m.batching, t.emulated));
    }
  }
  for (const sk of report.skipped ?? []) out.push('', `== ${sk.target}: skipped: ${sk.reason}`);
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

/** The forced tool call token by token, with jump-forward and unconstrained. */
export function formatToolCall(title: string, b: NonNullable<ModelBenchResult['toolCall']>): string[] {
  const row = (name: string, r: typeof b.free) => [name, String(r.tokens), String(r.steps), f(r.tokensPerStep, 2), f(r.msPerToken, 1), r.finishReason];
  return [
    `${title}: ${b.constraint}, greedy; tokens/step and ms/token after the first token (the prompt's step)${b.identical ? '' : ' — JUMP-FORWARD CHANGED THE TOKENS'}`,
    table(
      ['run', 'tokens', 'steps', 'tokens/step', 'ms/token', 'finish'],
      [row('token by token', b.tokenByToken), row('jump-forward', b.jumpForward), row('unconstrained', b.free)],
    ),
  ];
}

/** KV persistence's line: TTFT after a restart ÷ cold (goal ≤ 0.2 at 2k tokens on a GPU). */
export function formatRestart(title: string, r: NonNullable<ModelBenchResult['restart']>): string {
  if ('error' in r) return `${title}: KV persistence FAILED ${r.error}`;
  return `${title}: ${r.promptTokens}-token prompt, first token cold ${r.coldMs.toFixed(0)} ms, after a restart ${r.restartMs.toFixed(0)} ms (${r.cachedTokens} tokens from storage): ratio ${r.ratio.toFixed(3)} (goal ≤ 0.2)${r.identical ? '' : ' — THE FIRST TOKEN DIFFERS'}`;
}

/** One stream without speculation and with each proposer; ratios to the first run. */
export function formatSpeculative(title: string, b: NonNullable<ModelBenchResult['speculative']>, emulated: boolean): string[] {
  const row = speculativeRow(b.none);
  return [
    `${title}: speculative decoding, one stream, greedy; after the first token (the prompt's step)${emulated ? EMULATED_NOTE : ''}${b.identical ? '' : CHANGED_NOTE}`,
    table(
      [...SPECULATIVE_COLUMNS, ...(b.draft ? ['draft steps'] : [])],
      [
        row('none', b.none),
        row('prediction = output', b.copy),
        row('prediction, 1/16 edited', b.edited),
        row('n-gram (n 3, k 8)', b.ngram),
        ...(b.draft ? [[...row(`draft = itself (k ${b.draft.draftTokens})`, b.draft), String(b.draft.draftSteps)]] : []),
        ...(b.mtp ? [[...row(`MTP head (k ${b.mtp.k})`, b.mtp), ...(b.draft ? ['-'] : [])]] : []),
      ],
    ),
    ...(b.mtp ? [mtpNote(b.mtp)] : []),
  ];
}

const EMULATED_NOTE = '; emulated GPU: tokens/step only, tok/s is not what a GPU gives';
const CHANGED_NOTE = ' — SPECULATION CHANGED THE TOKENS';
const SPECULATIVE_COLUMNS = ['run', 'tokens', 'steps', 'tokens/step', '× none', 'tok/s', '× none', 'proposed', 'accepted'];

/** A speculative run's row: its figures and their ratios to `none`'s. */
function speculativeRow(none: SpeculativeRun): (name: string, r: SpeculativeRun) => string[] {
  const tps = (r: SpeculativeRun) => 1000 / r.msPerToken;
  return (name, r) => [name, String(r.tokens), String(r.steps), f(r.tokensPerStep, 2), f(r.tokensPerStep / none.tokensPerStep, 2), f(tps(r), 1), f(tps(r) / tps(none), 2), String(r.proposed), String(r.accepted)];
}

/**
 * What the MTP row means: the bench's models are fixtures, whose head has random weights and so
 * guesses almost nothing right (as an untrained head would); the figure is the head's overhead.
 */
function mtpNote(m: MtpSpeculativeRun): string {
  return `   MTP head: ${m.accepted} of ${m.proposed} guesses taken. The fixture's head has random weights, so it guesses almost nothing right, as an untrained head should: acceptance needs a real checkpoint; the figure here is the head's overhead: ${f(m.headMsPerStep, 2)} ms a step (one run, ${m.k} guess${m.k === 1 ? '' : 'es'}), ${f(m.headBytesPerGuess / 2 ** 20, 3)} MiB of weights read per guess (its layer, fc and norms, the model's LM head, an embedding row)`;
}

/** `--hybrid`'s MTP case: Qwen3.5 with its head, without speculation and with the head. */
export function formatMtp(title: string, b: MtpBench, emulated: boolean): string[] {
  const row = speculativeRow(b.none);
  return [
    `${title}: the MTP head, one stream, greedy; after the first token (the prompt's step)${emulated ? EMULATED_NOTE : ''}${b.identical ? '' : CHANGED_NOTE}`,
    table(SPECULATIVE_COLUMNS, [row('none', b.none), row(`MTP head (k ${b.mtp.k})`, b.mtp)]),
    mtpNote(b.mtp),
  ];
}

const pct = (x: number | null) => (x === null ? 'null' : f(x * 100));

function goal(label: string, c: GoalCheck, show: (v: number) => string): string {
  const state = c.met === null ? 'not measured' : c.met ? 'met' : 'not met';
  return `${label}: ${c.value === null ? '-' : show(c.value)} (${state})`;
}

/** The batching part of one model: the streams table, the prefix line, the goals beside the figures. */
export function formatBatching(title: string, b: BatchingResult | { error: string }, emulated: boolean): string[] {
  if ('error' in b) return [`${title}: continuous batching FAILED: ${b.error}`];
  const out = [
    `${title}: continuous batching (context ${b.contextLength}, up to ${b.maxBatch} sequences a step; streams of ${b.streamPromptTokens}-token prompts, ${b.streamTokens} tokens each, greedy)`,
    '   aggregate tok/s = tokens generated after the step that gave the last stream its first token ÷ wall time from then to the last token;',
    '   host ms = step start (submit) to its last queue.submit returning (submit ms: the part inside queue.submit); step ms = window ÷ steps;',
    '   gap = time between steps outside submit; GPU busy = the steps\' pass timestamps ÷ wall time (null without timestamp-query)',
  ];
  if (b.levels.length) {
    out.push(
      '',
      table(
        ['streams', 'agg tok/s', '× 1 stream', 'tokens', 'steps', 'dispatch/step', 'dispatch/token', 'host ms/step', 'submit ms', 'step ms', 'host %', 'gap ms', 'GPU busy %', 'preempted'],
        b.levels.map((l) => [
          String(l.streams),
          f(l.tokensPerSecond, 2),
          l.ratio === null ? '-' : f(l.ratio, 2),
          String(l.tokens),
          String(l.steps),
          f(l.dispatchesPerStep, 1),
          f(l.dispatchesPerToken, 2),
          f(l.hostMsPerStep, 3),
          f(l.submitMsPerStep, 3),
          f(l.stepMs, 2),
          pct(l.hostShare),
          f(l.gapMs, 3),
          pct(l.gpuBusyShare),
          String(l.preemptions),
        ]),
      ),
    );
  }
  const p = b.prefix;
  if (p) {
    out.push(
      '',
      `prefix cache: A = ${p.promptTokens}-token prompt, TTFT ${f(p.ttftAMs, 0)} ms; B = A + ${p.extraTokens} other tokens, TTFT ${f(p.ttftBMs, 1)} ms, ` +
        `${p.cachedTokens} tokens cached; TTFT(B)/TTFT(A) = ${f(p.ratio, 4)}`,
    );
  }
  const g = b.goals;
  out.push(
    '',
    `goals${emulated ? ' (for real GPUs; this adapter is CPU-emulated, so only reported)' : ''}:`,
    `   ${goal(`aggregate at 8 streams ≥ ${BATCHING_GOALS.aggregateRatioAt8}× one stream`, g.aggregateRatioAt8, (v) => `${f(v, 2)}×`)}`,
    `   ${goal(`prefix TTFT ratio ≤ ${BATCHING_GOALS.prefixTtftRatio}`, g.prefixTtftRatio, (v) => f(v, 4))}`,
    `   ${goal(`host ≤ ${BATCHING_GOALS.hostShare * 100}% of a step (worst level)`, g.hostShare, (v) => `${f(v * 100)}%`)}`,
  );
  return out;
}

const pctOrDash = (x: number | null | undefined) => (x === null || x === undefined || !Number.isFinite(x) ? '-' : f(x * 100));

/** Per-op time, bytes, GB/s and share of the (timestamped) copy bandwidth, decode and prefill side by side. */
export function formatOps(title: string, m: ModelBenchResult, decode: readonly OpTime[], prefill: readonly OpTime[] | null, prefillTokens: number): string[] {
  const roles = [...new Set([...decode, ...(prefill ?? [])].map((o) => o.role))];
  const cols = (o: OpTime | undefined) => (o ? [f(o.calls, 0), f(o.ms, 3), f(o.share * 100), f(o.bytes / MiB, 3), f(o.gbPerSecond, 2), pctOrDash(o.copyShare)] : ['', '', '', '', '', '']);
  const header = ['op', 'calls', 'decode ms', '% time', 'MiB', 'GB/s', '% copy'];
  if (prefill) header.push(`prefill(${prefillTokens}) calls`, 'ms', '% time', 'MiB', 'GB/s', '% copy');
  const rows = roles.map((r) => [r, ...cols(decode.find((o) => o.role === r)), ...(prefill ? cols(prefill.find((o) => o.role === r)) : [])]);
  const copy = m.bandwidth.copyTimestampGBps;
  return [
    `${title}: GPU time per step by op (all layers; timestamps, one pass per dispatch); % copy = GB/s ÷ the copy kernel's ${copy ? f(copy, 2) + ' GB/s (timestamps)' : '(not timed)'}`,
    table(header, rows),
  ];
}

/** Decode at each context: greedy and sampled tok/s, step costs, and the profiled step's bytes against the GGUF's. */
export function formatContexts(title: string, c: { results: ContextDecodeResult[]; dropped: number[] } | { error: string }): string[] {
  if ('error' in c) return [`${title}: decode at long contexts FAILED: ${c.error}`];
  const out = [
    `${title}: decode after a long prompt (greedy; sampled = temperature 0.7, top-k 40, top-p 0.9); host ms = recording and submitting a step;`,
    '   dispatch/step: one token a step (one stream); GPU busy = the steps\' pass timestamps ÷ wall time; profiled = one timed pass per dispatch: summed GPU ms, bytes moved, bytes ÷ GGUF tensor bytes, GB/s',
  ];
  if (c.results.length) {
    out.push(
      table(
        ['context', 'greedy tok/s', 'sampled tok/s', 'dispatch/step', 'host ms/step', 'step ms', 'host %', 'GPU busy %', 'GPU ms', 'MiB/token', '× GGUF', 'GB/s', '% copy'],
        c.results.map((r) => [
          String(r.context),
          f(r.greedy?.tokensPerSecond ?? NaN, 2),
          f(r.sampled?.tokensPerSecond ?? NaN, 2),
          f(r.greedy?.dispatchesPerStep ?? NaN, 1),
          f(r.greedy?.hostMsPerStep ?? NaN, 3),
          f(r.greedy?.stepMs ?? NaN, 2),
          pctOrDash(r.greedy?.hostShare),
          pctOrDash(r.greedy?.gpuBusyShare),
          f(r.profile?.gpuMs ?? NaN, 3),
          f((r.profile?.bytes ?? NaN) / MiB, 3),
          f(r.profile?.bytesPerGgufByte ?? NaN, 3),
          f(r.profile?.gbPerSecond ?? NaN, 2),
          pctOrDash(r.profile?.copyShare),
        ]),
      ),
    );
  }
  if (c.dropped.length) out.push(`   not run (longer than the model's context): ${c.dropped.join(', ')}`);
  return out;
}
