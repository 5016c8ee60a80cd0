// Measures testdata/claude_tokens.json: node measure_claude_tokens.mjs, with
// samples.json ([{name, text}]) beside it and ai-tokenizer@1.0.6,
// @anthropic-ai/tokenizer@0.0.4 installed.
import fs from 'node:fs';
import Tokenizer from 'ai-tokenizer';
import * as claudeEnc from 'ai-tokenizer/encoding/claude';
import * as o200kEnc from 'ai-tokenizer/encoding/o200k_base';
import { countTokens } from '@anthropic-ai/tokenizer';
const samples = JSON.parse(fs.readFileSync('samples.json', 'utf8'));
const claude = new Tokenizer(claudeEnc);
const o200k = new Tokenizer(o200kEnc);
const out = [];
for (const s of samples) {
  const c = claude.count(s.text), o = o200k.count(s.text), l = countTokens(s.text);
  const bytes = Buffer.byteLength(s.text);
  out.push({ name: s.name, bytes, o200k: o, claude3: c, claude_legacy: l });
  console.log(s.name.padEnd(24), String(bytes).padStart(6), String(o).padStart(6), String(c).padStart(6), String(l).padStart(6), (c / o).toFixed(3), (l / o).toFixed(3), (bytes / c).toFixed(2));
}
fs.writeFileSync('counts.json', JSON.stringify(out, null, 1));
