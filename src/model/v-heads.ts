/**
 * Qwen3.5's DeltaNet value-head orders (DeltaNetConfig.vHeadOrder): HF groups the value heads by
 * key head, llama.cpp's converter tiles them, moving every per-value-head row (or column) of the
 * DeltaNet's tensors. The table says where each tensor holds them; the fixture writes GGUF files
 * with it, and LoRA adapters are moved between the two orders with it (lora/fit.ts).
 */
import type { DeltaNetConfig } from './config';

/** Where a tensor holds per-value-head data: `size` rows (columns) per head from row (column) `from`. */
export interface VHeadSpan {
  dim: 'rows' | 'cols';
  from: (d: DeltaNetConfig) => number;
  size: (d: DeltaNetConfig) => number;
}

const vRows = (d: DeltaNetConfig) => 2 * d.numKHeads * d.headKDim;
const none = () => 0;
const one = () => 1;
const headV = (d: DeltaNetConfig) => d.headVDim;

/** The DeltaNet tensors (llama.cpp names, after `blk.N.`) whose value heads the converter reorders. */
export const V_HEAD_SPANS: Readonly<Record<string, VHeadSpan>> = {
  'attn_qkv.weight': { dim: 'rows', from: vRows, size: headV }, // q, k, then v: the v rows
  'ssm_conv1d.weight': { dim: 'rows', from: vRows, size: headV }, // the conv's v channels
  'attn_gate.weight': { dim: 'rows', from: none, size: headV }, // z
  'ssm_beta.weight': { dim: 'rows', from: none, size: one },
  'ssm_alpha.weight': { dim: 'rows', from: none, size: one },
  'ssm_dt.bias': { dim: 'rows', from: none, size: one },
  ssm_a: { dim: 'rows', from: none, size: one },
  'ssm_out.weight': { dim: 'cols', from: none, size: headV },
};

/**
 * HF groups the value heads by key head (head kh·r + j, r = numVHeads / numKHeads); the converter
 * tiles them (file head j·numKHeads + kh), so that file head p reads key head p % numKHeads.
 * Returns, per file head, the HF head it holds.
 */
export function tiledVHeads(d: DeltaNetConfig): number[] {
  const r = d.numVHeads / d.numKHeads;
  return Array.from({ length: d.numVHeads }, (_, p) => (p % d.numKHeads) * r + Math.floor(p / d.numKHeads));
}

/** Per head of the `to` order, the head of the `from` order it holds. */
function headMap(d: DeltaNetConfig, from: DeltaNetConfig['vHeadOrder'], to: DeltaNetConfig['vHeadOrder']): number[] {
  const tiled = tiledVHeads(d);
  if (from === to) return tiled.map((_, h) => h);
  if (to === 'tiled') return tiled;
  const back = new Array<number>(tiled.length);
  tiled.forEach((h, p) => (back[h] = p));
  return back;
}

/**
 * A [rows, cols] matrix's value heads (where `span` says) moved from order `from` to order `to`;
 * the same array when the orders agree.
 */
export function reorderVHeads(src: Float32Array, rows: number, cols: number, span: VHeadSpan, d: DeltaNetConfig, from: DeltaNetConfig['vHeadOrder'], to: DeltaNetConfig['vHeadOrder']): Float32Array {
  if (from === to) return src;
  const order = headMap(d, from, to);
  const [start, size] = [span.from(d), span.size(d)];
  const out = src.slice();
  if (span.dim === 'rows') {
    order.forEach((h, p) => out.set(src.subarray((start + h * size) * cols, (start + (h + 1) * size) * cols), (start + p * size) * cols));
  } else {
    for (let r = 0; r < rows; r++) order.forEach((h, p) => out.set(src.subarray(r * cols + start + h * size, r * cols + start + (h + 1) * size), r * cols + start + p * size));
  }
  return out;
}
