/**
 * The f16 path against the CPU reference on the families added after the first four, one or two
 * formats each (engine.f16.test.ts has the rule, the tolerance and the first four). Runs where the
 * device offers shader-f16 (lavapipe in `npm test`'s f16 step); skips on SwiftShader.
 */
import type { Arch } from '../model/config';
import { describeEngineGrid } from '../testing/engine-matrix';

const FORMATS: Array<[Arch, string[]]> = [
  ['smollm3', ['Q8_0']],
  ['olmo2', ['hf-BF16']],
  ['gemma2', ['Q8_0']],
  ['gemma3', ['Q8_0']],
  ['granite', ['Q4_K_M']],
  ['phi3', ['Q4_K_M']],
  ['qwen2moe', ['Q4_K_M']],
  ['qwen3moe', ['hf-F16', 'Q8_0']],
  ['olmoe', ['F16']],
];

describeEngineGrid(FORMATS, 'f16');
