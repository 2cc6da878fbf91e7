/**
 * Structured output through the WebGPU engine (Dawn/SwiftShader in Node): the grammar's bitmask is
 * uploaded each step and the apply_mask kernel runs before the penalties and the sampler, on the
 * GPU sampling path and on the CPU one (DRY reads the logits back, masked).
 */
import Ajv2020 from 'ajv/dist/2020';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appFor, clientFor, loadRig, type Rig } from '../testing/api-rig';
import { GpuEngine } from '../engine/engine';
import { testGPU } from '../testing/gpu';
import { SCHEMAS } from '../testing/schemas';

let rig: Rig;
let engine: GpuEngine;
let client: OpenAI;
const ajv = new Ajv2020({ strict: false });

beforeAll(async () => {
  rig = await loadRig();
  engine = await GpuEngine.load(rig.qwen.opened, { gpu: await testGPU(), id: 'qwen3-tiny', contextLength: 512 });
  client = clientFor(appFor([engine]));
});
afterAll(async () => {
  await engine?.dispose();
  await rig?.close();
});

async function chat(extra: Record<string, unknown>): Promise<{ text: string; finish: string | null }> {
  const body = { model: 'qwen3-tiny', messages: [{ role: 'user', content: 'JSON please' }], max_tokens: 120, chat_template_kwargs: { enable_thinking: false }, ...extra };
  const r = await client.chat.completions.create(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
  return { text: r.choices[0]!.message.content ?? '', finish: r.choices[0]!.finish_reason };
}

const pick = ['nested_objects', 'array_bounds', 'refs_and_defs', 'any_of_objects', 'string_pattern'];

describe('structured output on the GPU engine', () => {
  for (const name of pick) {
    const { schema } = SCHEMAS.find((s) => s.name === name)!;
    for (const sampling of [{ temperature: 0 }, { temperature: 1, seed: 3, repetition_penalty: 1.2 }]) {
      it(`gives JSON valid against ${name} with ${JSON.stringify(sampling)} (GPU sampler)`, async () => {
        const before = engine.cpuSampledSteps;
        const { text, finish } = await chat({ ...sampling, response_format: { type: 'json_schema', json_schema: { name, schema } } });
        expect(engine.cpuSampledSteps).toBe(before);
        expect(finish).toBe('stop');
        const validate = ajv.compile(schema);
        expect(validate(JSON.parse(text)), `${text} ${JSON.stringify(validate.errors)}`).toBe(true);
      });
    }
  }

  it('masks the read-back logits on the CPU sampling path (DRY) too', async () => {
    const before = engine.cpuSampledSteps;
    const { text, finish } = await chat({ temperature: 1, seed: 4, dry_multiplier: 0.8, regex: '[a-c]{2}-[0-9]{1,2}' });
    expect(engine.cpuSampledSteps).toBeGreaterThan(before);
    expect(finish).toBe('stop');
    expect(text).toMatch(/^[a-c]{2}-[0-9]{1,2}$/);
  });

  it('follows a grammar and leaves the next unconstrained request unmasked', async () => {
    expect((await chat({ temperature: 0, ebnf: 'root ::= ("ab" | "cd") [0-9]' })).text).toMatch(/^(ab|cd)[0-9]$/);
    const free = await chat({ temperature: 0, max_tokens: 16, ignore_eos: true });
    expect(free.finish).toBe('length');
    expect(free.text).not.toMatch(/^(ab|cd)[0-9]$/);
  });
});
