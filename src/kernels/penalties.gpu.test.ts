import { describe, expect, it } from 'vitest';
import { createBuffer, readBuffer, STORAGE, uploadBuffer, writeBuffer } from '../gpu/buffers';
import { testGPU } from '../testing/gpu';
import { createPenaltiesOp, PENALTIES_WG, penaltiesRef, type PenaltiesOp, type PenaltySettings } from './penalties';
import { opContext, random, runPass } from '../testing/kernel-helpers';

/** Not a multiple of 32 (the bitset's last word is partial) nor of any workgroup size. */
const V = 1000;
/**
 * f32 on the GPU against f64-then-rounded on the CPU: a few ulps. |got − want| / max(1, |want|):
 * relative for large logits, absolute near zero where a penalty cancels most of a logit.
 */
const TOLERANCE = 1e-6;

const OFF: PenaltySettings = { logitBias: {}, repetitionPenalty: 1, frequencyPenalty: 0, presencePenalty: 0 };

/** One sequence slot's request: settings, banned ids, prompt and the ids "sampled" step by step. */
interface SeqCase {
  p: PenaltySettings;
  banned?: number[];
  prompt: number[];
  generated: number[];
}

/** `n` ids drawn from 0..range-1 (a small range makes repeats, and overlap with the prompt). */
function ids(n: number, seed: number, range: number): number[] {
  return Array.from(random(n, seed), (v) => Math.min(range - 1, Math.floor(((v + 1) / 2) * range)));
}

function randomBias(seed: number): Record<number, number> {
  const bias: Record<number, number> = {};
  const at = ids(12, seed, V);
  const values = random(12, seed + 1, 20);
  at.forEach((id, i) => (bias[id] = values[i]!));
  bias[V + 5] = 3; // outside the vocabulary: ignored
  bias[-1] = 3;
  return bias;
}

function worstDiff(got: Float32Array, want: Float32Array): number {
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    if (!Number.isFinite(want[i]!)) {
      if (got[i] !== want[i]) return Infinity;
      continue;
    }
    const d = Math.abs(got[i]! - want[i]!) / Math.max(1, Math.abs(want[i]!));
    if (!(d <= worst)) worst = d;
  }
  return worst;
}

async function setup(wg: number, maxSeqs: number) {
  const { device } = await testGPU();
  const logits = createBuffer(device, maxSeqs * V * 4, STORAGE);
  const lastToken = createBuffer(device, maxSeqs * 4, STORAGE);
  const op = await createPenaltiesOp(opContext(device, 'f32'), { logits, lastToken, vocab: V, maxSeqs, wg });
  return { device, logits, lastToken, op };
}

/**
 * Runs a request per slot for `generated.length + 1` steps the way the engine does: reset once,
 * then each step new logits, the previous step's token in `lastToken` (what the sampler leaves
 * there), one dispatch. Every step's output must equal the CPU chain over the history so far.
 */
async function runRequests(env: Awaited<ReturnType<typeof setup>>, cases: SeqCase[], seed: number): Promise<void> {
  const { device, logits, lastToken, op } = env;
  const S = cases.length;
  cases.forEach((c, s) => op.reset(s, c.p, c.prompt, c.banned ?? []));
  const steps = cases[0]!.generated.length + 1;
  for (let k = 0; k < steps; k++) {
    const raw = cases.map((_, s) => random(V, seed * 100 + k * 10 + s, 5));
    raw.forEach((row, s) => writeBuffer(device, logits, s * V * 4, row));
    if (k > 0) device.queue.writeBuffer(lastToken, 0, new Uint32Array(cases.map((c) => c.generated[k - 1]!)));
    await runPass(device, (pass) => op.encode(pass, S));
    const got = new Float32Array(await readBuffer(device, logits, S * V * 4));
    cases.forEach((c, s) => {
      const want = penaltiesRef(raw[s]!, c.p, c.banned ?? [], c.prompt, c.generated.slice(0, k));
      expect(worstDiff(got.subarray(s * V, (s + 1) * V), want), `slot ${s}, step ${k}`).toBeLessThan(TOLERANCE);
    });
  }
}

async function expectCounts(op: PenaltiesOp, cases: SeqCase[]): Promise<void> {
  const { device } = await testGPU();
  const counts = new Uint32Array(await readBuffer(device, op.counts, cases.length * V * 4));
  cases.forEach((c, s) => {
    const want = new Uint32Array(V);
    for (const id of c.generated) want[id]!++;
    expect(Array.from(counts.subarray(s * V, (s + 1) * V)), `slot ${s}`).toEqual(Array.from(want));
  });
}

const prompt = ids(40, 11, 60);
const generated = ids(8, 12, 80); // repeats, some ids also in the prompt

const FEATURES: Array<[string, SeqCase]> = [
  ['logit_bias', { p: { ...OFF, logitBias: randomBias(3) }, prompt, generated }],
  ['the min_tokens ban', { p: OFF, banned: [0, 17, V - 1], prompt, generated }],
  ['repetition penalty 1.3', { p: { ...OFF, repetitionPenalty: 1.3 }, prompt, generated }],
  ['repetition penalty 0.8', { p: { ...OFF, repetitionPenalty: 0.8 }, prompt, generated }],
  ['frequency penalty', { p: { ...OFF, frequencyPenalty: 0.7 }, prompt, generated }],
  ['presence penalty', { p: { ...OFF, presencePenalty: -0.4 }, prompt, generated }],
  [
    'every processor together',
    { p: { logitBias: randomBias(5), repetitionPenalty: 1.3, frequencyPenalty: 0.5, presencePenalty: 0.5 }, banned: [2, 50], prompt, generated },
  ],
];

describe('penalties kernel', () => {
  for (const wg of PENALTIES_WG) {
    it(`matches the CPU chain for each processor alone and all together, step by step, at WG=${wg}`, async () => {
      const env = await setup(wg, 1);
      for (const [name, c] of FEATURES) {
        await runRequests(env, [c], name.length).catch((e: Error) => {
          throw new Error(`${name}: ${e.message}`);
        });
        const counted = c.p.repetitionPenalty !== 1 || c.p.frequencyPenalty !== 0 || c.p.presencePenalty !== 0;
        if (counted) await expectCounts(env.op, [c]);
      }
      env.op.destroy();
    });
  }

  it('keeps two sequences apart: different settings, prompts and histories in one dispatch', async () => {
    const env = await setup(64, 2);
    const cases: SeqCase[] = [
      { p: { logitBias: randomBias(7), repetitionPenalty: 1.2, frequencyPenalty: 0.3, presencePenalty: 0.6 }, banned: [9], prompt, generated },
      { p: { ...OFF, repetitionPenalty: 1.5, presencePenalty: 1 }, prompt: ids(25, 21, 40), generated: ids(8, 22, 50) },
    ];
    await runRequests(env, cases, 1);
    await expectCounts(env.op, cases);
    env.op.destroy();
  });

  it('counts the sampled tokens on the GPU across steps, and a new request starts from clean state', async () => {
    const env = await setup(256, 1);
    const first: SeqCase = { p: { logitBias: randomBias(9), repetitionPenalty: 1.3, frequencyPenalty: 0.5, presencePenalty: 0.5 }, prompt, generated: ids(20, 31, 30) };
    await runRequests(env, [first], 2);
    await expectCounts(env.op, [first]);
    // Same slot, no bias (the stale row must not be read), another prompt and history: the counts
    // and prompt bits of the first request must be gone.
    const second: SeqCase = { p: { ...OFF, frequencyPenalty: 0.25, repetitionPenalty: 1.1 }, prompt: ids(10, 41, 1000), generated: ids(12, 42, 20) };
    await runRequests(env, [second], 3);
    await expectCounts(env.op, [second]);
    env.op.destroy();
  });

  it('reads each row’s state from its sequence slot (rowSlot), and a slot placed with a history starts from its counts', async () => {
    const { device } = await testGPU();
    const maxSeqs = 4;
    const logits = createBuffer(device, maxSeqs * V * 4, STORAGE);
    const lastToken = createBuffer(device, maxSeqs * 4, STORAGE);
    // Row 0 is slot 3, row 1 is slot 0 (a batch's rows change from step to step; slots do not).
    const rowSlot = uploadBuffer(device, new Uint32Array([3, 0, 0, 0]));
    const op = await createPenaltiesOp(opContext(device, 'f32'), { logits, lastToken, vocab: V, maxSeqs, wg: 64, rowSlot });
    const a: SeqCase = { p: { logitBias: randomBias(13), repetitionPenalty: 1.2, frequencyPenalty: 0.4, presencePenalty: 0.3 }, prompt, generated: ids(6, 51, 40) };
    const b: SeqCase = { p: { ...OFF, frequencyPenalty: 0.9 }, prompt: ids(9, 52, 30), generated: ids(6, 53, 30) };
    // Slot 3 comes back after a preemption: three tokens already generated.
    const history = ids(3, 54, 40);
    op.reset(3, a.p, a.prompt, [], history);
    op.reset(0, b.p, b.prompt, []);
    for (let k = 0; k <= a.generated.length; k++) {
      const raw = [random(V, 900 + k, 5), random(V, 950 + k, 5)];
      raw.forEach((row, r) => writeBuffer(device, logits, r * V * 4, row));
      if (k > 0) {
        const last = new Uint32Array(maxSeqs);
        last[3] = a.generated[k - 1]!;
        last[0] = b.generated[k - 1]!;
        device.queue.writeBuffer(lastToken, 0, last);
      }
      await runPass(device, (pass) => op.encode(pass, 2));
      const got = new Float32Array(await readBuffer(device, logits, 2 * V * 4));
      const wantA = penaltiesRef(raw[0]!, a.p, [], a.prompt, [...history, ...a.generated.slice(0, k)]);
      const wantB = penaltiesRef(raw[1]!, b.p, [], b.prompt, b.generated.slice(0, k));
      expect(worstDiff(got.subarray(0, V), wantA), `row 0 (slot 3), step ${k}`).toBeLessThan(TOLERANCE);
      expect(worstDiff(got.subarray(V, 2 * V), wantB), `row 1 (slot 0), step ${k}`).toBeLessThan(TOLERANCE);
    }
    op.destroy();
    rowSlot.destroy();
  });

  it('drops the min_tokens ban when setBias rewrites the row, keeping logit_bias', async () => {
    const env = await setup(64, 1);
    const { device, logits, op } = env;
    const p = { ...OFF, logitBias: { 4: 2.5 } };
    op.reset(0, p, prompt, [4, 7]);
    const raw = random(V, 77, 5);
    const once = async () => {
      writeBuffer(device, logits, 0, raw);
      await runPass(device, (pass) => op.encode(pass, 1));
      return new Float32Array(await readBuffer(device, logits, V * 4));
    };
    const banned = await once();
    expect([banned[4], banned[7]]).toEqual([-Infinity, -Infinity]);
    op.setBias(0, p, []);
    const after = await once();
    expect(worstDiff(after, penaltiesRef(raw, p, [], prompt, []))).toBeLessThan(TOLERANCE);
    expect(after[7]).toBe(raw[7]);
    op.destroy();
  });
});
