/**
 * Whether an EBNF grammar can end (issue #26 point 2). A rule is productive when one of its
 * alternatives consists only of terminals and productive rules; a grammar whose root is not
 * productive derives no finite string (`root ::= root`, `x ::= x "b"`), and one that reaches an
 * unproductive rule (or a character class that matches nothing) lets the output walk into a
 * dead end: xgrammar then masks every token, and no choice could ever finish. Both are the
 * caller's error, refused at compile time with a 400 naming the field.
 *
 * The analysis reads xgrammar's own normalized print of the grammar (`Grammar.toString()`), not
 * the caller's text: xgrammar has already resolved comments, escapes and the sugar (`*`, `+`,
 * `?`, groups, repetition ranges become rules of their own, named `<rule>_<n>`), so what is left
 * is rules of alternatives of strings, character classes (optionally starred), rule references
 * (optionally `{min, max}`), nested parentheses and lookahead assertions `(=...)`, which only
 * restrict what may follow and are left out here. Anything else makes the analysis give up
 * (null): it refuses a grammar only when it understood all of it.
 */
import { StructuredOutputError } from './errors';

type Expr =
  | { kind: 'alt'; items: Expr[] }
  | { kind: 'seq'; items: Expr[] }
  /** A string or starred class: always derives a finite string (maybe empty). */
  | { kind: 'terminal' }
  /** A class that matches no character (`[^\0-\U0010ffff]`). */
  | { kind: 'nothing'; text: string }
  /** A rule reference; `optional`: repeated with a minimum of 0. */
  | { kind: 'ref'; name: string; optional: boolean };

/** What a grammar cannot end on; null when every reachable rule can end. */
export interface DeadEnds {
  /** The root rule itself is unproductive: the grammar's language is empty. */
  root: boolean;
  /** Reachable rules that derive no finite string, in definition order. */
  rules: string[];
  /** Reachable character classes that match no character. */
  classes: string[];
}

const MAX_CODE_POINT = 0x10ffff;

/**
 * The dead ends of xgrammar's normalized grammar text (root rule `root`), null when there are
 * none, or `undefined` when the text holds a form this reader does not know (then nothing is refused).
 */
export function deadEnds(normalized: string, rootName = 'root'): DeadEnds | null | undefined {
  const rules = parseRules(normalized);
  if (!rules || !rules.has(rootName)) return undefined;
  for (const e of rules.values()) for (const name of refs(e)) if (!rules.has(name)) return undefined;
  const productive = productiveRules(rules);
  const reachable = reachableFrom(rootName, rules);
  const dead = [...rules.keys()].filter((n) => reachable.has(n) && !productive.has(n));
  const classes = [...reachable].flatMap((n) => nothings(rules.get(n)!));
  if (!dead.length && !classes.length) return null;
  return { root: !productive.has(rootName), rules: dead, classes };
}

/**
 * Refuses (StructuredOutputError naming `param`) a grammar with dead ends: `normalized` is
 * xgrammar's print of `source`; the message names the caller's own rules where it can (the
 * rules xgrammar made from groups and repetitions are named after the rule they came from).
 */
export function refuseDeadEnds(normalized: string, source: string, param: string): void {
  const dead = deadEnds(normalized);
  if (!dead) return;
  const own = new Set([...source.matchAll(/^[ \t]*([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*::=/gm)].map((m) => m[1]!));
  const named = dead.rules.filter((r) => own.has(r));
  const list = (xs: string[]) => xs.slice(0, 5).join(', ') + (xs.length > 5 ? `, and ${xs.length - 5} more` : '');
  const rules = named.length ? named : dead.rules;
  const why = [
    ...(rules.length ? [`${rules.length === 1 ? 'rule' : 'rules'} ${list(rules)} never ${rules.length === 1 ? 'ends' : 'end'} (every alternative needs a rule that never ends)`] : []),
    ...(dead.classes.length ? [`the character class ${list(dead.classes)} matches no character`] : []),
  ].join('; ');
  throw new StructuredOutputError(
    param,
    dead.root
      ? `${param}: the grammar derives no finite string: ${why}`
      : `${param}: output following the grammar could reach a point where it cannot end: ${why}`,
  );
}

/** The fixed point: rules become productive until none changes, each re-evaluated only when a rule it names became productive. */
function productiveRules(rules: Map<string, Expr>): Set<string> {
  const productive = new Set<string>();
  const users = new Map<string, Set<string>>();
  for (const [name, e] of rules) for (const r of refs(e)) (users.get(r) ?? users.set(r, new Set()).get(r)!).add(name);
  const queue = [...rules.keys()];
  while (queue.length) {
    const name = queue.pop()!;
    if (productive.has(name) || !derives(rules.get(name)!, productive)) continue;
    productive.add(name);
    for (const u of users.get(name) ?? []) if (!productive.has(u)) queue.push(u);
  }
  return productive;
}

function derives(e: Expr, productive: Set<string>): boolean {
  switch (e.kind) {
    case 'alt':
      return e.items.some((x) => derives(x, productive));
    case 'seq':
      return e.items.every((x) => derives(x, productive));
    case 'terminal':
      return true;
    case 'nothing':
      return false;
    case 'ref':
      return e.optional || productive.has(e.name);
  }
}

function refs(e: Expr, out: string[] = []): string[] {
  if (e.kind === 'alt' || e.kind === 'seq') for (const x of e.items) refs(x, out);
  else if (e.kind === 'ref') out.push(e.name);
  return out;
}

function nothings(e: Expr, out: string[] = []): string[] {
  if (e.kind === 'alt' || e.kind === 'seq') for (const x of e.items) nothings(x, out);
  else if (e.kind === 'nothing') out.push(e.text);
  return out;
}

function reachableFrom(root: string, rules: Map<string, Expr>): Set<string> {
  const seen = new Set([root]);
  const stack = [root];
  while (stack.length) for (const r of refs(rules.get(stack.pop()!)!)) if (!seen.has(r)) seen.add(r), stack.push(r);
  return seen;
}

// ---- The reader of xgrammar's print.

type Token = { t: 'name' | 'def' | '(' | '(=' | ')' | '|' | 'string' | 'class' | 'star' | 'repeat'; text: string; min?: number };

const NAME = /[A-Za-z_][A-Za-z0-9_.-]*/y;
const REPEAT = /\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}/y;

function tokenize(text: string): Token[] | null {
  const out: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (/\s/.test(c)) {
      i++;
    } else if (text.startsWith('::=', i)) {
      out.push({ t: 'def', text: '::=' });
      i += 3;
    } else if (text.startsWith('(=', i)) {
      out.push({ t: '(=', text: '(=' });
      i += 2;
    } else if (c === '(' || c === ')' || c === '|') {
      out.push({ t: c, text: c });
      i++;
    } else if (c === '*') {
      out.push({ t: 'star', text: c });
      i++;
    } else if (c === '"' || c === '[') {
      const close = c === '"' ? '"' : ']';
      let j = i + 1;
      while (j < text.length && text[j] !== close) j += text[j] === '\\' ? 2 : 1;
      if (j >= text.length) return null;
      out.push({ t: c === '"' ? 'string' : 'class', text: text.slice(i, j + 1) });
      i = j + 1;
    } else if (c === '{') {
      REPEAT.lastIndex = i;
      const m = REPEAT.exec(text);
      if (!m) return null;
      out.push({ t: 'repeat', text: m[0], min: Number(m[1]) });
      i += m[0].length;
    } else {
      NAME.lastIndex = i;
      const m = NAME.exec(text);
      if (!m) return null;
      out.push({ t: 'name', text: m[0] });
      i += m[0].length;
    }
  }
  return out;
}

/** Rules by name, or null for a form this reader does not know. */
function parseRules(text: string): Map<string, Expr> | null {
  const tokens = tokenize(text);
  if (!tokens) return null;
  const rules = new Map<string, Expr>();
  let i = 0;
  // An expression runs until `)` or the next `name ::=`.
  const atRuleStart = () => tokens[i]?.t === 'name' && tokens[i + 1]?.t === 'def';
  const alt = (): Expr | null => {
    const items: Expr[] = [];
    for (;;) {
      const s = seq();
      if (!s) return null;
      items.push(s);
      if (tokens[i]?.t !== '|') return { kind: 'alt', items };
      i++;
    }
  };
  const seq = (): Expr | null => {
    const items: Expr[] = [];
    while (i < tokens.length && !atRuleStart()) {
      const tok = tokens[i]!;
      if (tok.t === '|' || tok.t === ')') break;
      i++;
      let e: Expr | null;
      if (tok.t === 'string') e = { kind: 'terminal' };
      else if (tok.t === 'class') e = classMatchesNothing(tok.text) ? { kind: 'nothing', text: tok.text } : { kind: 'terminal' };
      else if (tok.t === 'name') e = { kind: 'ref', name: tok.text, optional: false };
      else if (tok.t === '(' || tok.t === '(=') {
        const inner = alt();
        if (!inner || tokens[i]?.t !== ')') return null;
        i++;
        // A lookahead restricts what follows; it derives nothing itself.
        e = tok.t === '(=' ? { kind: 'seq', items: [] } : inner;
      } else return null;
      // Postfix: `*` (zero or more) always derives the empty string; `{min, max}` does when min is 0.
      const post = tokens[i];
      if (post?.t === 'star' || (post?.t === 'repeat' && post.min === 0)) {
        i++;
        e = e.kind === 'ref' ? { ...e, optional: true } : { kind: 'terminal' };
      } else if (post?.t === 'repeat') i++;
      items.push(e);
    }
    return { kind: 'seq', items };
  };
  while (i < tokens.length) {
    if (!atRuleStart()) return null;
    const name = tokens[i]!.text;
    i += 2;
    const body = alt();
    if (!body || rules.has(name)) return null;
    rules.set(name, body);
  }
  return rules;
}

/** Whether a printed class `[...]` matches no code point: only a negated class can, by covering them all. */
function classMatchesNothing(text: string): boolean {
  if (!text.startsWith('[^')) return false;
  const ranges: [number, number][] = [];
  const body = text.slice(2, -1);
  for (let i = 0; i < body.length; ) {
    const lo = readChar(body, i);
    if (!lo) return false;
    i = lo.next;
    let hi = lo;
    if (body[i] === '-' && i + 1 < body.length) {
      const end = readChar(body, i + 1);
      if (!end) return false;
      hi = end;
      i = end.next;
    }
    ranges.push([lo.value, hi.value]);
  }
  ranges.sort((a, b) => a[0] - b[0]);
  let covered = -1;
  for (const [lo, hi] of ranges) {
    if (lo > covered + 1) return false;
    covered = Math.max(covered, hi);
  }
  return covered >= MAX_CODE_POINT;
}

const ESCAPES: Record<string, number> = { n: 10, r: 13, t: 9, '0': 0, f: 12, v: 11, b: 8, a: 7, e: 27 };

/** One character of a class body at `i` (xgrammar's escapes), or null for one it does not print. */
function readChar(s: string, i: number): { value: number; next: number } | null {
  if (s[i] !== '\\') {
    const value = s.codePointAt(i)!;
    return { value, next: i + (value > 0xffff ? 2 : 1) };
  }
  const e = s[i + 1];
  if (e === undefined) return null;
  const hex = (n: number) => (/^[0-9a-fA-F]+$/.test(s.slice(i + 2, i + 2 + n)) && s.length >= i + 2 + n ? { value: parseInt(s.slice(i + 2, i + 2 + n), 16), next: i + 2 + n } : null);
  if (e === 'x') return hex(2);
  if (e === 'u') return hex(4);
  if (e === 'U') return hex(8);
  if (e in ESCAPES) return { value: ESCAPES[e]!, next: i + 2 };
  return /[A-Za-z0-9]/.test(e) ? null : { value: e.codePointAt(0)!, next: i + 2 };
}
