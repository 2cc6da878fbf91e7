/**
 * Python's `str` methods, as chat templates call them inside jinja2 (`content.lstrip("\n")`,
 * `content.split('</think>')[-1]`). JavaScript's look-alikes differ (`trimStart()` strips every
 * space where `lstrip("\n")` strips only newlines; `\s` is not Python's whitespace; indices
 * count UTF-16 units where Python counts code points), so each method is written here after
 * Python's definition and checked against Python itself (py-str.test.ts). jinja-env.ts calls
 * these for method calls on strings and for jinja2's string filters.
 *
 * Values are plain JavaScript: strings, numbers, booleans, null, arrays (Python tuples and
 * lists). A call Python would reject throws PyStrError.
 */

export class PyStrError extends Error {
  constructor(readonly pyType: 'TypeError' | 'ValueError', message: string) {
    super(`${pyType}: ${message}`);
    this.name = 'PyStrError';
  }
}

// str.isspace(): Unicode White_Space plus the separators \x1c-\x1f (not \ufeff, which \s has).
const SPACE = new Set(Array.from('\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000'));
// Line boundaries of str.splitlines() (\r\n counts as one).
const LINE_BREAK = new Set(Array.from('\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029'));
// Numeric_Type=Digit without being decimal (superscripts, circled digits...): isdigit() but not isdecimal().
const DIGIT_NOT_DECIMAL =
  /[\u{B2}-\u{B3}\u{B9}\u{1369}-\u{1371}\u{19DA}\u{2070}\u{2074}-\u{2079}\u{2080}-\u{2089}\u{2460}-\u{2468}\u{2474}-\u{247C}\u{2488}-\u{2490}\u{24EA}\u{24F5}-\u{24FD}\u{24FF}\u{2776}-\u{277E}\u{2780}-\u{2788}\u{278A}-\u{2792}\u{10A40}-\u{10A43}\u{10E60}-\u{10E68}\u{11052}-\u{1105A}\u{1F100}-\u{1F10A}]/u;
// Ideographs with a numeric value (一, 二, 百, 萬...): isnumeric() though their category is Lo.
const NUMERIC_IDEOGRAPH =
  /[\u{3405}\u{3483}\u{382A}\u{3B4D}\u{4E00}\u{4E03}\u{4E07}\u{4E09}\u{4E5D}\u{4E8C}\u{4E94}\u{4E96}\u{4EBF}-\u{4EC0}\u{4EDF}\u{4EE8}\u{4F0D}\u{4F70}\u{5104}\u{5146}\u{5169}\u{516B}\u{516D}\u{5341}\u{5343}-\u{5345}\u{534C}\u{53C1}-\u{53C4}\u{56DB}\u{58F1}\u{58F9}\u{5E7A}\u{5EFE}-\u{5EFF}\u{5F0C}-\u{5F0E}\u{5F10}\u{62FE}\u{634C}\u{67D2}\u{6F06}\u{7396}\u{767E}\u{8086}\u{842C}\u{8CAE}\u{8CB3}\u{8D30}\u{9621}\u{9646}\u{964C}\u{9678}\u{96F6}\u{F96B}\u{F973}\u{F978}\u{F9B2}\u{F9D1}\u{F9D3}\u{F9FD}\u{20001}\u{20064}\u{200E2}\u{20121}\u{2092A}\u{20983}\u{2098C}\u{2099C}\u{20AEA}\u{20AFD}\u{20B19}\u{22390}\u{22998}\u{23B1B}\u{2626D}\u{2F890}]/u;

const isSpace = (c: string) => SPACE.has(c);
const isDecimal = (c: string) => /\p{Nd}/u.test(c);
const isDigit = (c: string) => isDecimal(c) || DIGIT_NOT_DECIMAL.test(c);
const isNumeric = (c: string) => /\p{N}/u.test(c) || NUMERIC_IDEOGRAPH.test(c);
const isAlpha = (c: string) => /\p{L}/u.test(c);
const isUpper = (c: string) => /\p{Uppercase}/u.test(c);
const isLower = (c: string) => /\p{Lowercase}/u.test(c);
const isTitle = (c: string) => /\p{Lt}/u.test(c);
const isCased = (c: string) => isUpper(c) || isLower(c) || isTitle(c);

// Title case of the letters whose upper case is not their title case (the DŽ/LJ/NJ/DZ digraphs).
const TITLE: Record<string, string> = {
  'Ǆ': 'ǅ', 'ǅ': 'ǅ', 'ǆ': 'ǅ', 'Ǉ': 'ǈ', 'ǈ': 'ǈ', 'ǉ': 'ǈ',
  'Ǌ': 'ǋ', 'ǋ': 'ǋ', 'ǌ': 'ǋ', 'Ǳ': 'ǲ', 'ǲ': 'ǲ', 'ǳ': 'ǲ',
};
// Ligatures whose upper case is several letters: the title case capitalises only the first (ß → Ss, ﬁ → Fi).
const LIGATURE = /[\u00DF\uFB00-\uFB06\uFB13-\uFB17]/u;

function titleChar(c: string): string {
  if (TITLE[c]) return TITLE[c];
  const u = c.toUpperCase();
  if (!LIGATURE.test(c)) return u;
  const [first, ...rest] = Array.from(u);
  return first + rest.join('').toLowerCase();
}

/** One code point at a time, so no context rule (final sigma) applies, as in Python's casefold. */
function casefold(s: string): string {
  return Array.from(s, (c) => (c === 'ı' ? c : c.toUpperCase().toLowerCase())).join('');
}

// ---------------------------------------------------------------------------------------------
// Argument checks (the messages follow Python's)

function str(v: unknown, what: string): string {
  if (typeof v !== 'string') throw new PyStrError('TypeError', `${what} must be str, not ${pyTypeName(v)}`);
  return v;
}

function optStr(v: unknown, what: string): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw new PyStrError('TypeError', `${what} must be None or str, not ${pyTypeName(v)}`);
  return v;
}

function int(v: unknown, what: string, dflt: number): number {
  if (v === undefined) return dflt;
  if (typeof v === 'boolean') return v ? 1 : 0; // bool is an int in Python
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new PyStrError('TypeError', `${what}: '${pyTypeName(v)}' object cannot be interpreted as an integer`);
  return v;
}

/** Slice bounds as str.find's start/end: None means the default; both clamp like a slice. */
function bounds(len: number, start: unknown, end: unknown): [number, number] {
  let a = start === undefined || start === null ? 0 : int(start, 'slice indices', 0);
  let b = end === undefined || end === null ? len : int(end, 'slice indices', len);
  if (b > len) b = len;
  else if (b < 0) b = Math.max(0, b + len);
  if (a < 0) a = Math.max(0, a + len);
  return [a, b];
}

function pyTypeName(v: unknown): string {
  if (v === null || v === undefined) return 'NoneType';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int' : 'float';
  if (typeof v === 'string') return 'str';
  if (Array.isArray(v)) return 'list';
  return 'dict';
}

// ---------------------------------------------------------------------------------------------
// The methods, on code points

function strip(s: string, chars: unknown, left: boolean, right: boolean, what: string): string {
  const set = optStr(chars, `${what} arg`);
  const drop = set === null ? isSpace : (c: string) => set.includes(c);
  const cps = Array.from(s);
  let i = 0;
  let j = cps.length;
  if (left) while (i < j && drop(cps[i])) i++;
  if (right) while (j > i && drop(cps[j - 1])) j--;
  return cps.slice(i, j).join('');
}

function splitWhitespace(s: string, maxsplit: number, fromRight: boolean): string[] {
  const cps = Array.from(s);
  if (fromRight) cps.reverse();
  const out: string[] = [];
  let i = 0;
  while (i < cps.length) {
    while (i < cps.length && isSpace(cps[i])) i++;
    if (i === cps.length) break;
    if (maxsplit >= 0 && out.length === maxsplit) {
      // The rest keeps its inner and trailing whitespace.
      out.push(fromRight ? cps.slice(i).reverse().join('') : cps.slice(i).join(''));
      break;
    }
    let j = i;
    while (j < cps.length && !isSpace(cps[j])) j++;
    out.push(fromRight ? cps.slice(i, j).reverse().join('') : cps.slice(i, j).join(''));
    i = j;
  }
  return fromRight ? out.reverse() : out;
}

function split(s: string, sepArg: unknown, maxArg: unknown, fromRight: boolean): string[] {
  const sep = optStr(sepArg, 'sep');
  const maxsplit = int(maxArg, 'maxsplit', -1);
  if (sep === null) return splitWhitespace(s, maxsplit, fromRight);
  if (sep === '') throw new PyStrError('ValueError', 'empty separator');
  const parts = s.split(sep);
  if (maxsplit < 0 || parts.length - 1 <= maxsplit) return parts;
  return fromRight
    ? [parts.slice(0, parts.length - maxsplit).join(sep), ...parts.slice(parts.length - maxsplit)]
    : [...parts.slice(0, maxsplit), parts.slice(maxsplit).join(sep)];
}

function splitlines(s: string, keepends: unknown): string[] {
  const keep = !!keepends;
  const cps = Array.from(s);
  const out: string[] = [];
  let start = 0;
  for (let i = 0; i < cps.length; i++) {
    if (!LINE_BREAK.has(cps[i])) continue;
    const end = cps[i] === '\r' && cps[i + 1] === '\n' ? i + 2 : i + 1;
    out.push(cps.slice(start, keep ? end : i).join(''));
    start = end;
    i = end - 1;
  }
  if (start < cps.length) out.push(cps.slice(start).join(''));
  return out;
}

/** str.find / rfind / count / startswith / endswith look at s[start:end], in code points. */
function window(s: string, start: unknown, end: unknown): { cps: string[]; a: number; b: number; text: string } {
  const cps = Array.from(s);
  const [a, b] = bounds(cps.length, start, end);
  return { cps, a, b, text: cps.slice(a, Math.max(a, b)).join('') };
}

const cpLength = (s: string) => Array.from(s).length;

function find(s: string, subArg: unknown, start: unknown, end: unknown, fromRight: boolean): number {
  const sub = str(subArg, 'must be str');
  const w = window(s, start, end);
  if (w.b - w.a < cpLength(sub)) return -1;
  const at = fromRight ? w.text.lastIndexOf(sub) : w.text.indexOf(sub);
  return at < 0 ? -1 : w.a + cpLength(w.text.slice(0, at));
}

function count(s: string, subArg: unknown, start: unknown, end: unknown): number {
  const sub = str(subArg, 'must be str');
  const w = window(s, start, end);
  if (w.b - w.a < cpLength(sub)) return 0;
  if (sub === '') return w.b - w.a + 1;
  return w.text.split(sub).length - 1;
}

function affix(s: string, arg: unknown, start: unknown, end: unknown, name: 'startswith' | 'endswith'): boolean {
  const options = Array.isArray(arg) ? arg : [arg];
  if (options.some((x) => typeof x !== 'string'))
    throw new PyStrError('TypeError', `${name} first arg must be str or a tuple of str, not ${pyTypeName(Array.isArray(arg) ? options.find((x) => typeof x !== 'string') : arg)}`);
  const w = window(s, start, end);
  return (options as string[]).some((x) => w.b - w.a >= cpLength(x) && (name === 'startswith' ? w.text.startsWith(x) : w.text.endsWith(x)));
}

function replace(s: string, oldArg: unknown, newArg: unknown, countArg: unknown): string {
  const old = str(oldArg, 'replace() argument 1');
  const repl = str(newArg, 'replace() argument 2');
  let n = int(countArg, 'count', -1);
  if (n < 0) n = Infinity;
  if (old === '') {
    // Python inserts before every code point and at the end.
    const cps = Array.from(s);
    let out = '';
    for (let i = 0; i <= cps.length; i++) {
      if (i < n) out += repl;
      if (i < cps.length) out += cps[i];
    }
    return out;
  }
  const parts = s.split(old);
  if (parts.length - 1 <= n) return parts.join(repl);
  return parts.slice(0, n + 1).join(repl) + old + parts.slice(n + 1).join(old);
}

function partition(s: string, sepArg: unknown, fromRight: boolean): string[] {
  const sep = str(sepArg, 'must be str');
  if (sep === '') throw new PyStrError('ValueError', 'empty separator');
  const at = fromRight ? s.lastIndexOf(sep) : s.indexOf(sep);
  if (at < 0) return fromRight ? ['', '', s] : [s, '', ''];
  return [s.slice(0, at), sep, s.slice(at + sep.length)];
}

function title(s: string): string {
  let prevCased = false;
  let out = '';
  for (const c of s) {
    out += prevCased ? c.toLowerCase() : titleChar(c);
    prevCased = isCased(c);
  }
  return out;
}

function capitalize(s: string): string {
  const [first, ...rest] = Array.from(s);
  return first === undefined ? '' : titleChar(first) + rest.join('').toLowerCase();
}

function swapcase(s: string): string {
  return Array.from(s, (c) => (isUpper(c) ? c.toLowerCase() : isLower(c) ? c.toUpperCase() : c)).join('');
}

const every = (s: string, test: (c: string) => boolean) => s.length > 0 && Array.from(s).every(test);

/** isupper()/islower(): at least one cased letter, none of the other case (title case counts as neither). */
function caseIs(s: string, upper: boolean): boolean {
  let cased = false;
  for (const c of s) {
    if (isTitle(c) || (upper ? isLower(c) : isUpper(c))) return false;
    if (upper ? isUpper(c) : isLower(c)) cased = true;
  }
  return cased;
}

function istitle(s: string): boolean {
  let cased = false;
  let prevCased = false;
  for (const c of s) {
    if (isUpper(c) || isTitle(c)) {
      if (prevCased) return false;
      prevCased = cased = true;
    } else if (isLower(c)) {
      if (!prevCased) return false;
      prevCased = cased = true;
    } else prevCased = false;
  }
  return cased;
}

function fillChar(v: unknown, name: string): string {
  if (v === undefined) return ' ';
  if (typeof v !== 'string' || cpLength(v) !== 1) throw new PyStrError('TypeError', `${name}() argument 2 must be a character`);
  return v;
}

function pad(s: string, widthArg: unknown, fillArg: unknown, name: 'center' | 'ljust' | 'rjust'): string {
  const width = int(widthArg, name, 0);
  const fill = fillChar(fillArg, name);
  const len = cpLength(s);
  if (len >= width) return s;
  const marg = width - len;
  // CPython's centring puts the odd column left when both the margin and the width are odd.
  const left = name === 'ljust' ? 0 : name === 'rjust' ? marg : Math.floor(marg / 2) + (marg & width & 1);
  return fill.repeat(left) + s + fill.repeat(marg - left);
}

function zfill(s: string, widthArg: unknown): string {
  const width = int(widthArg, 'zfill', 0);
  const len = cpLength(s);
  if (len >= width) return s;
  const sign = s[0] === '+' || s[0] === '-' ? s[0] : '';
  return sign + '0'.repeat(width - len) + s.slice(sign.length);
}

function expandtabs(s: string, sizeArg: unknown): string {
  const size = int(sizeArg, 'tabsize', 8);
  let out = '';
  let col = 0;
  for (const c of s) {
    if (c === '\t') {
      const n = size > 0 ? size - (col % size) : 0;
      out += ' '.repeat(n);
      col += n;
    } else {
      out += c;
      col = c === '\n' || c === '\r' ? 0 : col + 1;
    }
  }
  return out;
}

function join(sep: string, items: unknown): string {
  const list = typeof items === 'string' ? Array.from(items) : items;
  if (!Array.isArray(list)) throw new PyStrError('TypeError', 'can only join an iterable');
  list.forEach((x, i) => {
    if (typeof x !== 'string') throw new PyStrError('TypeError', `sequence item ${i}: expected str instance, ${pyTypeName(x)} found`);
  });
  return list.join(sep);
}

/**
 * str.format with `{}`, `{0}`, `{name}` and `{{ }}`; the arguments come already turned into
 * Python's str() of each value. Format specs, conversions and attribute lookups are refused
 * rather than guessed.
 */
export function format(s: string, args: readonly string[], kwargs: ReadonlyMap<string, string>): string {
  let auto = 0;
  return s.replace(/\{\{|\}\}|\{([^{}]*)\}|[{}]/g, (m, field: string | undefined) => {
    if (m === '{{') return '{';
    if (m === '}}') return '}';
    if (field === undefined) throw new PyStrError('ValueError', `Single '${m}' encountered in format string`);
    if (!/^(\d+|[A-Za-z_]\w*)?$/.test(field))
      throw new PyStrError('ValueError', `format field {${field}}: only {}, {0} and {name} are supported in templates here`);
    if (field === '') {
      if (auto >= args.length) throw new PyStrError('ValueError', `Replacement index ${auto} out of range for positional args tuple`);
      return args[auto++];
    }
    if (/^\d+$/.test(field)) {
      const i = Number(field);
      if (i >= args.length) throw new PyStrError('ValueError', `Replacement index ${i} out of range for positional args tuple`);
      return args[i];
    }
    const v = kwargs.get(field);
    if (v === undefined) throw new PyStrError('ValueError', `KeyError: '${field}'`);
    return v;
  });
}

// ---------------------------------------------------------------------------------------------
// The table

interface StrMethod {
  /** Parameter names, in order. */
  params: readonly string[];
  /** How many must be given. */
  required?: number;
  /** Those Python lets a caller name (most str methods take positional arguments only). */
  keywords?: readonly string[];
  call(s: string, a: readonly unknown[]): unknown;
}

/** Python str methods by name: every method of str that a template can reasonably call. */
export const STR_METHODS: Readonly<Record<string, StrMethod>> = {
  strip: { params: ['chars'], call: (s, a) => strip(s, a[0], true, true, 'strip') },
  lstrip: { params: ['chars'], call: (s, a) => strip(s, a[0], true, false, 'lstrip') },
  rstrip: { params: ['chars'], call: (s, a) => strip(s, a[0], false, true, 'rstrip') },
  split: { params: ['sep', 'maxsplit'], keywords: ['sep', 'maxsplit'], call: (s, a) => split(s, a[0], a[1], false) },
  rsplit: { params: ['sep', 'maxsplit'], keywords: ['sep', 'maxsplit'], call: (s, a) => split(s, a[0], a[1], true) },
  splitlines: { params: ['keepends'], keywords: ['keepends'], call: (s, a) => splitlines(s, a[0]) },
  startswith: { params: ['prefix', 'start', 'end'], required: 1, call: (s, a) => affix(s, a[0], a[1], a[2], 'startswith') },
  endswith: { params: ['suffix', 'start', 'end'], required: 1, call: (s, a) => affix(s, a[0], a[1], a[2], 'endswith') },
  replace: { params: ['old', 'new', 'count'], required: 2, keywords: ['count'], call: (s, a) => replace(s, a[0], a[1], a[2]) },
  find: { params: ['sub', 'start', 'end'], required: 1, call: (s, a) => find(s, a[0], a[1], a[2], false) },
  rfind: { params: ['sub', 'start', 'end'], required: 1, call: (s, a) => find(s, a[0], a[1], a[2], true) },
  index: { params: ['sub', 'start', 'end'], required: 1, call: (s, a) => found(find(s, a[0], a[1], a[2], false)) },
  rindex: { params: ['sub', 'start', 'end'], required: 1, call: (s, a) => found(find(s, a[0], a[1], a[2], true)) },
  count: { params: ['sub', 'start', 'end'], required: 1, call: (s, a) => count(s, a[0], a[1], a[2]) },
  partition: { params: ['sep'], required: 1, call: (s, a) => partition(s, a[0], false) },
  rpartition: { params: ['sep'], required: 1, call: (s, a) => partition(s, a[0], true) },
  removeprefix: { params: ['prefix'], required: 1, call: (s, a) => (s.startsWith(str(a[0], 'removeprefix() argument')) ? s.slice((a[0] as string).length) : s) },
  removesuffix: {
    params: ['suffix'],
    required: 1,
    call: (s, a) => {
      const x = str(a[0], 'removesuffix() argument');
      return x && s.endsWith(x) ? s.slice(0, s.length - x.length) : s;
    },
  },
  upper: { params: [], call: (s) => s.toUpperCase() },
  lower: { params: [], call: (s) => s.toLowerCase() },
  casefold: { params: [], call: (s) => casefold(s) },
  title: { params: [], call: (s) => title(s) },
  capitalize: { params: [], call: (s) => capitalize(s) },
  swapcase: { params: [], call: (s) => swapcase(s) },
  isdigit: { params: [], call: (s) => every(s, isDigit) },
  isdecimal: { params: [], call: (s) => every(s, isDecimal) },
  isnumeric: { params: [], call: (s) => every(s, isNumeric) },
  isalpha: { params: [], call: (s) => every(s, isAlpha) },
  isalnum: { params: [], call: (s) => every(s, (c) => isAlpha(c) || isNumeric(c)) },
  isspace: { params: [], call: (s) => every(s, isSpace) },
  isupper: { params: [], call: (s) => caseIs(s, true) },
  islower: { params: [], call: (s) => caseIs(s, false) },
  istitle: { params: [], call: (s) => istitle(s) },
  zfill: { params: ['width'], required: 1, call: (s, a) => zfill(s, a[0]) },
  center: { params: ['width', 'fillchar'], required: 1, call: (s, a) => pad(s, a[0], a[1], 'center') },
  ljust: { params: ['width', 'fillchar'], required: 1, call: (s, a) => pad(s, a[0], a[1], 'ljust') },
  rjust: { params: ['width', 'fillchar'], required: 1, call: (s, a) => pad(s, a[0], a[1], 'rjust') },
  expandtabs: { params: ['tabsize'], keywords: ['tabsize'], call: (s, a) => expandtabs(s, a[0]) },
  join: { params: ['iterable'], required: 1, call: (s, a) => join(s, a[0]) },
};

function found(i: number): number {
  if (i < 0) throw new PyStrError('ValueError', 'substring not found');
  return i;
}

/** Calls `s.<name>(*args, **kwargs)` with Python's argument rules. */
export function callStrMethod(name: string, s: string, args: readonly unknown[], kwargs: ReadonlyMap<string, unknown>): unknown {
  const m = STR_METHODS[name];
  if (!m) throw new PyStrError('TypeError', `'str' object has no attribute '${name}'`);
  if (args.length > m.params.length)
    throw new PyStrError('TypeError', `${name}() takes at most ${m.params.length} argument${m.params.length === 1 ? '' : 's'} (${args.length} given)`);
  const bound = [...args];
  for (const [k, v] of kwargs) {
    const i = m.params.indexOf(k);
    if (!m.keywords?.includes(k) || i < 0)
      throw new PyStrError('TypeError', m.keywords ? `${name}() got an unexpected keyword argument '${k}'` : `${name}() takes no keyword arguments`);
    if (i < args.length) throw new PyStrError('TypeError', `${name}() got multiple values for argument '${k}'`);
    bound[i] = v;
  }
  const given = bound.filter((x, i) => i < (m.required ?? 0) && x !== undefined).length;
  if (given < (m.required ?? 0)) throw new PyStrError('TypeError', `${name}() takes at least ${m.required} argument${m.required === 1 ? '' : 's'} (${given} given)`);
  return m.call(s, bound);
}

/** `| trim(chars)`: jinja2's trim is str.strip. */
export const trim = (s: string, chars?: unknown) => strip(s, chars, true, true, 'trim');

/** `| title`: jinja2's own title (words begin after spaces, dashes and opening brackets), not str.title. */
export function titleFilter(s: string): string {
  return splitKeep(s, (c) => isSpace(c) || '-({[<'.includes(c))
    .map((w) => {
      const [first, ...rest] = Array.from(w);
      return first === undefined ? '' : first.toUpperCase() + rest.join('').toLowerCase();
    })
    .join('');
}

/** Splits into runs of separators and runs of the rest, keeping both (re.split with a group). */
function splitKeep(s: string, isSep: (c: string) => boolean): string[] {
  const out: string[] = [];
  let cur = '';
  let curSep: boolean | undefined;
  for (const c of s) {
    const sep = isSep(c);
    if (curSep !== undefined && sep !== curSep) {
      out.push(cur);
      cur = '';
    }
    cur += c;
    curSep = sep;
  }
  if (cur) out.push(cur);
  return out;
}

/** `| wordcount`: runs of Python regex `\w` (letters, digits, underscore). */
export const wordcount = (s: string) => (s.match(/[\p{L}\p{N}_]+/gu) ?? []).length;

/** Python's len() of a str: code points. */
export const pyLen = cpLength;
export const pyCapitalize = capitalize;
