/**
 * Qwen3.5's MTP head through the real loader: the tiny fixture with its head, as an HF folder
 * (`mtp.*`, config.json's mtp_num_hidden_layers) and as llama.cpp's converter writes the GGUF
 * (layer 3 after the 3-layer trunk, block_count 4, nextn_predict_layers 1, `blk.3.nextn.*`, norms
 * stored w + 1), gives the same head logits; a file stating no head loads the trunk alone. The
 * head's arithmetic is checked against an independent computation in forward-naive.test.ts.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { readGGUF } from '../formats/gguf';
import { fileSource } from '../formats/source';
import { configFromGGUF } from '../model/config-gguf';
import { configFromHF } from '../model/config-hf';
import { openFolder, type Folder } from '../model/folder';
import { openModel, type OpenedModel } from '../model/open';
import { mtpTensors } from '../model/tensors';
import { maxAbsDiffAll as maxAbsDiff } from '../testing/compare';
import { makeFixture } from '../testing/fixtures/model';
import { ensureFixture } from '../testing/fixtures/shared';
import { argmax, logitsFor, ReferenceModel } from './forward';
import { MtpReference } from './mtp';

/** The trunk's hidden states over `ids` teacher-forced, then the head's logits at each position but the last. */
async function headLogits(opened: OpenedModel, ids: number[]): Promise<Float32Array[]> {
  const trunk = await ReferenceModel.load(opened);
  const hidden = ids.map((id, t) => (trunk.forward(id, t), trunk.hidden));
  const head = await MtpReference.load(opened);
  return ids.slice(1).map((next, t) => head.forward(hidden[t]!, next, t));
}

describe('Qwen3.5 MTP head from its HF folder and from GGUF', () => {
  let hf: OpenedModel;
  let gguf: OpenedModel;
  let ids: number[];

  beforeAll(async () => {
    const paths = await ensureFixture({ arch: 'qwen35', preset: 'tiny', mtp: true }, { hf: ['F32'], gguf: ['F32'] });
    [hf, gguf] = await Promise.all([openModel(paths.hf.F32!), openModel(paths.gguf.F32!)]);
    ids = Array.from({ length: 8 }, (_, i) => (i * 7919 + 13) % hf.config.vocabSize);
  });

  it('reads one MTP layer after the 3-layer trunk from both, the GGUF one as blk.3 with nextn tensors', () => {
    expect(hf.config).toMatchObject({ numLayers: 3, mtpLayers: 1 });
    expect(gguf.config).toMatchObject({ numLayers: 3, mtpLayers: 1 });
    const names = mtpTensors(gguf.config).map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['blk.3.nextn.eh_proj.weight', 'blk.3.nextn.enorm.weight', 'blk.3.nextn.hnorm.weight', 'blk.3.nextn.shared_head_norm.weight', 'blk.3.attn_q.weight', 'blk.3.ffn_down.weight']));
    for (const t of mtpTensors(gguf.config)) if (!t.row.optional) expect(gguf.tensors.has(t.name), t.name).toBe(true);
    expect(mtpTensors(hf.config).find((t) => t.name === 'blk.3.nextn.eh_proj.weight')?.hfName).toBe('mtp.fc.weight');
  });

  it('gives the same head logits from both within 1e-4, and the trunk the same logits as without a head', async () => {
    const want = await headLogits(hf, ids);
    expect(maxAbsDiff(await headLogits(gguf, ids), want)).toBeLessThan(1e-4);
    // The head's logits are not the trunk's: a wrong wiring (the trunk's output norm, say) would show.
    const trunk = logitsFor(await ReferenceModel.load(hf), ids).slice(1);
    expect(maxAbsDiff(want, trunk)).toBeGreaterThan(1e-2);
  });
});

describe('MTP chained guesses (MtpReference.chain)', () => {
  it("feeds guess j's row with the head's own hidden state, at the next position, and leaves the KV to the next feed", async () => {
    const opened = await openModel((await ensureFixture({ arch: 'qwen35', preset: 'tiny', mtp: true }, { hf: [], gguf: ['F32'] })).gguf.F32!);
    const ids = Array.from({ length: 6 }, (_, i) => (i * 7919 + 13) % opened.config.vocabSize);
    const trunk = await ReferenceModel.load(opened);
    const hidden = ids.map((id, t) => (trunk.forward(id, t), trunk.hidden));
    const head = await MtpReference.load(opened);
    const plain = ids.slice(1).map((next, t) => head.forward(hidden[t]!, next, t));
    // Rows 0..2 fed, then a chain of 3 from row 3: its first guess is row 3's plain argmax.
    for (let t = 0; t < 3; t++) head.forward(hidden[t]!, ids[t + 1]!, t);
    const { ids: guesses, logits } = head.chain(hidden[3]!, ids[4]!, 3, 3);
    expect(maxAbsDiff([logits[0]!], [plain[3]!])).toBe(0);
    expect(guesses).toEqual(logits.map((l) => argmax(l)));
    // Chaining the trunk's hidden state again (the row's input) instead of the head's own output gives other logits.
    head.forward(hidden[3]!, ids[4]!, 3);
    const own = head.forward(head.hidden, guesses[0]!, 4);
    head.forward(hidden[3]!, ids[4]!, 3);
    const trunkAgain = head.forward(hidden[3]!, guesses[0]!, 4);
    expect(maxAbsDiff([own], [logits[1]!])).toBe(0);
    expect(maxAbsDiff([trunkAgain], [logits[1]!])).toBeGreaterThan(1e-2);
    // The chained rows are speculative: the next recorded row at position 4 overwrites them.
    head.chain(hidden[3]!, ids[4]!, 3, 3);
    expect(maxAbsDiff([head.forward(hidden[4]!, ids[5]!, 4)], [plain[4]!])).toBe(0);
    expect(() => head.chain(hidden[3]!, ids[4]!, 3, 0)).toThrow(RangeError);
  });
});

describe('MTP configs', () => {
  it('loads a folder whose config.json states a head its files lack (an export that dropped it) as the trunk alone', async () => {
    const plain = await openFolder((await ensureFixture({ arch: 'qwen35', preset: 'tiny' }, { hf: ['F32'], gguf: [] })).hf.F32!);
    const stated: Folder = {
      ...plain,
      source: (file) => plain.source(file),
      text: async (file) => (file === 'config.json' ? JSON.stringify({ ...JSON.parse((await plain.text(file))!), mtp_num_hidden_layers: 1 }) : plain.text(file)),
    };
    const opened = await openModel(stated);
    expect(opened.config).toMatchObject({ numLayers: 3, mtpLayers: 0 });
    expect(mtpTensors(opened.config)).toEqual([]);
  });

  const fx = makeFixture({ arch: 'qwen35', preset: 'tiny', mtp: true });

  it('reads mtp_num_hidden_layers (absent: 0) and refuses more than one layer by name', () => {
    expect(configFromHF(fx.config).mtpLayers).toBe(1);
    expect(configFromHF({ ...fx.config, mtp_num_hidden_layers: undefined }).mtpLayers).toBe(0);
    expect(() => configFromHF({ ...fx.config, mtp_num_hidden_layers: 2 })).toThrow(expect.objectContaining({ code: 'unsupported_arch', field: 'mtp_num_hidden_layers' }));
    expect(() => configFromHF({ ...fx.config, mtp_num_hidden_layers: -1 })).toThrow(expect.objectContaining({ code: 'invalid_field' }));
  });

  it("reads GGUF's block_count less nextn_predict_layers as the trunk, and a file without the key as all trunk", async () => {
    const paths = await ensureFixture({ arch: 'qwen35', preset: 'tiny', mtp: true }, { hf: ['F32'], gguf: ['F32'] });
    const { metadata, tensors } = await readGGUF(fileSource(paths.gguf.F32!));
    expect(metadata.get('qwen35.block_count')).toBe(4);
    expect(configFromGGUF(metadata, tensors)).toMatchObject({ numLayers: 3, mtpLayers: 1 });
    const without = new Map(metadata);
    without.delete('qwen35.nextn_predict_layers');
    expect(configFromGGUF(without, tensors)).toMatchObject({ numLayers: 4, mtpLayers: 0 });
  });
});
