/**
 * Finds added tokens (control tokens like `<|im_end|>`, user-defined ones like `<tool_call>`) in
 * text, as the tokenizer library does (longest match, left to right), but with a filter: a
 * special token is only taken as a token where the caller allows it. This is how user text
 * keeps a typed `<|im_end|>` as plain text while the template's own `<|im_end|>` stays a token.
 */

export interface AddedTokenInfo {
  id: number;
  content: string;
  special: boolean;
  lstrip: boolean;
  rstrip: boolean;
  normalized: boolean;
}

interface TrieNode {
  next: Map<string, TrieNode>;
  token?: AddedTokenInfo;
}

export class AddedTokenMatcher {
  private readonly root: TrieNode = { next: new Map() };

  constructor(tokens: readonly AddedTokenInfo[]) {
    for (const t of tokens) {
      let node = this.root;
      for (let k = 0; k < t.content.length; k++) {
        const ch = t.content[k]; // UTF-16 units, as split() walks them
        let n = node.next.get(ch);
        if (!n) node.next.set(ch, (n = { next: new Map() }));
        node = n;
      }
      node.token = t;
    }
  }

  /**
   * Splits `text` into plain sections and added tokens. `allow(token, start, end)` decides
   * whether a match counts; a refused match falls back to a shorter one at the same place.
   */
  split(text: string, allow: (t: AddedTokenInfo, start: number, end: number) => boolean): (string | AddedTokenInfo)[] {
    const out: (string | AddedTokenInfo)[] = [];
    let start = 0;
    let i = 0;
    while (i < text.length) {
      const found = this.longestAt(text, i, allow);
      if (found) {
        if (i > start) out.push(text.slice(start, i));
        out.push(found);
        i += found.content.length;
        start = i;
      } else i++;
    }
    if (start < text.length) out.push(text.slice(start));
    return out;
  }

  private longestAt(text: string, i: number, allow: (t: AddedTokenInfo, s: number, e: number) => boolean): AddedTokenInfo | undefined {
    const candidates: AddedTokenInfo[] = [];
    let node: TrieNode | undefined = this.root;
    for (let j = i; j < text.length; j++) {
      node = node.next.get(text[j]);
      if (!node) break;
      if (node.token) candidates.push(node.token);
    }
    for (let k = candidates.length - 1; k >= 0; k--) {
      const t = candidates[k];
      if (allow(t, i, i + t.content.length)) return t;
    }
    return undefined;
  }
}
