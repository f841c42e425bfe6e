#!/usr/bin/env node
// Prints the token count and FNV-1a hash (over the ids as little-endian uint32) of the reference
// JavaScript encoder's encoding of a whole text file -- the constant checked by
// BpeTokenizer.WholeKjvMatchesReferenceEncoder and printed by ft_tokenizer_bench.
//
//   node tests/data/kjv_reference_hash.js /tmp/enc/package kjv.txt
//
// kjv.txt is the output of `bible -f Gen1:1-Rev22:21` (ft_tokenizer_bench --write-text kjv.txt).
// The package's encode() appends with Array.concat, quadratic on a 4.4 MB text, so this loads
// Encoder.js with that one line changed to push(); the encoding itself is untouched.
'use strict';
const fs = require('fs');
const path = require('path');
const Module = require('module');

const [pkgDir, textPath] = process.argv.slice(2);
const file = path.join(pkgDir, 'Encoder.js');
const slow = 'bpe_tokens = bpe_tokens.concat(new_tokens)';
const src = fs.readFileSync(file, 'utf8');
if (!src.includes(slow)) throw new Error(`${file}: expected line not found: ${slow}`);
const m = new Module(file);
m.filename = file;
m.paths = Module._nodeModulePaths(pkgDir);
m._compile(src.replace(slow, 'for (const t of new_tokens) bpe_tokens.push(t)'), file);

const text = fs.readFileSync(textPath, 'utf8');
const ids = m.exports.encode(text);
let h = 0xcbf29ce484222325n;
for (const id of ids) {
  for (let k = 0; k < 4; k++) {
    h ^= BigInt((id >>> (8 * k)) & 0xff);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
}
console.log(`bytes ${Buffer.byteLength(text)} tokens ${ids.length} fnv1a ${h.toString(16).padStart(16, '0')}`);
