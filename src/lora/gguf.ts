/**
 * llama.cpp LoRA files (convert_lora_to_gguf.py): `general.type = adapter`,
 * `adapter.type = lora`, `adapter.lora.alpha`, tensors `blk.{i}.attn_q.weight.lora_a` [r, in] and
 * `.lora_b` [out, r] (outermost first). llama.cpp scales by alpha / r, or by 1 when alpha is 0;
 * its converter writes PEFT's lora_alpha unchanged and ignores use_rslora. The converter permutes
 * a `llama` file's q/k B rows as it does the base's (model/qk-rows.ts).
 */
import { readGGUF } from '../formats/gguf';
import type { ByteSource } from '../formats/source';
import { ARCH, ARCHES } from '../model/arch';
import { readPairs } from './pairs';
import { TARGETS } from './targets';
import { LoraError, type LoraAdapter, type LoraTarget } from './types';

const TENSOR = /^blk\.(\d+)\.(.+\.weight)\.lora_([ab])$/;
// ssm_out is Qwen3.5's DeltaNet out_proj and Granite 4.0-H's Mamba-2 out_proj alike: a hybrid
// architecture's file (ArchInfo.ggufHybrid, `granitehybrid`) means the Mamba-2 one.
const mamba2 = (t: LoraTarget) => t === 'mb_in' || t === 'mb_out';
const BY_TENSOR = new Map(TARGETS.filter((t) => !mamba2(t.target)).map((t) => [t.ggufTensor, t.target]));
const HYBRID_TENSOR = new Map([...BY_TENSOR, ...TARGETS.filter((t) => mamba2(t.target)).map((t) => [t.ggufTensor, t.target] as const)]);
const KNOWN = TARGETS.map((t) => t.ggufTensor.replace(/\.weight$/, '')).join(', ');

export async function readGGUFAdapter(src: ByteSource): Promise<LoraAdapter> {
  const file = src.name;
  const gguf = await readGGUF(src);
  const meta = gguf.metadata;
  const type = meta.get('general.type');
  if (type !== 'adapter')
    throw new LoraError('not_an_adapter', file, `general.type is ${JSON.stringify(type ?? null)}, not "adapter": this is ${type === undefined || type === 'model' ? 'a model' : 'not a LoRA adapter'}`);
  const adapterType = meta.get('adapter.type');
  if (adapterType !== 'lora') throw new LoraError('unsupported_option', file, `adapter.type is ${JSON.stringify(adapterType ?? null)}; only "lora" adapters are supported`);
  if (meta.has('adapter.alora.invocation_tokens')) throw new LoraError('unsupported_option', file, 'activated LoRA (adapter.alora.invocation_tokens) is not supported');
  const alpha = meta.get('adapter.lora.alpha') ?? 0;
  if (typeof alpha !== 'number' || !Number.isFinite(alpha)) throw new LoraError('invalid_config', file, 'adapter.lora.alpha must be a number');
  const arch = meta.get('general.architecture');
  if (typeof arch !== 'string') throw new LoraError('invalid_config', file, 'general.architecture is missing');
  const family = ARCHES.find((a) => ARCH[a].gguf === arch || ARCH[a].ggufHybrid === arch);
  if (!family) throw new LoraError('wrong_base', file, `is an adapter for architecture "${arch}", which webgpu-llm does not run`);
  const byTensor = arch === ARCH[family].ggufHybrid ? HYBRID_TENSOR : BY_TENSOR;

  const weights = await readPairs(src, file, gguf.tensors, {
    names: ['lora_a', 'lora_b'],
    role: (info) => {
      const m = TENSOR.exec(info.name);
      const target = m && byTensor.get(m[2]!);
      if (!m || !target) throw new LoraError('unsupported_target', file, unsupportedTensor(info.name));
      return { layer: Number(m[1]), target, matrix: `blk.${m[1]}.${m[2]}`, which: m[3] as 'a' | 'b' };
    },
    scale: (rank) => (alpha === 0 ? 1 : alpha / rank),
  });
  const qkRows = ARCH[family].ggufRopeStyle === 'interleaved' ? 'interleaved' : 'halves';
  // Value heads as the base's converter tiles them: llama.cpp's LoRA converter runs the same tensor
  // transforms on the adapter's factors (B's rows, A's columns).
  return { name: file, file, format: 'gguf', qkRows, vHeadOrder: 'tiled', ggufArch: arch, weights };
}

function unsupportedTensor(name: string): string {
  if (/^(token_embd|output)\./.test(name)) return `tensor ${name} adapts the embeddings or the output; webgpu-llm applies adapters to the layers' linear tensors only (${KNOWN})`;
  if (/_norm\.weight$/.test(name)) return `tensor ${name} replaces a norm (as mergekit-extract-lora writes), which is not supported`;
  return `tensor ${name} is not a .lora_a / .lora_b of ${KNOWN}`;
}
