/**
 * Long texts tokenized off the event loop (issue #19): encodeAsync gives encode's ids for every
 * fixture family (byte-level BPE, SentencePiece-style BPE) and every option, and a timer keeps
 * ticking while a text that takes seconds in place is tokenized.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { longestStall } from '../testing/event-loop';
import { ensureFixture } from '../testing/fixtures/shared';
import corpus from '../testing/fixtures/corpus.txt?raw';
import { VARIED_TEXT } from './testdata/varied-text';
import { loadTextModel } from './from-model';
import { OFF_THREAD_CHARS, type EncodeOptions, type TextTokenizer } from './tokenizer';

const ARCHS = ['qwen3', 'mistral', 'llama'] as const;
const tokenizers = new Map<string, TextTokenizer>();

beforeAll(async () => {
  for (const arch of ARCHS) {
    const f = await ensureFixture({ arch, preset: 'tiny' }, { hf: ['F32'], gguf: [] });
    tokenizers.set(arch, loadTextModel(await openModel(f.hf.F32!)).tokenizer);
  }
});

/** `chars` characters of corpus and varied text, with the tokenizer's special tokens typed in here and there. */
function longText(tok: TextTokenizer, chars: number): string {
  const unit = `${corpus}\n${VARIED_TEXT}\n${tok.specialTokens.join(' ')} \n`;
  return unit.repeat(Math.ceil(chars / unit.length)).slice(0, chars);
}


describe('encodeAsync', () => {
  it.each(ARCHS)('gives encode\'s ids for a long text in the worker (%s), with every option', async (arch) => {
    const tok = tokenizers.get(arch)!;
    const text = longText(tok, 2 * OFF_THREAD_CHARS);
    const cases: EncodeOptions[] = [
      {},
      { addSpecialTokens: false },
      { parseSpecial: false },
      { addSpecialTokens: false, literalRanges: [[100, 5000], [20_000, 30_000]] },
    ];
    for (const options of cases) expect(await tok.encodeAsync!(text, options), JSON.stringify(options)).toEqual(tok.encode(text, options));
  });

  it('gives encode\'s ids for a short text (tokenized in place)', async () => {
    const tok = tokenizers.get('qwen3')!;
    expect(await tok.encodeAsync!(VARIED_TEXT)).toEqual(tok.encode(VARIED_TEXT));
  });

  it('keeps the event loop running while a text of seconds is tokenized', async () => {
    const tok = tokenizers.get('mistral')!;
    const options: EncodeOptions = { addSpecialTokens: false, literalRanges: [[0, 1000]] };
    // A text that holds the loop for at least 400 ms in place, however fast this machine is
    // (about a second at 400k characters on the 2-core CI host).
    let text = longText(tok, 400_000);
    tok.encode(text, options); // warm
    let want: number[];
    let inPlace: number;
    for (;;) {
      const t = performance.now();
      want = tok.encode(text, options);
      inPlace = performance.now() - t;
      if (inPlace >= 400 || text.length >= 6_400_000) break;
      text = longText(tok, text.length * 2);
    }
    // The worker's start and the first run's compiles and allocations are not what is timed.
    await tok.encodeAsync!(text, options);
    let ids: number[] = [];
    const stall = await longestStall(async () => (ids = await tok.encodeAsync!(text, options)));
    expect(ids).toEqual(want);
    // In the worker only the special-token split and the copies of the text and the ids run on
    // this thread (tens of ms).
    expect(inPlace).toBeGreaterThanOrEqual(400);
    expect(stall).toBeLessThan(inPlace / 3);
  }, 120_000);
});
