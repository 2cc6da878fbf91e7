/**
 * Jump-forward decoding (issue #26 point 3): tokens a grammar forces (its mask allows one token)
 * are taken without a draw and fed together at the next step. The output must be the one
 * token-by-token decoding gives: compared here with it off and on, on the tiny qwen3, for JSON
 * schemas, forced tool calls in three call formats and an EBNF grammar, greedy and seeded; on the
 * CPU reference and on the GPU engine (two of them), which must also take fewer steps with it on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GpuEngine } from '../engine/engine';
import type { Backend, SamplingParams } from '../engine/types';
import { loadRig, type Rig } from '../testing/api-rig';
import { testGPU } from '../testing/gpu';
import { drainGeneration, greedyRequest } from '../testing/sampling';
import { compileConstraint, type ConstraintSpec } from './grammar';

let rig: Rig;
let engine: GpuEngine;

beforeAll(async () => {
  rig = await loadRig();
  engine = await GpuEngine.load(rig.qwen.opened, { gpu: await testGPU(), id: 'qwen3-tiny', contextLength: 512 });
});
afterAll(async () => {
  await engine?.dispose();
  await rig?.close();
});

const weather = { type: 'object', properties: { city: { type: 'string', maxLength: 8 }, unit: { enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'] };
const tools = [
  { name: 'get_weather', parameters: weather },
  { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string', maxLength: 6 } }, required: ['zone'] } },
];
const SPECS: [string, ConstraintSpec][] = [
  ['a schema with fixed keys and an enum', { kind: 'json_schema', schema: weather }],
  ['a schema of nested objects and an array', { kind: 'json_schema', schema: { type: 'object', properties: { user: { type: 'object', properties: { id: { type: 'integer' }, tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 2 } }, required: ['id', 'tags'] } }, required: ['user'] } }],
  ['a forced hermes tool call', { kind: 'tool_calls', format: 'hermes', tools, multiple: false }],
  ['forced llama3 tool calls', { kind: 'tool_calls', format: 'llama3', tools, multiple: false }],
  ['forced mistral tool calls', { kind: 'tool_calls', format: 'mistral', tools: tools.slice(0, 1), multiple: true }],
  ['an EBNF grammar', { kind: 'ebnf', grammar: 'root ::= "answer: " ("yes" | "no") ", because " [a-z]{1,6} "."' }],
];
const SAMPLINGS: [string, Partial<SamplingParams>][] = [
  ['greedy', {}],
  ['seeded', { temperature: 1, seed: 7, topK: 40 }],
];

/** One generation under `spec`, jump-forward on or off: its ids and finish. */
async function run(backend: Backend, spec: ConstraintSpec, sampling: Partial<SamplingParams>, jumpForward: boolean, maxTokens = 80) {
  const compiled = await compileConstraint(backend.tokenizer, spec, backend.config.vocabSize);
  const constraint = await compiled.start();
  try {
    const prompt = backend.tokenizer.encode('Call a tool for the weather in Paris.', { addSpecialTokens: false });
    const { ids, result } = await drainGeneration(backend.generate(greedyRequest(prompt, maxTokens, sampling, { ignoreEos: false, constraint, jumpForward })));
    return { ids, finish: result.finishReason, completion: result.completionTokens };
  } finally {
    constraint.dispose();
  }
}

describe('jump-forward decoding', () => {
  it.each(SPECS)('gives the tokens token-by-token decoding gives on the CPU reference: %s', async (_, spec) => {
    for (const [name, sampling] of SAMPLINGS) {
      const off = await run(rig.qwen.backend, spec, sampling, false);
      const on = await run(rig.qwen.backend, spec, sampling, true);
      expect(on, name).toEqual(off);
      expect(off.completion).toBe(off.ids.length);
    }
  });

  it('gives the same tokens on the GPU engine in fewer steps', async () => {
    let saved = 0;
    // Two of the reference's cases (each engine run is a few seconds on SwiftShader).
    const cases: [ConstraintSpec, Partial<SamplingParams>][] = [
      [SPECS[2]![1], SAMPLINGS[1]![1]],
      [SPECS[4]![1], SAMPLINGS[0]![1]],
    ];
    for (const [i, [spec, sampling]] of cases.entries()) {
      const before = engine.kvStats.steps;
      const off = await run(engine, spec, sampling, false, 40);
      const between = engine.kvStats.steps;
      const on = await run(engine, spec, sampling, true, 40);
      const after = engine.kvStats.steps;
      expect(on, `case ${i}`).toEqual(off);
      expect(after - between, `case ${i}: steps`).toBeLessThan(between - before);
      saved += between - before - (after - between);
    }
    expect(saved).toBeGreaterThan(10);
  });
});
