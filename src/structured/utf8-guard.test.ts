/**
 * The UTF-8 guard (issue #12, defect 3): the automaton agrees with a strict decoder on every
 * 1-2 byte sequence and on random longer ones; under a length-bounded JSON string xgrammar alone
 * allows tokens no UTF-8 text can hold, the guarded mask never does; and sampled structured
 * output through the API never holds U+FFFD.
 */
import Ajv from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type App } from '../api/app';
import { clientFor, loadRig, type Rig } from '../testing/api-rig';
import { Rng } from '../testing/fixtures/rng';
import type { TextTokenizer } from '../text/tokenizer';
import { compileConstraint } from './grammar';
import { UTF8_ACCEPT, utf8Step } from './utf8-guard';
import { loadXGrammar } from './xgrammar';

const strict = new TextDecoder('utf-8', { fatal: true });

/** The automaton's verdict: 'valid' (complete), 'prefix' (a valid text's start) or 'invalid'. */
function verdict(bytes: number[]): 'valid' | 'prefix' | 'invalid' {
  let s = UTF8_ACCEPT;
  for (const b of bytes) if ((s = utf8Step(s, b)) < 0) return 'invalid';
  return s === UTF8_ACCEPT ? 'valid' : 'prefix';
}

/** The decoder's verdict: valid alone, or a prefix some continuation completes. */
function decoderVerdict(bytes: number[]): 'valid' | 'prefix' | 'invalid' {
  const ok = (b: number[]) => {
    try {
      strict.decode(new Uint8Array(b));
      return true;
    } catch {
      return false;
    }
  };
  if (ok(bytes)) return 'valid';
  // Completing with 1-3 continuation bytes from the allowed ranges' corners covers every lead.
  const tails = [[0x80], [0xbf], [0x80, 0x80], [0xbf, 0xbf], [0x90, 0x80], [0x8f, 0x80], [0xa0, 0x80], [0x9f, 0x80], [0x80, 0x80, 0x80], [0x90, 0x80, 0x80], [0x8f, 0x80, 0x80]];
  for (const t of tails) for (let k = 1; k <= t.length; k++) if (ok([...bytes, ...t.slice(0, k)])) return 'prefix';
  return 'invalid';
}

describe('the UTF-8 automaton', () => {
  it('agrees with a strict decoder on every 1- and 2-byte sequence', () => {
    for (let a = 0; a < 256; a++) {
      expect(verdict([a]), `${a.toString(16)}`).toBe(decoderVerdict([a]));
      for (let b = 0; b < 256; b++) {
        const v = verdict([a, b]);
        if (v !== decoderVerdict([a, b])) expect(v, `${a.toString(16)} ${b.toString(16)}`).toBe(decoderVerdict([a, b]));
      }
    }
  });

  it('agrees on 20,000 random 3- and 4-byte sequences around the lead bytes with restrictions', () => {
    const rng = new Rng(7);
    const leads = [0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xe1, 0xf1, 0xc2, 0xc1];
    for (let i = 0; i < 20_000; i++) {
      const bytes = [leads[rng.int(leads.length)]!, ...Array.from({ length: 2 + rng.int(2) }, () => 0x70 + rng.int(0x60))];
      expect(verdict(bytes), bytes.map((b) => b.toString(16)).join(' ')).toBe(decoderVerdict(bytes));
    }
  });
});

let rig: Rig;
let tok: TextTokenizer;
let app: App;

beforeAll(async () => {
  rig = await loadRig();
  tok = rig.qwen.backend.tokenizer;
  app = createApp({ backends: [rig.qwen.backend] });
});
afterAll(() => rig?.close());

const bounded = { type: 'object', properties: { s: { type: 'string', maxLength: 6 } }, required: ['s'] };
const allowed = (mask: Int32Array | Uint32Array, id: number) => ((mask[id >>> 5]! >>> (id & 31)) & 1) === 1;
/** The byte-level token standing for one raw byte (GPT-2's alphabet: printable bytes stand for themselves). */
function byteToken(b: number): number {
  let extra = 0;
  for (let x = 0; x < b; x++) if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) extra++;
  const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const id = tok.tokenToId(String.fromCharCode(printable ? b : 256 + extra));
  expect(id, `a token for byte ${b.toString(16)}`).toBeDefined();
  return id!;
}

describe('constrained masks', () => {
  it('xgrammar alone allows an overlong lead byte inside a length-bounded string; the guarded mask never does', async () => {
    const prefix = tok.encode('{"s":"', { addSpecialTokens: false });
    // xgrammar alone, as the issue found it.
    const xg = await loadXGrammar();
    const info = await xg.TokenizerInfo.createTokenizerInfo([...tok.vocab], tok.vocabType, tok.prependSpace, tok.vocabSize, [...tok.eosIds]);
    const compiler = await xg.GrammarCompiler.createGrammarCompiler(info);
    const raw = await xg.GrammarMatcher.createGrammarMatcher(await compiler.compileJSONSchema(JSON.stringify(bounded), false, -1, [',', ':']));
    for (const id of prefix) expect(raw.acceptToken(id)).toBe(true);
    const rawMask = await raw.getNextTokenBitmask();
    const c1 = byteToken(0xc1);
    expect(allowed(rawMask, c1), 'xgrammar allows 0xC1').toBe(true);

    const c = await (await compileConstraint(tok, { kind: 'json_schema', schema: bounded })).start();
    for (const id of prefix) expect(c.accept(id)).toBe(true);
    const mask = new Uint32Array(c.words);
    await c.mask(mask);
    for (const b of [0xc0, 0xc1, 0xf5, 0xff, 0x80, 0xbf]) expect(allowed(mask, byteToken(b)), `byte ${b.toString(16)}`).toBe(false);
    expect(allowed(mask, byteToken(0xc3))).toBe(true);
    // Inside a character only its continuations may come: after E0, A0-BF; after ED, 80-9F.
    expect(c.accept(byteToken(0xed))).toBe(true);
    await c.mask(mask);
    expect(allowed(mask, byteToken(0x9f))).toBe(true);
    expect(allowed(mask, byteToken(0xa0)), 'a surrogate').toBe(false);
    expect(allowed(mask, tok.encode('a', { addSpecialTokens: false })[0]!)).toBe(false);
    // Rolled back (speculative decoding looks ahead through a proposal): the mask before the lead byte again.
    c.rollBack!(1);
    await c.mask(mask);
    expect(allowed(mask, byteToken(0xc3))).toBe(true);
    expect(allowed(mask, byteToken(0x9f)), 'a continuation without its lead').toBe(false);
    c.dispose();
  });

  it('never lets sampled structured output hold U+FFFD (24 seeds at temperature 2)', async () => {
    const client = clientFor(app);
    const ajv = new Ajv();
    const validate = ajv.compile(bounded);
    for (let seed = 0; seed < 24; seed++) {
      const r = await client.chat.completions.create({
        model: 'qwen3-tiny',
        messages: [{ role: 'user', content: 'Write it' }],
        temperature: 2,
        seed,
        max_tokens: 48,
        response_format: { type: 'json_schema', json_schema: { name: 'b', schema: bounded } },
        chat_template_kwargs: { enable_thinking: false },
      } as never);
      const text = r.choices[0]!.message.content ?? '';
      expect(text, `seed ${seed}`).not.toContain('\ufffd');
      if (r.choices[0]!.finish_reason === 'stop') expect(validate(JSON.parse(text)), `seed ${seed}: ${text}`).toBe(true);
    }
  }, 120_000);
});
