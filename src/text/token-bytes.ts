/** A token's text and raw bytes, for logprobs (a token may hold only part of a UTF-8 character). */
import type { TextTokenizer } from './tokenizer';

let byteLevelDecoder: Map<string, number> | undefined;

/** GPT-2's byte-level alphabet reversed: the printable character standing for each byte → the byte. */
function byteLevel(): Map<string, number> {
  if (byteLevelDecoder) return byteLevelDecoder;
  const m = new Map<string, number>();
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    m.set(String.fromCharCode(printable ? b : 256 + extra++), b);
  }
  return (byteLevelDecoder = m);
}

const utf8 = new TextEncoder();

export function tokenText(tok: TextTokenizer, id: number): string {
  return tok.decode([id]);
}

/** The bytes a token stands for: from its vocabulary string where the encoding is known, else its text. */
export function tokenBytes(tok: TextTokenizer, id: number): number[] {
  const piece = tok.vocab[id] ?? '';
  if (!tok.specialIds.has(id) && piece) {
    if (tok.vocabType === 'byte_level') {
      const table = byteLevel();
      const bytes: number[] = [];
      for (const ch of piece) {
        const b = table.get(ch);
        if (b === undefined) return [...utf8.encode(tokenText(tok, id))];
        bytes.push(b);
      }
      return bytes;
    }
    if (tok.vocabType === 'byte_fallback') {
      const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(piece);
      if (m) return [parseInt(m[1], 16)];
      return [...utf8.encode(piece.replace(/\u2581/g, ' '))];
    }
  }
  return [...utf8.encode(tokenText(tok, id))];
}
