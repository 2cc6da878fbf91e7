/**
 * A synthetic byte-level BPE vocabulary of a real model's size (Llama 3: 128,256 ids; Qwen2:
 * 151,936), generated deterministically, so the grammar mask can be timed at a realistic
 * vocabulary without downloading a tokenizer. Regular tokens are written in GPT-2's byte-level
 * alphabet (space = Ġ, newline = Ċ), as a real tokenizer.json has them: the 256 byte symbols, JSON
 * punctuation pieces, whitespace runs, 1-3 digit numbers, punctuation runs, English words with and
 * without a leading space, stems with suffixes and prefixes, then pronounceable pseudo-words until
 * the size is reached. The last ids are special tokens (`<|...|>`), as in Llama 3.
 *
 * `SyntheticTokenizer` implements the project's `TextTokenizer`, so the grammar code takes it as it
 * takes a model's tokenizer; it encodes by greedy longest match (not BPE merges, which a timing of
 * the mask does not need: the grammar accepts any tokenization of a valid text).
 */
import type { TextTokenizer, VocabType } from '../text/tokenizer';
import { bytesToUnicode, byteVocabOrder } from '../testing/fixtures/bpe-train';
import { Rng } from '../testing/fixtures/rng';

/** Llama 3's vocabulary size (128,000 BPE tokens + 256 special tokens). */
export const LLAMA3_VOCAB = 128_256;

const WORDS = `the of and to in is was for that on with as by at from it his an were are which be this
has had not first one their its new after but who they have her she two been other when there all
during into school time may years more most only over city some world would where later up such
used many can state about national out known university united then made between year under like
three so while these made high part well since also during being before any each own team people
called member work life game number area because place group both second music part found around
family film water series early them won best long home however against several company way war
album did song use although name town well through year three released played season could day
until back named power system house end line local four around area good make government small take
great last set under public day large power right still last county left data value value string
object array number field type list index count total price amount user order item product status
message error result query table model token tokens request response content text title label
description url path file image size width height color date created updated version source target
config option setting params key name email phone address street country region code level score
rank weight length offset limit page section chapter story character world light water fire earth
river mountain forest ocean island north south east west king queen house garden village market
letter answer question reason problem example history science language music picture animal
children mother father brother sister friend teacher student doctor office report record program
service support account client server network memory process thread signal channel buffer stream
function method class interface module package library document element attribute property event
handler action context session window screen button input output format parse render update delete
insert select create remove append search filter sort merge split join match replace encode decode
compute measure train test check valid invalid enable disable start stop open close read write load
save send receive connect accept reject allow block apply ignore follow return break continue yield
quick brown fox jumps lazy dog morning evening night summer winter spring autumn happy simple strong
important different possible available special general political social economic human natural
physical personal financial cultural medical legal private recent modern ancient common certain`;

const SUFFIXES = 's es ed ing er ers est ly ion ions tion tions ation ment ments ness ity ities able ible al ial ful less ous ive ize ized izes ise ism ist ists ance ence ant ent ary ory ure age ship hood dom ward wise like ish y ies ier iest'.split(' ');
const PREFIXES = 'un re in dis en non pre pro over under sub super inter trans anti auto co de ex mis out semi multi micro mega post mid fore'.split(' ');
/** JSON pieces BPE tokenizers learn from code and data (plain text; encoded below). */
const JSON_PIECES = [
  '{"', '"}', '":', '":"', '","', '",', '"]', '["', '[{', '}]', '},', '},{', '},{"', '":{', '":{"', '":[', '":["', '":[{', '"]}', '"}]',
  '"},', '"}}', '}}', '}}}', ']]', '[]', '{}', '":"', '":', '": ', '": "', '", "', '{\n', '}\n', '},\n', '],\n', '"\n', '",\n', '":true', '":false',
  '":null', 'true', 'false', 'null', ' true', ' false', ' null', '\\n', '\\"', '\\\\', '\\u', '\\t', '//', '/*', '*/', '://', 'https', 'http', 'www', '.com',
  '.org', '.json', '.py', '.js', '.ts', '...', '..', '->', '=>', '==', '===', '!=', '<=', '>=', '&&', '||', '::', ');', '();', '()', '")', '("', "('", "')",
];
const PUNCT = ['.', ',', ':', ';', '!', '?', '"', "'", '(', ')', '[', ']', '{', '}', '-', '_', '/', '\\', '*', '&', '#', '%', '=', '+', '<', '>', '|', '@', '$', '`', '~', '^'];
const ONSETS = 'b c d f g h j k l m n p r s t v w z br cr dr fr gr pr tr bl cl fl gl pl sl sh ch th wh st sp sk sm sn qu str'.split(' ');
const VOWELS = 'a e i o u y ai ea ee ie oo ou oa au'.split(' ');
const CODAS = ' n r s t l m d ng nd st rt ck ct nt ll ss x'.split(' ');

export interface SyntheticVocab {
  /** Token strings by id: byte-level symbols for regular tokens, literal text for special ones. */
  tokens: string[];
  /** The first special token's id; every id from here on is special. */
  specialStart: number;
  /** `<|end_of_text|>` and `<|eot_id|>`. */
  eosIds: number[];
  bosId: number;
}

/** Special tokens at the end of a vocabulary of `size`: 256 for a real-sized one, fewer for small test vocabularies. */
export function specialCount(size: number): number {
  return Math.min(256, Math.floor(size / 64));
}

/** The vocabulary of `size` ids (deterministic: the same strings for the same size). */
export function syntheticVocab(size = LLAMA3_VOCAB): SyntheticVocab {
  const specials = specialCount(size);
  const regular = size - specials;
  if (regular < 256 + 8) throw new RangeError(`a synthetic vocabulary needs at least ${256 + 8 + specialCount(264)} ids, got ${size}`);
  const table = bytesToUnicode();
  const utf8 = new TextEncoder();
  const seen = new Set<string>();
  const tokens: string[] = [];
  const addEncoded = (piece: string) => {
    if (tokens.length < regular && !seen.has(piece)) {
      seen.add(piece);
      tokens.push(piece);
    }
  };
  const add = (text: string) => tokens.length < regular && addEncoded(Array.from(utf8.encode(text), (b) => table[b]!).join(''));
  for (const sym of byteVocabOrder()) addEncoded(sym);
  for (const p of JSON_PIECES) add(p);
  for (let k = 2; k <= 32; k++) add(' '.repeat(k));
  for (let k = 0; k <= 32; k++) add('\n' + ' '.repeat(k));
  for (let k = 1; k <= 8; k++) add('\t'.repeat(k)), add('\n' + '\t'.repeat(k)), add('\n'.repeat(k + 1));
  for (let n = 0; n < 1000; n++) add(String(n));
  for (let n = 0; n < 100; n++) add(String(n).padStart(2, '0')), add(String(n).padStart(3, '0'));
  for (const a of PUNCT) for (const b of PUNCT) add(a + b), add(' ' + a), add(' ' + a + b);
  const words = [...new Set(WORDS.split(/\s+/).filter(Boolean))];
  const cap = (w: string) => w[0]!.toUpperCase() + w.slice(1);
  const variants = (w: string) => [' ' + w, w, ' ' + cap(w), cap(w), '"' + w, ' "' + w, w + '"', '"' + w + '":', ' ' + w.toUpperCase()];
  for (const w of words) for (const v of variants(w)) add(v);
  // Subword pieces: a word's prefixes (what BPE merges build up through) and stems with affixes.
  for (const w of words) for (let n = 2; n < w.length; n++) add(w.slice(0, n)), add(' ' + w.slice(0, n));
  for (const w of words) add('_' + w), add(w + '_'), add('.' + w), add(w + '('), add('.' + w + '(');
  for (const w of words) for (const s of SUFFIXES.slice(0, 24)) add(w + s), add(' ' + w + s);
  for (const p of PREFIXES.slice(0, 16)) for (const w of words) add(p + w), add(' ' + p + w);
  for (const w of words) for (const s of SUFFIXES.slice(0, 24)) add(' ' + cap(w) + s);
  // Other scripts: CJK characters one per token, Cyrillic letter pairs with and without a space.
  for (let c = 0x4e00; c < 0x4e00 + 3000; c++) add(String.fromCodePoint(c));
  for (let a = 0x430; a < 0x450; a++) for (let b = 0x430; b < 0x450; b++) add(String.fromCodePoint(a, b)), add(' ' + String.fromCodePoint(a, b));
  // Pseudo-words for the long tail: mostly one or two syllables, half with a leading space.
  const rng = new Rng('synthetic-vocab');
  const pick = (list: string[]) => list[rng.int(list.length)]!;
  while (tokens.length < regular) {
    let w = '';
    const r = rng.int(20);
    for (let n = r < 9 ? 1 : r < 17 ? 2 : 3; n > 0; n--) w += pick(ONSETS) + pick(VOWELS) + pick(CODAS);
    const style = rng.int(4);
    add(style === 0 ? w : style === 1 ? cap(w) : style === 2 ? ' ' + cap(w) : ' ' + w);
  }
  const specialNames = ['<|begin_of_text|>', '<|end_of_text|>', '<|start_header_id|>', '<|end_header_id|>', '<|eot_id|>', '<|eom_id|>', '<|python_tag|>'];
  for (let i = 0; i < specials; i++) tokens.push(specialNames[i] ?? `<|reserved_special_token_${i - specialNames.length}|>`);
  const idOf = (name: string) => tokens.lastIndexOf(name);
  return { tokens, specialStart: regular, bosId: idOf('<|begin_of_text|>'), eosIds: [idOf('<|end_of_text|>'), idOf('<|eot_id|>')].filter((i) => i >= regular) };
}

/** A `TextTokenizer` over a synthetic vocabulary: greedy longest-match encoding, exact decoding. */
export class SyntheticTokenizer implements TextTokenizer {
  readonly vocab: readonly string[];
  readonly vocabSize: number;
  readonly vocabType: VocabType = 'byte_level';
  readonly prependSpace = false;
  readonly bosId: number;
  readonly eosIds: readonly number[];
  readonly specialIds: ReadonlySet<number>;
  readonly specialTokens: readonly string[];
  readonly addBos = false;
  readonly addEos = false;
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  readonly chatTemplate = null;
  private readonly ids = new Map<string, number>();
  private readonly longest: number;
  private readonly table = bytesToUnicode();
  private readonly byteOf = new Map(this.table.map((ch, b) => [ch, b]));

  constructor(v: SyntheticVocab) {
    this.vocab = v.tokens;
    this.vocabSize = v.tokens.length;
    this.bosId = v.bosId;
    this.eosIds = v.eosIds;
    const special = v.tokens.slice(v.specialStart);
    this.specialTokens = special;
    this.specialIds = new Set(special.map((_, i) => v.specialStart + i));
    this.bosToken = v.tokens[v.bosId] ?? null;
    this.eosToken = v.tokens[v.eosIds[0] ?? -1] ?? null;
    let longest = 1;
    for (let id = 0; id < v.specialStart; id++) {
      this.ids.set(v.tokens[id]!, id);
      longest = Math.max(longest, v.tokens[id]!.length);
    }
    this.longest = longest;
  }

  /** Greedy longest match over the text's byte-level symbols (special tokens never match). */
  encode(text: string): number[] {
    const symbols = Array.from(new TextEncoder().encode(text), (b) => this.table[b]!).join('');
    const out: number[] = [];
    for (let i = 0; i < symbols.length; ) {
      for (let n = Math.min(this.longest, symbols.length - i); ; n--) {
        const id = this.ids.get(symbols.slice(i, i + n));
        if (id !== undefined) {
          out.push(id);
          i += n;
          break;
        }
        // Every byte symbol is a token, so n = 1 always matches.
      }
    }
    return out;
  }

  decode(ids: readonly number[], options: { skipSpecialTokens?: boolean } = {}): string {
    let text = '';
    let bytes: number[] = [];
    const flush = () => {
      text += new TextDecoder().decode(new Uint8Array(bytes));
      bytes = [];
    };
    for (const id of ids) {
      const piece = this.vocab[id];
      if (piece === undefined) throw new RangeError(`token id ${id} is outside the vocabulary (0..${this.vocabSize - 1})`);
      if (this.specialIds.has(id)) {
        flush();
        if (!options.skipSpecialTokens) text += piece;
        continue;
      }
      for (const ch of piece) bytes.push(this.byteOf.get(ch)!);
    }
    flush();
    return text;
  }

  idToToken(id: number): string | undefined {
    return this.vocab[id];
  }

  tokenToId(token: string): number | undefined {
    const special = this.specialTokens.indexOf(token);
    return special >= 0 ? this.vocabSize - this.specialTokens.length + special : this.ids.get(token);
  }
}
