/**
 * `webgpu-llm generate`: loads a model on the GPU (Dawn in Node), generates from a text prompt or
 * from token ids, and prints the ids and the text (or, with --json, `{ids, text, finish_reason, timings}`).
 */
import { parseArgs } from 'node:util';
import { toSamplingParams } from '../api/sampling';
import { GpuEngine } from '../engine/engine';
import type { GenerationResult } from '../engine/types';
import { acquireGPU } from '../gpu/device';
import { openModelWithCache } from '../loader/open';
import { loadTextModel } from '../text/from-model';
import { UsageError, type CliIO } from './io';
import { useSwiftShaderIfNoGPU } from './vulkan';

export const GENERATE_USAGE = `usage: webgpu-llm generate --model PATH_OR_URL (--prompt TEXT | --prompt-ids 1,2,3) [options]
  --model PATH_OR_URL   a .gguf file or a Hugging Face folder (local path or http(s) URL)
  --prompt TEXT         tokenized with the model's tokenizer (BOS as its config says)
  --prompt-ids 1,2,3    token ids, used as given
  --max-tokens N        tokens to generate at most (default 64)
  --temperature T       0 = greedy (default: the model's generation_config, else 1)
  --top-k K, --top-p P, --seed S
  --ignore-eos          keep going past end-of-sequence tokens
  --precision f32|f16   activation precision (default: f16 where the GPU has shader-f16)
  --lora PATH           run with this LoRA adapter (a PEFT folder or a GGUF LoRA: path, URL or repo id)
  --lora-scale S        multiplies the adapter's own alpha / rank (default 1)
  --json                print {ids, text, finish_reason, timings} as JSON`;

export interface GenerateOutput {
  ids: number[];
  text: string;
  finish_reason: GenerationResult['finishReason'];
  timings: {
    load_ms: number;
    prompt_tokens: number;
    /** Request to first generated token (prefill + first sample). */
    ttft_ms: number;
    completion_tokens: number;
    /** Tokens after the first, per second. */
    decode_tokens_per_s: number | null;
    total_ms: number;
  };
}

function number(name: string, value: string | undefined, check: (n: number) => boolean): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || !check(n)) throw new UsageError(`--${name} ${value}: not a valid value`);
  return n;
}

export function parseGenerateArgs(argv: string[]) {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        model: { type: 'string', short: 'm' },
        prompt: { type: 'string', short: 'p' },
        'prompt-ids': { type: 'string' },
        'max-tokens': { type: 'string', short: 'n' },
        temperature: { type: 'string', short: 't' },
        'top-k': { type: 'string' },
        'top-p': { type: 'string' },
        seed: { type: 'string' },
        'ignore-eos': { type: 'boolean' },
        precision: { type: 'string' },
        lora: { type: 'string' },
        'lora-scale': { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  if (values.help) return { help: true as const };
  if (!values.model) throw new UsageError('--model is required');
  if ((values.prompt === undefined) === (values['prompt-ids'] === undefined)) throw new UsageError('give exactly one of --prompt and --prompt-ids');
  const promptIds = values['prompt-ids']?.split(',').map((s) => number('prompt-ids', s, (n) => Number.isInteger(n) && n >= 0)!);
  if (values['lora-scale'] !== undefined && values.lora === undefined) throw new UsageError('--lora-scale needs --lora');
  if (values.precision !== undefined && !['f32', 'f16', 'auto'].includes(values.precision)) throw new UsageError(`--precision ${values.precision}: expected f32, f16 or auto`);
  return {
    help: false as const,
    model: values.model,
    prompt: values.prompt,
    promptIds,
    maxTokens: number('max-tokens', values['max-tokens'], (n) => Number.isInteger(n) && n >= 0) ?? 64,
    temperature: number('temperature', values.temperature, (n) => n >= 0),
    topK: number('top-k', values['top-k'], Number.isInteger),
    topP: number('top-p', values['top-p'], (n) => n > 0 && n <= 1),
    seed: number('seed', values.seed, Number.isInteger),
    ignoreEos: values['ignore-eos'] ?? false,
    precision: values.precision as 'f32' | 'f16' | 'auto' | undefined,
    lora: values.lora,
    loraScale: number('lora-scale', values['lora-scale'], Number.isFinite),
    json: values.json ?? false,
  };
}

export async function generateCommand(argv: string[], io: CliIO): Promise<number> {
  const args = parseGenerateArgs(argv);
  if (args.help) {
    io.out(GENERATE_USAGE + '\n');
    return 0;
  }
  useSwiftShaderIfNoGPU();
  const { nodeGPU } = await import('../gpu/node-gpu');
  const gpu = await acquireGPU({ gpu: await nodeGPU() });
  let engine: GpuEngine | undefined;
  try {
    const t0 = performance.now();
    // Tokenize first: the engine then holds only as much KV as this request needs.
    // The loader serve uses too: every load error names the file (or the folder's config.json).
    const opened = await openModelWithCache(args.model);
    const promptIds = args.promptIds ?? loadTextModel(opened).tokenizer.encode(args.prompt!);
    engine = await GpuEngine.load(opened, {
      gpu,
      precision: args.precision,
      contextLength: promptIds.length + args.maxTokens + 1,
      ...(args.lora !== undefined ? { lora: { cli: { source: args.lora, scale: args.loraScale } } } : {}),
    });
    const loadMs = performance.now() - t0;
    const sampling = toSamplingParams({ temperature: args.temperature, top_k: args.topK, top_p: args.topP, seed: args.seed }, engine.generationConfig);

    const t1 = performance.now();
    const ids: number[] = [];
    const at: number[] = [];
    const it = engine.generate({ promptIds, maxTokens: args.maxTokens, sampling, stopTokenIds: [], ignoreEos: args.ignoreEos, minTokens: 0, ...(args.lora !== undefined ? { lora: 'cli' } : {}) });
    let r = await it.next();
    while (!r.done) {
      ids.push(r.value.id);
      at.push(performance.now() - t1);
      r = await it.next();
    }
    const totalMs = performance.now() - t1;
    const output: GenerateOutput = {
      ids,
      text: engine.tokenizer.decode(ids, { skipSpecialTokens: true }),
      finish_reason: r.value.finishReason,
      timings: {
        load_ms: round(loadMs),
        prompt_tokens: promptIds.length,
        ttft_ms: round(at[0] ?? totalMs),
        completion_tokens: ids.length,
        decode_tokens_per_s: ids.length > 1 ? round(((ids.length - 1) * 1000) / (at[at.length - 1]! - at[0]!)) : null,
        total_ms: round(totalMs),
      },
    };
    if (args.json) io.out(JSON.stringify(output) + '\n');
    else {
      io.out(output.text + '\n');
      io.out(`ids: ${ids.join(',')}\n`);
      const t = output.timings;
      io.out(
        `finish: ${output.finish_reason}; ${t.prompt_tokens} prompt + ${t.completion_tokens} generated tokens; load ${t.load_ms} ms, ` +
          `first token ${t.ttft_ms} ms, decode ${t.decode_tokens_per_s ?? '-'} tokens/s\n`,
      );
    }
    return 0;
  } finally {
    await engine?.dispose();
    gpu.destroy();
  }
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}
