/**
 * PEFT adapter folders: `adapter_config.json` + `adapter_model.safetensors`, tensors named
 * `base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight` (A [r, in], B [out, r]), in
 * HF's row orders (q/k halves, a DeltaNet's value heads grouped).
 * The scale is PEFT's `scaling`: lora_alpha / r, or lora_alpha / sqrt(r) with `use_rslora`, r and
 * alpha per module from `rank_pattern` / `alpha_pattern` when a key matches.
 */
import { readSafetensors } from '../formats/safetensors';
import type { Folder } from '../model/folder';
import { readPairs } from './pairs';
import { TARGETS } from './targets';
import { LoraError, type LoraAdapter } from './types';

export const PEFT_CONFIG = 'adapter_config.json';
export const PEFT_WEIGHTS = 'adapter_model.safetensors';

/** What we use of adapter_config.json, checked. */
export interface PeftConfig {
  r: number;
  loraAlpha: number;
  useRslora: boolean;
  rankPattern: Record<string, number>;
  alphaPattern: Record<string, number>;
}

// Layers under `model.layers.` (CausalLM) or `model.language_model.layers.` (Qwen3.5's ConditionalGeneration).
const TENSOR = /^(?:base_model\.model\.)?model\.(?:language_model\.)?layers\.(\d+)\.([a-z_]+\.[a-z0-9_]+)\.lora_([AB])\.weight$/;
const BY_MODULE = new Map(TARGETS.flatMap((t) => t.peftModules.map((m) => [m, t.target] as const)));
const PEFT_NAMES = new Set(TARGETS.flatMap((t) => t.peftNames));
const KNOWN = [...PEFT_NAMES].join(', ');

export async function readPeftAdapter(folder: Folder): Promise<LoraAdapter> {
  const configFile = `${folder.name}/${PEFT_CONFIG}`;
  const text = await folder.text(PEFT_CONFIG);
  if (text === null) {
    const isModel = (await folder.text('config.json')) !== null;
    throw new LoraError('not_an_adapter', configFile, isModel ? 'is missing: this folder holds a model (config.json), not a PEFT adapter' : 'is missing; a PEFT adapter folder needs it');
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new LoraError('invalid_config', configFile, `is not valid JSON (${(e as Error).message})`);
  }
  const config = parsePeftConfig(json, configFile);

  const file = `${folder.name}/${PEFT_WEIGHTS}`;
  const source = folder.source(PEFT_WEIGHTS);
  const { tensors } = await readSafetensors(source);
  const weights = await readPairs(source, file, tensors, {
    names: ['lora_A', 'lora_B'],
    role: (info) => {
      const m = TENSOR.exec(info.name);
      const target = m && BY_MODULE.get(m[2]!);
      if (!m || !target) throw new LoraError('unsupported_target', file, unsupportedTensor(info.name));
      return { layer: Number(m[1]), target, matrix: `model.layers.${m[1]}.${m[2]}`, which: m[3] === 'A' ? 'a' : 'b' };
    },
    scale: (rank, module, a) => {
      const { r, alpha } = moduleRankAlpha(config, module, configFile);
      if (r !== rank) throw new LoraError('tensor_shape', file, `${a.name} has rank ${rank} but adapter_config.json gives ${module} r = ${r}`);
      return config.useRslora ? alpha / Math.sqrt(r) : alpha / r;
    },
  });
  return { name: folder.name, file, format: 'peft', qkRows: 'halves', vHeadOrder: 'grouped', weights };
}

function unsupportedTensor(name: string): string {
  if (/embed_tokens|lora_embedding|lm_head/.test(name))
    return `tensor ${name} adapts the embeddings or lm_head; webgpu-llm applies adapters to the layers' linear modules only (${KNOWN})`;
  if (/\.lora_[AB]\.weight$/.test(name)) return `tensor ${name} adapts a module other than ${KNOWN}, which webgpu-llm does not adapt`;
  return `tensor ${name} is not a LoRA A/B matrix of ${KNOWN} (full weights such as modules_to_save are not supported)`;
}

/** Checks adapter_config.json: LoRA only, plain LoRA (no DoRA, biases or extra modules). */
export function parsePeftConfig(json: unknown, file: string): PeftConfig {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new LoraError('invalid_config', file, 'is not a JSON object');
  const c = json as Record<string, unknown>;
  const bad = (code: 'invalid_config' | 'unsupported_option' | 'unsupported_target', detail: string): never => {
    throw new LoraError(code, file, detail);
  };
  if (c.peft_type !== undefined && c.peft_type !== 'LORA') bad('unsupported_option', `peft_type is ${JSON.stringify(c.peft_type)}; only LORA adapters are supported`);
  if (c.use_dora === true) bad('unsupported_option', 'use_dora is true: DoRA adapters are not supported');
  if (c.bias !== undefined && c.bias !== 'none') bad('unsupported_option', `bias is ${JSON.stringify(c.bias)}; only "none" is supported (the adapter would change the base's biases)`);
  if (c.lora_bias === true) bad('unsupported_option', 'lora_bias is true: LoRA B biases are not supported');
  if (Array.isArray(c.modules_to_save) && c.modules_to_save.length > 0)
    bad('unsupported_option', `modules_to_save (${c.modules_to_save.join(', ')}) replaces whole modules, which is not supported`);
  if (c.layer_replication != null) bad('unsupported_option', 'layer_replication is not supported');
  if (c.alora_invocation_tokens != null) bad('unsupported_option', 'activated LoRA (alora_invocation_tokens) is not supported');
  // PEFT itself turns fan_in_fan_out off for nn.Linear targets (with a warning), and every target
  // here is an nn.Linear, so the flag changes nothing.

  const targets = c.target_modules;
  if (Array.isArray(targets)) {
    for (const t of targets) {
      if (typeof t !== 'string') bad('invalid_config', 'target_modules must hold module names');
      if (!PEFT_NAMES.has(t as string))
        bad('unsupported_target', `target_modules names ${JSON.stringify(t)}; webgpu-llm adapts only ${KNOWN}`);
    }
  } else if (targets !== undefined && targets !== null && typeof targets !== 'string') {
    bad('invalid_config', 'target_modules must be a list of module names or a regular expression');
  }

  const r = c.r ?? 8; // PEFT's default
  if (!Number.isInteger(r) || (r as number) <= 0) bad('invalid_config', `r must be a positive integer, got ${JSON.stringify(c.r)}`);
  const loraAlpha = c.lora_alpha ?? 8; // PEFT's default
  if (typeof loraAlpha !== 'number' || !Number.isFinite(loraAlpha)) bad('invalid_config', `lora_alpha must be a number, got ${JSON.stringify(c.lora_alpha)}`);
  if (c.use_rslora !== undefined && typeof c.use_rslora !== 'boolean') bad('invalid_config', 'use_rslora must be true or false');
  const pattern = (key: string, integer: boolean): Record<string, number> => {
    const p = c[key] ?? {};
    if (typeof p !== 'object' || p === null || Array.isArray(p)) return bad('invalid_config', `${key} must be an object`);
    for (const [k, v] of Object.entries(p)) {
      if (typeof v !== 'number' || (integer && (!Number.isInteger(v) || v <= 0))) bad('invalid_config', `${key}[${JSON.stringify(k)}] must be a ${integer ? 'positive integer' : 'number'}`);
    }
    return p as Record<string, number>;
  };
  return { r: r as number, loraAlpha: loraAlpha as number, useRslora: c.use_rslora === true, rankPattern: pattern('rank_pattern', true), alphaPattern: pattern('alpha_pattern', false) };
}

/**
 * r and alpha of one module (`model.layers.0.self_attn.q_proj`): the first pattern key k, in
 * file order, for which the whole name matches `(.*\.)?(k)$` (PEFT's get_pattern_key), else the
 * config's r and lora_alpha.
 */
export function moduleRankAlpha(config: PeftConfig, module: string, file: string): { r: number; alpha: number } {
  const find = (pattern: Record<string, number>, key: string): number | undefined => {
    for (const [k, v] of Object.entries(pattern)) {
      let re: RegExp;
      try {
        re = new RegExp(`^(?:.*\\.)?(?:${k})$`);
      } catch {
        throw new LoraError('invalid_config', file, `${key} key ${JSON.stringify(k)} is not a valid regular expression`);
      }
      if (re.test(module)) return v;
    }
    return undefined;
  };
  return { r: find(config.rankPattern, 'rank_pattern') ?? config.r, alpha: find(config.alphaPattern, 'alpha_pattern') ?? config.loraAlpha };
}
