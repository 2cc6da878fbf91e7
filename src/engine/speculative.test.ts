/**
 * Speculative decoding on the GPU engine (issue #32): a sequence's proposals are rows of their own
 * in its step, sharing its slot (the attention of each reads the K/V the rows before it wrote that
 * step), each row drawn by the GPU sampler. The output must be the one decoding without
 * speculation gives, token for token, logprobs included; on a dense and a mixture-of-experts
 * fixture. The scheduler's tests (scheduler.test.ts) cover rollback, max_tokens, stop ids and
 * aborts inside a run on the CPU; the CPU reference's verify is checked here too, and the engine's
 * counters that /metrics reports.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { ReferenceBackend } from '../reference/backend';
import type OpenAI from 'openai';
import { appFor, clientFor, loadRig, type Rig } from '../testing/api-rig';
import { SCHEMAS } from '../testing/schemas';
import type { Backend } from './types';
import { ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { drainGeneration, greedyRequest } from '../testing/sampling';
import { GpuEngine, VERIFY_ROWS } from './engine';
import type { GenerateRequest, GeneratedToken, SamplingParams } from './types';

let rig: Rig;
let dense: GpuEngine;
let moe: GpuEngine;

beforeAll(async () => {
  rig = await loadRig();
  const gpu = await testGPU();
  dense = await GpuEngine.load(rig.qwen.opened, { gpu, id: 'qwen3-tiny', contextLength: 256 });
  const paths = await ensureFixture({ arch: 'qwen3moe', preset: 'tiny' }, { hf: [], gguf: ['Q8_0'] });
  moe = await GpuEngine.load(await openModel(paths.gguf.Q8_0!), { gpu, contextLength: 256 });
});
afterAll(async () => {
  await dense?.dispose();
  await moe?.dispose();
  await rig?.close();
});

const PROMPT = [5, 17, 42, 8, 99, 23, 17, 42];

/** One generation, its tokens' logprobs and the steps it took. */
async function run(engine: GpuEngine, maxTokens: number, speculation?: GenerateRequest['speculation'], sampling: Partial<SamplingParams> = {}) {
  const before = engine.kvStats.steps;
  const gen = engine.generate(greedyRequest(PROMPT, maxTokens, sampling, speculation ? { speculation } : {}));
  const tokens: GeneratedToken[] = [];
  for (;;) {
    const r = await gen.next();
    if (r.done) return { ids: tokens.map((t) => t.id), logprobs: tokens.map((t) => t.logprob), result: r.value, steps: engine.kvStats.steps - before };
    tokens.push(r.value);
  }
}

describe('speculative decoding on the GPU engine', () => {
  it.each([
    ['dense qwen3 (F32)', () => dense],
    ['qwen3moe (Q8_0)', () => moe],
  ])('%s: a prediction of its own greedy output takes it in 1 step, a wrong one changes nothing, logprobs as without', async (_, engine) => {
    const e = engine();
    const start = e.kvStats;
    const off = await run(e, 12, undefined, { logprobs: true, topLogprobs: 2 });
    const used = e.kvStats.pages.used;
    const own = await run(e, 12, { prediction: off.ids }, { logprobs: true, topLogprobs: 2 });
    expect(own.ids).toEqual(off.ids);
    // The prompt's step verifies 11 proposals with its draw and draws the 12th.
    expect(own.steps).toBe(1);
    expect(off.steps).toBe(12);
    expect(own.result.speculation).toEqual({ proposed: 11, accepted: 11 });
    // The verify rows' logprobs (read back by row) are those of one-token steps.
    own.logprobs.forEach((lp, i) => expect(lp).toBeCloseTo(off.logprobs[i]!, 3));
    // Its own output backwards: proposals re-aligned on each token drawn, mostly wrong.
    const unrelated = await run(e, 12, { prediction: [...off.ids].reverse() });
    expect(unrelated.ids).toEqual(off.ids);
    expect(unrelated.result.speculation!.proposed).toBeGreaterThan(unrelated.result.speculation!.accepted);
    // Every rejected row's page went back: nothing is held once the requests ended.
    const end = e.kvStats;
    expect(end.pages.used).toBe(used);
    // The engine's counters (/metrics): requests, tokens, speculation.
    expect(end.requests - start.requests).toBe(3);
    expect(end.promptTokens - start.promptTokens).toBe(3 * PROMPT.length);
    expect(end.generationTokens - start.generationTokens).toBe(36);
    expect(end.speculative.proposed - start.speculative.proposed).toBe(11 + unrelated.result.speculation!.proposed);
    expect(end.speculative.accepted - start.speculative.accepted).toBe(11 + unrelated.result.speculation!.accepted);
  });

  it('gives the same seeded draws with n-gram lookup and with a prediction of them', async () => {
    const sampling = { temperature: 1, seed: 7, topK: 40 };
    const off = await run(dense, 12, undefined, sampling);
    const own = await run(dense, 12, { prediction: off.ids }, sampling);
    expect(own.ids).toEqual(off.ids);
    expect(own.result.speculation).toEqual({ proposed: 11, accepted: 11 });
    const ngram = await run(dense, 12, { ngram: { n: 2, k: 4 } }, sampling);
    expect(ngram.ids).toEqual(off.ids);
  });

  it('speculates at maxBatch 1: its one sequence verifies on the reserve rows (VERIFY_ROWS) beyond the batch', async () => {
    const lone = await GpuEngine.load(rig.qwen.opened, { gpu: await testGPU(), id: 'qwen3-tiny', contextLength: 256, maxBatch: 1 });
    try {
      expect(lone.limits.maxSeqs).toBe(1);
      const off = await run(lone, 12);
      const own = await run(lone, 12, { prediction: off.ids });
      expect(own.ids).toEqual(off.ids);
      expect(off.ids).toEqual((await run(dense, 12)).ids);
      // The prompt's step verifies VERIFY_ROWS (8) proposals, the next the 2 that max_tokens leaves room for.
      expect(off.steps).toBe(12);
      expect(own.steps).toBe(2);
      expect(own.result.speculation).toEqual({ proposed: VERIFY_ROWS + 2, accepted: VERIFY_ROWS + 2 });
    } finally {
      await lone.dispose();
    }
  });
});

describe('speculation under a grammar', () => {
  /** A greedy json_schema chat on `backend`, its usage and the GPU steps it took. */
  async function chat(backend: Backend, prediction?: string) {
    const { schema } = SCHEMAS.find((x) => x.name === 'nested_objects')!;
    const body = {
      model: backend.id, messages: [{ role: 'user', content: 'JSON please' }], max_tokens: 40, temperature: 0, chat_template_kwargs: { enable_thinking: false },
      response_format: { type: 'json_schema', json_schema: { name: 'n', schema } }, ...(prediction !== undefined ? { prediction: { type: 'content', content: prediction } } : {}),
    };
    const before = dense.kvStats.steps;
    const r = await clientFor(appFor([backend])).chat.completions.create(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    return { text: r.choices[0]!.message.content ?? '', details: r.usage!.completion_tokens_details, tokens: r.usage!.completion_tokens, steps: dense.kvStats.steps - before };
  }

  it.each([
    ['the GPU engine', () => dense as Backend],
    ['the CPU reference', () => rig.qwen.backend as Backend],
  ])('%s: json_schema output unchanged by a prediction of it (taken in few steps) and by one the grammar refuses', async (_, backend) => {
    const b = backend();
    const off = await chat(b);
    const own = await chat(b, off.text);
    expect(own.text).toBe(off.text);
    expect(own.details?.accepted_prediction_tokens).toBeGreaterThan(0);
    // Text the schema's object cannot start with: every proposal ends at the grammar, none is verified.
    const refused = await chat(b, 'Sure! Here is some JSON for you.');
    expect(refused.text).toBe(off.text);
    if (b === dense) {
      expect(own.steps).toBeLessThan(off.steps);
      expect(refused.steps).toBe(off.steps);
    }
  });
});

describe('a draft model', () => {
  it('the same model in Q8_0 drafting for F32: the greedy output unchanged, several tokens per step, its steps counted apart', async () => {
    const paths = await ensureFixture({ arch: 'qwen3', preset: 'tiny' }, { hf: [], gguf: ['Q8_0'] });
    const target = await GpuEngine.load(rig.qwen.opened, { gpu: await testGPU(), contextLength: 256, draft: { model: paths.gguf.Q8_0!, tokens: 4 } });
    try {
      const off = await run(dense, 16);
      const drafted = await run(target, 16);
      expect(drafted.ids).toEqual(off.ids);
      const { proposed, accepted } = drafted.result.speculation!;
      expect(accepted).toBeGreaterThan(0);
      expect(drafted.steps).toBe(16 - accepted);
      // Measured: 11 of 12 guesses taken, 16 tokens in 5 steps (a Q4_0 draft of this random model: 5 of 32, 11 steps).
      expect(drafted.steps).toBeLessThanOrEqual(8);
      // The draft's own steps: at least one per step that verified a guess.
      const stats = target.kvStats;
      expect(stats.draftSteps).toBeGreaterThanOrEqual(Math.ceil(proposed / 4));
      expect(stats.speculative).toEqual({ proposed, accepted });
      // The draft kept its KV from round to round: the first fed the prompt and the target's first
      // draw, each next one at most the last guess and the target's draw (a new request per guess,
      // as before, fed the prompt and the output so far again each time: 9, 12, 16 tokens).
      const draft = target.draftModel!;
      // Its GPU side is a draft's only: the same batch and context as the model's, but no penalties op and no logits, hidden-state or routed-expert readback (no snapshot pool either: dense); the engine counts it in.
      expect(draft.memoryUse.other).toBeLessThan(dense.memoryUse.other);
      expect(target.memoryUse.weights).toBe(dense.memoryUse.weights + draft.memoryUse.weights);
      expect(target.memoryUse.kvCache).toBe(dense.memoryUse.kvCache + draft.memoryUse.kvCache);
      const { rounds, caughtUp, steps } = draft.counters;
      expect(caughtUp).toBeLessThanOrEqual(PROMPT.length + 1 + 2 * (rounds - 1));
      expect(draft.pages.used).toBe(0);

      // Two requests at once: one draft round per target step for both, batched (measured with 16
      // tokens each: 3 rounds and 12 draft steps as for one alone; 6 and 24 when each drafted in rounds of its own).
      const pair = await Promise.all([run(target, 8), run(target, 8)]);
      for (const p of pair) expect(p.ids).toEqual(off.ids.slice(0, 8));
      expect(draft.counters.rounds - rounds).toBeLessThanOrEqual(rounds);
      expect(draft.counters.steps - steps).toBeLessThanOrEqual(steps);
      expect(draft.pages.used).toBe(0);

      // Rollback is exact: a session whose guess went another way drafts what a new one drafts, feeding only the tokens after the prompt.
      const [a, b] = [draft.open(), draft.open()];
      const wrong = [(off.ids[0]! + 1) % 100, off.ids[0]!];
      await a.draft([...PROMPT, ...wrong], 4);
      const before = draft.counters.caughtUp;
      const rolled = await a.draft([...PROMPT, ...off.ids.slice(0, 3)], 4);
      expect(draft.counters.caughtUp - before).toBe(3);
      expect(rolled).toEqual(await b.draft([...PROMPT, ...off.ids.slice(0, 3)], 4));
      a.close();
      b.close();
      expect(draft.pages.used).toBe(0);

      // An abort as a draft round runs: both page pools as before.
      const abort = new AbortController();
      const gen = target.generate(greedyRequest(PROMPT, 16, {}, { signal: abort.signal }));
      await gen.next();
      abort.abort();
      const end = await drainGeneration(gen);
      expect(end.result.finishReason).toBe('abort');
      expect(target.kvStats.pages.used).toBe(0);
      expect(draft.pages.used).toBe(0);
      // A failed step of the model's (the sequence fails) or of the draft's (no guess that round): both page pools as before at once.
      const failOnce = (runner: { submit(items: never[]): Promise<unknown> }) => {
        const submit = runner.submit.bind(runner);
        let calls = 0;
        runner.submit = (items) => (calls++ === 1 ? Promise.reject(new Error('step failed')) : submit(items));
        return () => void (runner.submit = submit);
      };
      let restore = failOnce(target.runner);
      await expect(run(target, 8)).rejects.toThrow('step failed');
      restore();
      expect(target.kvStats.pages.used).toBe(0);
      expect(draft.pages.used).toBe(0);
      restore = failOnce(draft.backend.stepper.runner);
      expect((await run(target, 8)).ids).toEqual(off.ids.slice(0, 8));
      restore();
      expect(draft.pages.used).toBe(0);

      // A request's own speculation wins over the draft: a prediction of the output, one step.
      const own = await run(target, 16, { prediction: off.ids });
      expect(own.ids).toEqual(off.ids);
      expect(own.steps).toBe(1);
      expect(target.kvStats.pages.used).toBe(0);
    } finally {
      await target.dispose();
    }
  });

  it("is refused, before anything loads, when its vocabulary is not the model's", async () => {
    await expect(GpuEngine.load(rig.qwen.opened, { gpu: await testGPU(), draft: { model: rig.llama.opened } })).rejects.toThrow(/draft model.*must share the model's tokenizer/);
  });
});

describe('speculative decoding on the CPU reference', () => {
  it('verifies one position at a time: the same greedy and seeded output, its own prediction all accepted', async () => {
    const ref: ReferenceBackend = rig.qwen.backend as ReferenceBackend;
    for (const sampling of [{}, { temperature: 1, seed: 3 }]) {
      const off = await drainGeneration(ref.generate(greedyRequest(PROMPT, 12, sampling)));
      const own = await drainGeneration(ref.generate(greedyRequest(PROMPT, 12, sampling, { speculation: { prediction: off.ids } })));
      expect(own.ids).toEqual(off.ids);
      expect(own.result.speculation).toEqual({ proposed: 11, accepted: 11 });
      const ngram = await drainGeneration(ref.generate(greedyRequest(PROMPT, 12, sampling, { speculation: { ngram: { n: 2, k: 3 } } })));
      expect(ngram.ids).toEqual(off.ids);
    }
  });
});
