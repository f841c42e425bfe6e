#!/usr/bin/env node
// Writes tests/data/fixtures/tokenizer_cases.tsv: texts and the ids that the reference JavaScript
// GPT-2 encoder (npm gpt-3-encoder@1.1.4, its own `encode`) gives them.
//
//   mkdir /tmp/enc && cd /tmp/enc && npm pack gpt-3-encoder@1.1.4 && tar xzf gpt-3-encoder-1.1.4.tgz
//   node tests/data/make_tokenizer_fixture.js /tmp/enc/package > tests/data/fixtures/tokenizer_cases.tsv
//
// Line format (one case per line; '#' lines are comments):
//   name <TAB> text as hex of its UTF-8 bytes <TAB> ids separated by spaces
//
// Known ways the reference differs from GPT-2's definition, and how this file deals with them:
// - Its pattern has the `u` flag, so \p{L} / \p{N} are full Unicode categories and code points are
//   matched whole (no split surrogate pairs) -- checked below.
// - JavaScript's \s includes U+FEFF and excludes U+0085, the reverse of Unicode White_Space (used by
//   GPT-2's `regex` module, tiktoken and our PCRE2 pattern). Texts containing either (or U+180E)
//   are excluded here; make_tokenizer_fixture_python.py covers them with encoder.py's algorithm.
// - Node's Unicode tables (17.0 here) are newer than PCRE2's; random text draws only from ranges
//   assigned long before either version, so category lookups agree.
// - Its bpe_ranks table is keyed by the pair joined with ',' ("a,b"), so pairs whose tokens contain
//   ',' can collide. Every case here is also checked against an exact re-implementation of
//   encoder.py's bpe() (Map keyed on the two tokens); a case where they differ is written as a
//   comment, not a test.
'use strict';
const path = require('path');
const fs = require('fs');

const pkgDir = process.argv[2] || path.dirname(require.resolve('gpt-3-encoder/package.json'));
const { encode } = require(path.join(pkgDir, 'index.js'));
const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));

if (!/u[a-z]*$/.test(fs.readFileSync(path.join(pkgDir, 'Encoder.js'), 'utf8').match(/const pat = (\/.*\/[a-z]*)/)[1])) {
  throw new Error('reference pattern lacks the u flag: \\p{L} would not mean Unicode letters');
}

// --- Exact reference BPE (encoder.py), used only to flag cases the JS package gets wrong. ---
const encoder = JSON.parse(fs.readFileSync(path.join(pkgDir, 'encoder.json'), 'utf8'));
const merges = fs.readFileSync(path.join(pkgDir, 'vocab.bpe'), 'utf8').split('\n').slice(1, -1).map((l) => l.split(' '));
const rank = new Map(merges.map(([a, b], i) => [a + '\u0000' + b, i]));
const byteEnc = (() => {
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n++); }
  const m = {};
  bs.forEach((b, i) => { m[b] = String.fromCharCode(cs[i]); });
  return m;
})();
const pat = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
function exactEncode(text) {
  const out = [];
  for (const m of text.matchAll(pat)) {
    let word = Array.from(Buffer.from(m[0], 'utf8')).map((b) => byteEnc[b]);
    while (word.length > 1) {
      let best = -1, bestRank = Infinity;
      for (let i = 0; i + 1 < word.length; i++) {
        const r = rank.get(word[i] + '\u0000' + word[i + 1]);
        if (r !== undefined && r < bestRank) { bestRank = r; best = i; }
      }
      if (best < 0) break;
      const [a, b] = [word[best], word[best + 1]];
      const next = [];
      for (let i = 0; i < word.length;) {
        if (i + 1 < word.length && word[i] === a && word[i + 1] === b) { next.push(a + b); i += 2; } else { next.push(word[i++]); }
      }
      word = next;
    }
    for (const t of word) out.push(encoder[t]);
  }
  return out;
}

// --- Cases. ---
const cases = [
  ['empty', ''],
  ['ascii_sentence', 'Hello world! This is a test of the GPT-2 tokenizer.'],
  ['ascii_pangram', 'The quick brown fox jumps over the lazy dog.'],
  ['contractions_lower', "it's don't they're we've I'm you'll he'd"],
  ['contractions_upper', "IT'S DON'T THEY'RE WE'VE I'M YOU'LL HE'D John'S"],
  ['contractions_edge', "'s's 'tis rock'n'roll ''s o'clock 'll've"],
  ['apostrophe_curly', 'it\u2019s don\u2019t \u2018quoted\u2019'],
  ['spaces_runs', 'a  b   c    d     e'],
  ['trailing_spaces', 'end with spaces   '],
  ['leading_spaces', '   start with spaces'],
  ['only_spaces', '     '],
  ['newlines', 'line one\nline two\n\nline four\n\n\n'],
  ['crlf', 'windows\r\nline\r\n\r\nend'],
  ['tabs', '\tindented\n\t\tmore\t\ttabs\t'],
  ['mixed_ws_before_word', 'a \n b\t c \u3000d\u00a0e'],
  ['only_newlines', '\n\n\n\n'],
  ['numbers', '0 1 12 123 1234 12345 3.14159 -42 1,000,000 1e10 0x1F 2023-11-26'],
  ['numbers_unicode', '\u0661\u0662\u0663 \u0967\u0968 \u2160\u2161 \u00bd \u00b2 \u2460'],
  ['punct_runs', '!!! ??? ... --- *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[]]] {{{}}} ~~~ ```'],
  ['punct_mixed', 'Hello,world;foo:bar|baz"qux\'quux<tag/>&amp;'],
  ['url', 'https://example.com/path?query=1&x=y#frag'],
  ['email', 'someone@example.org, other.person+tag@mail.co.uk'],
  ['code_cpp', '#include <vector>\nint main() {\n  std::vector<int> v{1, 2, 3};\n  for (auto x : v) { printf("%d\\n", x); }\n  return 0;\n}\n'],
  ['code_python', 'def f(x):\n    if x > 0:\n        return x ** 2  # square\n    return -x\n\nprint(f(3))\n'],
  ['code_json', '{"key": [1, 2.5, null, true], "nested": {"a": "b"}}'],
  ['cjk_chinese', '\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff0c\u6211\u4eec\u53bb\u516c\u56ed\u5427\u3002'],
  ['cjk_japanese', '\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002\u3072\u3089\u304c\u306a\u3068\u30ab\u30bf\u30ab\u30ca\u3002'],
  ['korean', '\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4.'],
  ['emoji_simple', 'I love \ud83c\udf55 and \ud83c\udf89! \ud83d\ude00\ud83d\ude03'],
  ['emoji_zwj_family', 'family: \ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67\u200d\ud83d\udc66 done'],
  ['emoji_zwj_misc', '\ud83c\udff3\ufe0f\u200d\ud83c\udf08 \ud83d\udc69\u200d\ud83d\udcbb \ud83e\uddd1\u200d\ud83d\ude80'],
  ['emoji_skin_tone', '\ud83d\udc4d\ud83c\udffd \ud83d\udc4b\ud83c\udfff'],
  ['emoji_flags', '\ud83c\uddfa\ud83c\uddf8 \ud83c\uddef\ud83c\uddf5 \ud83c\uddeb\ud83c\uddf7'],
  ['combining_marks', 'e\u0301 a\u0300 n\u0303 Z\u0351\u0352\u0353 cafe\u0301 \u0915\u093f'],
  ['precomposed_accents', 'caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c5ngstr\u00f6m Stra\u00dfe'],
  ['arabic', '\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u0661\u0662\u0663'],
  ['hebrew', '\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd'],
  ['rtl_mixed', 'English \u05e2\u05d1\u05e8\u05d9\u05ea \u0639\u0631\u0628\u064a mixed \u200f\u200e marks'],
  ['greek_cyrillic', '\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u0420\u0443\u0441\u0441\u043a\u0438\u0439 \u044f\u0437\u044b\u043a'],
  ['devanagari_thai', '\u0928\u092e\u0938\u094d\u0924\u0947 \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35'],
  ['math_symbols', '\u2200x \u2208 \u211d: x\u00b2 \u2265 0 \u2227 \u221a4 = 2 \u2211 \u222b'],
  ['zero_width', 'zero\u200bwidth\u200cnon\u200djoiner'],
  ['control_chars', 'bell\u0007 esc\u001b[0m nul\u0000 del\u007f'],
  ['endoftext_literal', 'before<|endoftext|>after'],
  ['long_word', 'supercalifragilisticexpialidocious antidisestablishmentarianism'],
  ['repeated_chars', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'],
  ['kjv_verse', 'In the beginning God created the heaven and the earth.\nAnd the earth was without form, and void;'],
  ['comma_tokens', ',,,, ,, a,b ,a ,,a,,b,, 1,2,3,,'],
];

// Random text from ranges assigned long before Unicode 14 (PCRE2's tables) and 17 (Node's).
const ranges = [
  [0x20, 0x7e, 30], [0x0a, 0x0a, 3], [0x09, 0x09, 1], [0xa0, 0x17f, 4], [0x370, 0x3c9, 2],
  [0x410, 0x44f, 2], [0x5d0, 0x5ea, 1], [0x621, 0x64a, 1], [0x660, 0x669, 1], [0x905, 0x939, 1],
  [0xe01, 0xe30, 1], [0x3041, 0x3093, 1], [0x4e00, 0x9fa5, 3], [0xac00, 0xd7a3, 1], [0x2000, 0x2027, 1],
  [0x2030, 0x205e, 1], [0x2200, 0x22ff, 1], [0x1f300, 0x1f5ff, 2], [0x1f600, 0x1f64f, 2], [0x300, 0x36f, 1],
  [0x3000, 0x3000, 1], [0xff01, 0xff5e, 1], [0x27, 0x27, 3],
];
const totalWeight = ranges.reduce((s, r) => s + r[2], 0);
let seed = 20240520;
const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296);
function randomText(len) {
  let s = '';
  for (let i = 0; i < len; i++) {
    let w = rand() * totalWeight;
    let r = ranges[0];
    for (const x of ranges) { if ((w -= x[2]) < 0) { r = x; break; } }
    s += String.fromCodePoint(r[0] + Math.floor(rand() * (r[1] - r[0] + 1)));
  }
  return s;
}
for (let i = 0; i < 40; i++) cases.push([`random_${String(i).padStart(2, '0')}`, randomText(20 + Math.floor(rand() * 180))]);

const lines = [
  `# GPT-2 token ids from ${pkg.name}@${pkg.version} encode(); generated by tests/data/make_tokenizer_fixture.js.`,
  '# name<TAB>utf-8 hex<TAB>ids',
];
for (const [name, text] of cases) {
  if (/[\ufeff\u0085\u180e]/.test(text)) { lines.push(`# skipped ${name}: contains U+FEFF/U+0085/U+180E, where JS \\s is not White_Space`); continue; }
  const ids = encode(text);
  const exact = exactEncode(text);
  if (ids.join(' ') !== exact.join(' ')) {
    lines.push(`# skipped ${name}: the package's encode (${ids.join(' ')}) differs from encoder.py's bpe (${exact.join(' ')})`);
    continue;
  }
  lines.push(`${name}\t${Buffer.from(text, 'utf8').toString('hex')}\t${ids.join(' ')}`);
}
process.stdout.write(lines.join('\n') + '\n');
