import { describe, expect, it } from 'vitest';
import { checkGoals, decodeWindow, levelFigures, prefixLength, withRatios, type Arrival, type StepRecord, type StreamLevelResult } from './batching';
import { formatBatching } from './report';

/** Arrivals of a stream: one token per listed step, each at step × 10 ms (+ jitter µs). */
const stream = (steps: number[], jitter = 0): Arrival[] => steps.map((step) => ({ step, at: step * 10 + jitter }));

/** Steps 1..n, each 10 ms apart, starting 0.2 ms after the previous step's tokens. */
function records(n: number, perStep: (step: number) => Partial<StepRecord> = () => ({})): StepRecord[] {
  return Array.from({ length: n }, (_, i) => {
    const step = i + 1;
    const start = (step - 1) * 10 + 0.2;
    return { step, start, submitted: start + 0.3, submitMs: 0.1, end: step * 10 - 0.1, dispatches: 70, gpuNs: 8e6, ...perStep(step) };
  });
}

describe('the decode window of streams started together', () => {
  it('starts at the step that gave the last stream its first token and counts only later tokens', () => {
    // Stream A was admitted at step 1 and decodes during B's prefill (steps 2, 3); B's first token is at step 3.
    const a = stream([1, 2, 3, 4, 5]);
    const b = stream([3, 4, 5], 0.05); // B's tokens reach their consumer 50 µs after A's of the same step
    const w = decodeWindow([a, b])!;
    expect(w).toEqual({ fromStep: 3, toStep: 5, startMs: 30.05, endMs: 50.05, tokens: 4 });
  });

  it('is null when no token comes after that step, or a stream produced nothing', () => {
    expect(decodeWindow([stream([1]), stream([1])])).toBeNull();
    expect(decodeWindow([stream([1, 2]), []])).toBeNull();
    expect(decodeWindow([])).toBeNull();
  });
});

describe('a level’s figures', () => {
  it('divides tokens by the window, dispatches by steps and tokens, and host time by the step', () => {
    // 4 streams, all first tokens at step 2, then steps 3..6: 16 tokens in 40 ms.
    const streams = [0, 1, 2, 3].map((i) => stream([2, 3, 4, 5, 6], i * 0.01));
    const l = levelFigures(streams, records(6), 1)!;
    expect(l.tokens).toBe(16);
    expect(l.steps).toBe(4);
    expect(l.windowMs).toBeCloseTo(40, 9);
    expect(l.tokensPerSecond).toBeCloseTo(400, 6);
    expect(l.dispatchesPerStep).toBe(70);
    expect(l.dispatchesPerToken).toBeCloseTo(70 / 4, 9);
    expect(l.hostMsPerStep).toBeCloseTo(0.3, 9);
    expect(l.submitMsPerStep).toBeCloseTo(0.1, 9);
    expect(l.stepMs).toBeCloseTo(10, 9);
    expect(l.hostShare).toBeCloseTo(0.03, 9);
    expect(l.gapMs).toBeCloseTo(10 - 9.7, 9); // submit took 9.7 ms of each 10
    expect(l.gpuBusyShare).toBeCloseTo(32 / 40, 9);
    expect(l.preemptions).toBe(1);
    expect(l.ratio).toBeNull();
  });

  it('reports no GPU share unless every step of the window was timed', () => {
    const streams = [stream([1, 2, 3])];
    expect(levelFigures(streams, records(3, (s) => (s === 3 ? { gpuNs: null } : {})))!.gpuBusyShare).toBeNull();
    expect(levelFigures(streams, records(3, () => ({ gpuNs: 0 })))!.gpuBusyShare).toBeNull();
    // Step 1 (the prompt's) is outside the window: its missing time does not matter.
    expect(levelFigures(streams, records(3, (s) => (s === 1 ? { gpuNs: null } : {})))!.gpuBusyShare).toBeCloseTo(16 / 20, 9);
  });

  it('gives each level its ratio to the one-stream level', () => {
    const level = (streams: number, tokensPerSecond: number) => ({ streams, tokensPerSecond, ratio: null }) as StreamLevelResult;
    expect(withRatios([level(1, 20), level(8, 130)]).map((l) => l.ratio)).toEqual([1, 6.5]);
    expect(withRatios([level(2, 20)])[0]!.ratio).toBeNull();
  });
});

describe('the repeated prefix', () => {
  it('clamps to the context less the extra tokens and one generated, in whole pages', () => {
    expect(prefixLength(2048, 4096, 16)).toBe(2048);
    expect(prefixLength(2048, 2048, 16)).toBe(2032); // 2048 − 8 − 1 = 2039 → 2032
    expect(prefixLength(2048, 2065, 16)).toBe(2048);
    expect(prefixLength(10, 2048, 16)).toBe(10); // under a page: as asked
    expect(prefixLength(0, 2048, 16)).toBe(0);
  });
});

describe('the goals', () => {
  const level = (streams: number, ratio: number | null, hostShare: number) => ({ streams, ratio, hostShare }) as StreamLevelResult;
  const prefix = (ratio: number) => ({ promptTokens: 2048, extraTokens: 8, ttftAMs: 1000, ttftBMs: 1000 * ratio, ratio, cachedTokens: 2048 });

  it('checks 8 streams against 6×, the prefix against 0.1 and the worst host share against 5%', () => {
    const g = checkGoals([level(1, 1, 0.01), level(8, 6.2, 0.04)], prefix(0.05));
    expect(g.aggregateRatioAt8).toEqual({ goal: 6, value: 6.2, met: true });
    expect(g.prefixTtftRatio).toEqual({ goal: 0.1, value: 0.05, met: true });
    expect(g.hostShare).toEqual({ goal: 0.05, value: 0.04, met: true });
    const bad = checkGoals([level(1, 1, 0.01), level(8, 3, 0.02), level(16, 4, 0.09)], prefix(0.4));
    expect([bad.aggregateRatioAt8.met, bad.prefixTtftRatio.met, bad.hostShare.met]).toEqual([false, false, false]);
    expect(bad.hostShare.value).toBe(0.09);
  });

  it('leaves a goal unjudged when its figure was not measured', () => {
    const g = checkGoals([level(2, null, 0.01)], null);
    expect(g.aggregateRatioAt8).toEqual({ goal: 6, value: null, met: null });
    expect(g.prefixTtftRatio.met).toBeNull();
    expect(checkGoals([], null).hostShare).toEqual({ goal: 0.05, value: null, met: null });
  });

  it('prints the levels, the prefix and the goals beside them', () => {
    const levels = withRatios([
      levelFigures([stream([1, 2, 3])], records(3))!,
      levelFigures([0, 1, 2, 3, 4, 5, 6, 7].map((i) => stream([2, 3, 4], i * 0.01)), records(4, (s) => ({ gpuNs: s === 4 ? null : 8e6 })))!,
    ]);
    const p = prefix(0.04);
    const text = formatBatching('node Q4_0', { contextLength: 2048, maxBatch: 8, pageSize: 16, streamPromptTokens: 16, streamTokens: 3, levels, prefix: p, goals: checkGoals(levels, p) }, true).join('\n');
    expect(text).toMatch(/streams +agg tok\/s +× 1 stream .*GPU busy % +preempted/);
    expect(text).toMatch(/^1 +100\.00 +1\.00 +2 +2 +70\.0 +70\.00 +0\.300 +0\.100 +10\.00 +3\.0 +0\.300 +80\.0 +0$/m);
    expect(text).toMatch(/^8 +800\.00 +8\.00 +16 +2 +70\.0 +8\.75 .* null +0$/m);
    expect(text).toMatch(/host ms\/step +submit ms +step ms/);
    expect(text).toContain('TTFT(B)/TTFT(A) = 0.0400');
    expect(text).toContain('2048 tokens cached');
    expect(text).toMatch(/for real GPUs/);
    expect(text).toMatch(/aggregate at 8 streams ≥ 6× one stream: 8\.00× \(met\)/);
    expect(text).toMatch(/prefix TTFT ratio ≤ 0\.1: 0\.0400 \(met\)/);
    expect(text).toMatch(/host ≤ 5% of a step \(worst level\): 3\.0% \(met\)/);
    expect(formatBatching('node F16', { error: 'Error: boom' }, false)).toEqual(['node F16: continuous batching FAILED: Error: boom']);
  });
});
