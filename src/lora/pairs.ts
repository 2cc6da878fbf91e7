/**
 * What both adapter readers share: A/B tensors grouped by the matrix they adapt, each pair checked
 * (both present, 2-D, one rank) and read as float32.
 */
import { dequantize } from '../formats/quants';
import type { ByteSource } from '../formats/source';
import { elementCount, type TensorInfo } from '../formats/types';
import { LoraError, sortWeights, type LoraTarget, type LoraWeight } from './types';

/** A tensor's place in an adapter, as a reader's naming scheme says. */
export interface TensorRole {
  layer: number;
  target: LoraTarget;
  /** The adapted matrix as the file names it (`model.layers.0.self_attn.q_proj`), for messages. */
  matrix: string;
  which: 'a' | 'b';
}

export interface PairOptions {
  /** The file's names for A and B (`lora_A`, `lora_B`), for messages. */
  names: [string, string];
  /** The tensor's role, or throws the reader's unsupported_target error. */
  role: (info: TensorInfo) => TensorRole;
  /** The scale of one pair (it may check the rank against a config). */
  scale: (rank: number, matrix: string, a: TensorInfo) => number;
}

export async function readPairs(src: ByteSource, file: string, tensors: readonly TensorInfo[], opts: PairOptions): Promise<LoraWeight[]> {
  const [aName, bName] = opts.names;
  type Pair = Omit<TensorRole, 'which'> & { a?: TensorInfo; b?: TensorInfo };
  const pairs = new Map<string, Pair>();
  for (const info of tensors) {
    const { which, ...role } = opts.role(info);
    const pair: Pair = pairs.get(role.matrix) ?? role;
    pair[which] = info;
    pairs.set(role.matrix, pair);
  }
  if (pairs.size === 0) throw new LoraError('missing_tensor', file, `holds no ${aName} / ${bName} tensors`);

  const read = async (info: TensorInfo) => dequantize(info.dtype, await src.read(info.offset, info.byteLength), elementCount(info.shape));
  const weights: LoraWeight[] = [];
  for (const { layer, target, matrix, a, b } of pairs.values()) {
    if (!a || !b) throw new LoraError('missing_tensor', file, `${matrix} has ${a ? aName : bName} but no ${a ? bName : aName}`);
    if (a.shape.length !== 2 || b.shape.length !== 2)
      throw new LoraError('tensor_shape', file, `${matrix}'s ${aName} [${a.shape.join(', ')}] and ${bName} [${b.shape.join(', ')}] must both be 2-D`);
    const [rank, inFeatures] = a.shape as [number, number];
    const [outFeatures, rankB] = b.shape as [number, number];
    if (rankB !== rank)
      throw new LoraError('tensor_shape', file, `${a.name} [${a.shape.join(', ')}] and ${b.name} [${b.shape.join(', ')}] disagree on the rank (is ${aName} transposed?)`);
    const scale = opts.scale(rank, matrix, a);
    weights.push({ layer, target, rank, inFeatures, outFeatures, a: await read(a), b: await read(b), scale });
  }
  return sortWeights(weights);
}
