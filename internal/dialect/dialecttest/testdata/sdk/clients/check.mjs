// Checks a harness run: node check.mjs standin.jsonl ai_sdk.json langchain.json
// (the stand-in's request log, then what the scripts printed). Fails
// unless every flavour answered as the stand-in does, and the second
// request of each two-request conversation went upstream with a memory
// block and the first user message once.
import { readFileSync } from 'node:fs';

const [log, ...outputs] = process.argv.slice(2);
if (!log || outputs.length === 0) { console.error('usage: node check.mjs standin.jsonl out.json...'); process.exit(2); }
const errors = [];
const first = 'I live in Lisbon and I love trains.';

for (const file of outputs) {
  for (const [name, r] of Object.entries(JSON.parse(readFileSync(file, 'utf8')))) {
    const text = (v) => (typeof v === 'string' ? v : (v ?? []).map((p) => p.text ?? '').join(''));
    const want = {
      first: `You said: ${first}`, second_streamed: 'You said: Where do I live?',
      tool_answer: 'The tool says: 18C and sunny in Porto.', tool_text: 'The tool says: 18C and sunny in Porto.',
    };
    if (r.error) errors.push(`${file} ${name}: ${r.error.split('\n')[0]}`);
    for (const [k, v] of Object.entries(want)) {
      if (k in r && text(r[k]) !== v) errors.push(`${file} ${name}: ${k} = ${JSON.stringify(r[k])}, want ${JSON.stringify(v)}`);
    }
    if (JSON.stringify(r.object) !== '{"city":"Porto","temp":18}') errors.push(`${file} ${name}: object ${JSON.stringify(r.object)}`);
  }
}

// memgate sends no X-Memory-* header upstream: a conversation's second
// request is the one asking "Where do I live?".
const own = (r) => JSON.stringify(r.body).replace(/<memory>.*?<\/memory>/g, '');
const seconds = readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
  .filter((r) => own(r).includes('Where do I live?'));
if (seconds.length !== 3 * outputs.length) errors.push(`${seconds.length} second requests in the log, want ${3 * outputs.length}`);
for (const r of seconds) {
  const body = JSON.stringify(r.body);
  if (!body.includes('<memory>')) errors.push(`${r.path}: a second request carries no memory block`);
  const n = own(r).split(`You said: ${first}`).join('').split(first).length - 1;
  if (n !== 1) errors.push(`${r.path}: the first user message went upstream ${n} times in a second request`);
}
if (errors.length) { console.error(errors.join('\n')); process.exit(1); }
console.log(`ok: ${outputs.length} outputs, ${seconds.length} second requests`);
