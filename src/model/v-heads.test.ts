import { describe, expect, it } from 'vitest';
import { deltaNetKeyHead, type DeltaNetConfig } from './config';
import { reorderVHeads, V_HEAD_SPANS } from './v-heads';

// 2 key heads, 6 value heads (3 per key head: the tiling is not its own inverse), value heads of 2.
const d: DeltaNetConfig = { layers: [0], convKernel: 4, numKHeads: 2, numVHeads: 6, headKDim: 1, headVDim: 2, vHeadOrder: 'grouped', aStored: 'log' };

describe('reorderVHeads', () => {
  it('moves each value head where the tiled order reads the same key head (deltaNetKeyHead of either order)', () => {
    // z's rows [6 heads · 2, 1 column]: each row holds the key head its value head reads.
    const grouped = Float32Array.from({ length: 12 }, (_, i) => deltaNetKeyHead(d, Math.floor(i / 2)));
    const tiled = reorderVHeads(grouped, 12, 1, V_HEAD_SPANS['attn_gate.weight']!, d, 'grouped', 'tiled');
    expect([...tiled]).toEqual(Array.from({ length: 12 }, (_, i) => deltaNetKeyHead({ ...d, vHeadOrder: 'tiled' }, Math.floor(i / 2))));
    expect([...tiled]).not.toEqual([...grouped]);
  });

  it('goes back exactly, over rows after q and k (qkv) and over columns (out_proj)', () => {
    const qkv = Float32Array.from({ length: (4 + 12) * 3 }, (_, i) => i);
    const span = V_HEAD_SPANS['attn_qkv.weight']!;
    const there = reorderVHeads(qkv, 16, 3, span, d, 'grouped', 'tiled');
    expect([...there.subarray(0, 12)]).toEqual([...qkv.subarray(0, 12)]); // q and k stay
    expect([...reorderVHeads(there, 16, 3, span, d, 'tiled', 'grouped')]).toEqual([...qkv]);
    const out = Float32Array.from({ length: 2 * 12 }, (_, i) => i);
    const cols = V_HEAD_SPANS['ssm_out.weight']!;
    const moved = reorderVHeads(out, 2, 12, cols, d, 'grouped', 'tiled');
    // file head 1 holds HF head 3 (key head 1's first): columns 6, 7 of each row
    expect([...moved.subarray(2, 4)]).toEqual([6, 7]);
    expect([...reorderVHeads(moved, 2, 12, cols, d, 'tiled', 'grouped')]).toEqual([...out]);
  });
});
