/** Spaces, newlines, digits, accents, CJK, emoji, code, special tokens. */
export const VARIED_TEXT = [
  'Hello, world!  Two  spaces,\ttab and\nnew\n\nlines.   ',
  'Numbers: 1234567 3.14159 -42 1,000,000 2026-03-05',
  'Accents: café naïve Zürich São Paulo ÅÄÖ ß œ; combining: e\u0301',
  'CJK: 日本語のテキスト 中文 한국어',
  'Emoji: 🚀🔥 👩‍👩‍👧 🇨🇭',
  'Code: function f(x) { return x * 2; } // ok\n\tif (a && b) { console.log(`${a}`); }',
  "Contractions: don't I'm we'll they've HELLO'S",
].join('\n');
