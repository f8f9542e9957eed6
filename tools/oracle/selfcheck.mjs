#!/usr/bin/env node
// Checks the oracle itself against the stored stories260K reference (run.c fp32 logits and greedy ids):
// llama.cpp with an f32 KV cache must agree within 1e-4, and greedy decoding must give the same 32 ids.
// Usage: node selfcheck.mjs [DATA_DIR]   (default: the repository's data/)

import {execFileSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {fileURLToPath} from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const shared = process.argv[2] ?? path.resolve(here, "../../data");
const modelDir = path.join(shared, "models/stories260K");
const model = path.join(modelDir, "stories260K.gguf");
const expectedPath = path.join(modelDir, "expected/logits_once_upon_a_time.json");
const TOLERANCE = 1e-4;

function oracle(args) {
    return JSON.parse(execFileSync(process.execPath, [path.join(here, "oracle.mjs"), ...args],
        {encoding: "utf8", maxBuffer: 256 << 20}));
}

let failed = false;
function check(ok, message) {
    console.log(`${ok ? "ok  " : "FAIL"} ${message}`);
    failed ||= !ok;
}

if (!fs.existsSync(model) || !fs.existsSync(expectedPath)) {
    console.error(`selfcheck: missing ${model} or ${expectedPath}`);
    process.exit(1);
}
const expected = JSON.parse(fs.readFileSync(expectedPath, "utf8"));
const tokenArg = expected.tokens.join(",");

const logits = oracle(["logits", "--model", model, "--tokens", tokenArg, "--all"]);
let maxDiff = 0;
for (let pos = 0; pos < expected.logits.length; pos++)
    for (let id = 0; id < expected.logits[pos].length; id++)
        maxDiff = Math.max(maxDiff, Math.abs(logits.logits[pos][id] - expected.logits[pos][id]));
check(logits.logits.length === expected.logits.length && logits.n_vocab === expected.logits[0].length,
    `shape [${logits.logits.length}][${logits.n_vocab}]`);
check(maxDiff <= TOLERANCE, `all-position logits, f32 KV: max |diff| = ${maxDiff.toExponential(3)} (tolerance ${TOLERANCE})`);

const last = oracle(["logits", "--model", model, "--tokens", tokenArg]);
const lastDiff = Math.max(...last.logits[0].map((v, id) => Math.abs(v - logits.logits.at(-1)[id])));
// Last-only runs a pruned output graph (one row through the final norm and matmul), so rounding may differ.
check(lastDiff <= 1e-5, `last-only logits vs the --all last row: max |diff| = ${lastDiff.toExponential(3)}`);

const generated = oracle(["generate", "--model", model, "--tokens", tokenArg, "--n", String(expected.greedy.length)]);
check(JSON.stringify(generated.tokens) === JSON.stringify(expected.greedy),
    `greedy ${expected.greedy.length} tokens match (text: ${JSON.stringify(generated.text.slice(0, 40))}...)`);

const tokenized = oracle(["tokenize", "--model", model, "--text", expected.prompt, "--add-bos"]);
check(JSON.stringify(tokenized.tokens) === JSON.stringify(expected.tokens), `tokenize "${expected.prompt}" with BOS`);

process.exit(failed ? 1 : 0);
