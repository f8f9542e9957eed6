#!/usr/bin/env node
// Tangram oracle: asks llama.cpp (the CPU build shipped with node-llama-cpp 3.22.1) what it computes for a
// GGUF file, and prints the answer as one JSON object on stdout. Tangram's tests and benchmarks compare
// against it. Diagnostics go to stderr; any failure exits non-zero. See README.md next to this file.

import fs from "node:fs";
import process from "node:process";

const USAGE = `usage: node oracle.mjs <command> --model FILE [options]

commands:
  logits    --tokens 1,403,407 [--all]        logits after the last token (or after every token with --all)
  tokenize  --text T | --text-file F [--special] [--add-bos]
                                              llama.cpp token ids for the text (file read as UTF-8)
  generate  --tokens 1,403 --n N [--ignore-eog]  greedy continuation of N tokens
  bench     --prompt-tokens N --gen-tokens M  prefill and decode speed measured by llama.cpp
            [--reps R] [--batch B]
  bench-batch --sequences S --prompt-tokens N --gen-tokens M [--reps R]
                                              decode speed of S sequences stepped together (one
                                              llama_decode of S tokens per step), wall time
                                              and per CPU-second of the process

common options:
  --threads T      CPU threads (default: llama.cpp's count of math cores)
  --kv-type TYPE   KV cache type f32 | f16 | q8_0 | ... (default f32)
  --flash-attn     turn flash attention on (default off)
  --ctx N          context size (default: just large enough)
  --verbose        print llama.cpp warnings and errors as they happen
                   (otherwise its errors are printed only when the command fails)`;

// Flags that take no value; every other flag takes exactly one value.
const BOOLEAN_FLAGS = new Set(["all", "special", "add-bos", "ignore-eog", "flash-attn", "verbose", "help"]);
const VALUE_FLAGS = new Set(["model", "tokens", "text", "n", "prompt-tokens", "gen-tokens", "threads", "kv-type",
    "ctx", "batch", "reps", "text-file", "sequences"]);

class UsageError extends Error {}

// llama.cpp error lines held back until we know whether the command failed. node-llama-cpp's memory
// estimation logs harmless errors for vocab-only GGUFs ("missing tensor 'token_embd.weight'").
const heldLlamaErrors = [];

function parseArgs(argv) {
    const [command, ...rest] = argv;
    const flags = {};
    for (let i = 0; i < rest.length; i++) {
        const arg = rest[i];
        if (!arg.startsWith("--"))
            throw new UsageError(`unexpected argument '${arg}'`);
        const name = arg.slice(2);
        if (BOOLEAN_FLAGS.has(name)) {
            flags[name] = true;
        } else if (VALUE_FLAGS.has(name)) {
            if (i + 1 >= rest.length)
                throw new UsageError(`--${name} needs a value`);
            flags[name] = rest[++i];
        } else {
            throw new UsageError(`unknown option --${name}`);
        }
    }
    return {command, flags};
}

function requireFlag(flags, name) {
    if (flags[name] === undefined)
        throw new UsageError(`missing --${name}`);
    return flags[name];
}

function parseCount(text, name, min) {
    if (!/^\d+$/.test(text))
        throw new UsageError(`--${name} must be a non-negative integer, got '${text}'`);
    const value = Number(text);
    if (!Number.isSafeInteger(value) || value < min)
        throw new UsageError(`--${name} must be at least ${min}, got '${text}'`);
    return value;
}

function optionalCount(flags, name, min) {
    return flags[name] === undefined ? undefined : parseCount(flags[name], name, min);
}

function parseTokenList(text) {
    const parts = text.split(",").map((part) => part.trim()).filter((part) => part !== "");
    if (parts.length === 0)
        throw new UsageError("--tokens needs at least one token id");
    return parts.map((part) => parseCount(part, "tokens", 0));
}

// Shortest decimal that reads back as the same float32 (llama.cpp's logits are float32).
function roundToFloat32(value) {
    return Number(Math.fround(value).toPrecision(9));
}

// --- llama.cpp session --------------------------------------------------------------------------------

async function openLlama(flags, logLevel) {
    let nodeLlamaCpp;
    try {
        nodeLlamaCpp = await import("node-llama-cpp");
    } catch (error) {
        throw new Error(`cannot load node-llama-cpp (run 'npm install --ignore-scripts' in tools/oracle): ${error.message}`);
    }
    const logSink = [];
    const verbose = flags.verbose === true;
    const llama = await nodeLlamaCpp.getLlama({
        gpu: false,           // the oracle is the CPU reference
        build: "never",       // use the prebuilt binary; never compile or download
        skipDownload: true,
        usePrebuiltBinaries: true,
        progressLogs: false,
        maxThreads: 0,        // no cap, so the context's thread count is used exactly
        logLevel,
        logger: (level, message) => {
            logSink.push(message);
            const line = `[llama.cpp ${level}] ${message}\n`;
            if (verbose && (level === "error" || level === "fatal" || level === "warn"))
                process.stderr.write(line);
            else if (level === "error" || level === "fatal")
                heldLlamaErrors.push(line);
        }
    });
    return {llama, logSink, GgmlType: nodeLlamaCpp.GgmlType};
}

async function loadModel(llama, flags, {vocabOnly = false} = {}) {
    const modelPath = requireFlag(flags, "model");
    if (!fs.existsSync(modelPath) || !fs.statSync(modelPath).isFile())
        throw new Error(`model file not found: ${modelPath}`);
    return await llama.loadModel({modelPath, gpuLayers: 0, vocabOnly});
}

// --kv-type name -> ggml type name and number (GgmlType maps both ways, like a TypeScript enum).
function resolveKvType(flags, GgmlType) {
    const name = (flags["kv-type"] ?? "f32").toUpperCase();
    const id = GgmlType[name];
    if (typeof id !== "number")
        throw new UsageError(`unknown --kv-type '${flags["kv-type"]}' (try f32, f16, bf16, q8_0)`);
    return {name, id};
}

// Context: one sequence, a fixed KV type, flash attention off unless asked, exact thread count.
// node-llama-cpp sets n_ubatch = n_batch, so `batchSize` tokens go through one llama_decode graph.
async function createContext(session, model, flags, {neededTokens, batchSize, performanceTracking = false,
                                                     sequences = 1}) {
    const {llama, GgmlType} = session;
    const kv = resolveKvType(flags, GgmlType);
    const threads = optionalCount(flags, "threads", 1) ?? llama.cpuMathCores;
    const contextSize = optionalCount(flags, "ctx", 1) ?? Math.max(neededTokens, 1);
    if (contextSize < neededTokens)
        throw new UsageError(`--ctx ${contextSize} is smaller than the ${neededTokens} tokens needed`);
    const context = await model.createContext({
        contextSize,
        batchSize: Math.max(1, Math.min(batchSize, contextSize)),
        sequences,
        threads,
        flashAttention: flags["flash-attn"] === true,
        experimentalKvCacheKeyType: kv.id,
        experimentalKvCacheValueType: kv.id,
        performanceTracking,
        failedCreationRemedy: false
    });
    // The KV type option is marked experimental upstream: confirm llama.cpp got what we asked for.
    if (context.kvCacheKeyType !== kv.id || context.kvCacheValueType !== kv.id)
        throw new Error(`context has KV types ${GgmlType[context.kvCacheKeyType]}/${GgmlType[context.kvCacheValueType]}, ` +
            `asked for ${kv.name}`);
    if (context.flashAttention !== (flags["flash-attn"] === true))
        throw new Error(`context has flash attention ${context.flashAttention}, asked for ${flags["flash-attn"] === true}`);
    return {context, threads, kvType: kv.name};
}

function vocabSize(model) {
    const tokens = model.fileInfo?.metadata?.tokenizer?.ggml?.tokens;
    return Array.isArray(tokens) ? tokens.length : undefined;
}

function checkTokenIds(tokens, nVocab) {
    if (nVocab === undefined)
        return;
    for (const token of tokens)
        if (token >= nVocab)
            throw new Error(`token id ${token} is out of range (n_vocab = ${nVocab})`);
}

// Map<token, logit> (sorted by logit) -> dense [n_vocab] array indexed by token id.
function denseLogits(logitMap, nVocab) {
    const size = nVocab ?? logitMap.size;
    if (logitMap.size !== size)
        throw new Error(`llama.cpp returned ${logitMap.size} logits, expected ${size}`);
    const dense = new Array(size);
    for (const [token, logit] of logitMap)
        dense[token] = roundToFloat32(logit);
    return dense;
}

function settings(context, threads, kvType) {
    return {
        threads,
        kv_type: kvType.toLowerCase(),
        flash_attn: context.flashAttention === true,
        n_ctx: context.contextSize,
        n_batch: context.batchSize
    };
}

// --- commands ---------------------------------------------------------------------------------------------

async function cmdLogits(flags) {
    const tokens = parseTokenList(requireFlag(flags, "tokens"));
    const session = await openLlama(flags, "warn");
    const model = await loadModel(session.llama, flags);
    const nVocab = vocabSize(model);
    checkTokenIds(tokens, nVocab);
    const batch = optionalCount(flags, "batch", 1) ?? tokens.length;
    const {context, threads, kvType} = await createContext(session, model, flags,
        {neededTokens: tokens.length, batchSize: batch});
    const all = flags.all === true;
    // Ask llama.cpp for the output row of every position (--all) or only the last one.
    const input = tokens.map((token, index) =>
        (all || index === tokens.length - 1) ? [token, {generateNext: {logits: true}}] : token);
    const results = await context.getSequence().controlledEvaluate(input);
    const logits = [];
    for (let index = 0; index < tokens.length; index++) {
        if (!all && index !== tokens.length - 1)
            continue;
        const logitMap = results[index]?.next?.logits;
        if (logitMap === undefined)
            throw new Error(`llama.cpp returned no logits for position ${index}`);
        logits.push(denseLogits(logitMap, nVocab));
    }
    return {
        tokens,
        n_vocab: nVocab ?? logits[0].length,
        positions: all ? tokens.map((_, index) => index) : [tokens.length - 1],
        settings: settings(context, threads, kvType),
        logits // [n_positions][n_vocab]
    };
}

function readText(flags) {
    if ((flags.text === undefined) === (flags["text-file"] === undefined))
        throw new UsageError("give exactly one of --text and --text-file");
    if (flags.text !== undefined)
        return flags.text;
    try {
        return fs.readFileSync(flags["text-file"], "utf8");
    } catch (error) {
        throw new Error(`cannot read --text-file: ${error.message}`);
    }
}

async function cmdTokenize(flags) {
    const text = readText(flags);
    const {llama} = await openLlama(flags, "warn");
    // Tokenizing needs only the vocabulary, so vocab-only GGUFs (llama.cpp's ggml-vocab-*.gguf) work too.
    const model = await loadModel(llama, flags, {vocabOnly: true});
    const tokens = model.tokenize(text, flags.special === true);
    if (flags["add-bos"] === true) {
        if (model.tokens.bos == null)
            throw new Error("--add-bos: the model has no BOS token");
        tokens.unshift(model.tokens.bos);
    }
    return {text, special: flags.special === true, add_bos: flags["add-bos"] === true, tokens};
}

async function cmdGenerate(flags) {
    const prompt = parseTokenList(requireFlag(flags, "tokens"));
    const count = parseCount(requireFlag(flags, "n"), "n", 0);
    const session = await openLlama(flags, "warn");
    const model = await loadModel(session.llama, flags);
    const nVocab = vocabSize(model);
    checkTokenIds(prompt, nVocab);
    const batch = optionalCount(flags, "batch", 1) ?? prompt.length;
    const {context, threads, kvType} = await createContext(session, model, flags,
        {neededTokens: prompt.length + count, batchSize: batch});
    const sequence = context.getSequence();
    // temperature 0 (the default) makes node-llama-cpp's sampler chain llama.cpp's greedy sampler alone.
    const pickNext = {generateNext: {token: true}};
    const generated = [];
    let stop = "length";
    let input = prompt.map((token, index) => index === prompt.length - 1 ? [token, pickNext] : token);
    while (generated.length < count) {
        const results = await sequence.controlledEvaluate(input);
        const next = results[input.length - 1]?.next?.token;
        if (next === undefined || next === null)
            throw new Error(`llama.cpp sampled no token at step ${generated.length}`);
        generated.push(next);
        if (model.isEogToken(next) && flags["ignore-eog"] !== true) {
            stop = "eog";
            break;
        }
        input = [[next, pickNext]];
    }
    return {
        prompt,
        tokens: generated,
        text: model.detokenize(generated, false, prompt),
        stop,
        settings: settings(context, threads, kvType)
    };
}

// llama_perf_context_print() lines; node-llama-cpp hands them to our logger.
function parsePerf(lines) {
    const text = lines.join("\n");
    const prompt = /prompt eval time =\s*([\d.]+) ms \/\s*(\d+) tokens/.exec(text);
    const decode = /\beval time =\s*([\d.]+) ms \/\s*(\d+) runs/.exec(text.replace(/prompt eval time/g, ""));
    return {
        prompt: prompt ? {ms: Number(prompt[1]), tokens: Number(prompt[2])} : undefined,
        decode: decode ? {ms: Number(decode[1]), tokens: Number(decode[2])} : undefined
    };
}

// Prints and resets llama.cpp's perf counters, and returns them; the log arrives asynchronously.
async function takePerf(context, logSink) {
    logSink.length = 0;
    await context.printTimings();
    for (let wait = 0; wait < 100 && !/total time/.test(logSink.join("\n")); wait++)
        await new Promise((resolve) => setTimeout(resolve, 10));
    return parsePerf(logSink);
}

function median(values) {
    const sorted = [...values].sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

async function cmdBench(flags) {
    const promptCount = parseCount(requireFlag(flags, "prompt-tokens"), "prompt-tokens", 1);
    const genCount = parseCount(requireFlag(flags, "gen-tokens"), "gen-tokens", 0);
    const reps = optionalCount(flags, "reps", 1) ?? 3;
    const session = await openLlama(flags, "info");
    const {llama, logSink} = session;
    const model = await loadModel(llama, flags);
    const nVocab = vocabSize(model) ?? 32;
    const batch = optionalCount(flags, "batch", 1) ?? Math.min(promptCount, 512);
    const {context, threads, kvType} = await createContext(session, model, flags,
        {neededTokens: promptCount + genCount, batchSize: batch, performanceTracking: true});
    const sequence = context.getSequence();
    // Fixed pseudo-random prompt (content does not change the cost of a dense model); BOS first if any.
    const prompt = Array.from({length: promptCount}, (_, index) => (index * 7919 + 13) % nVocab);
    if (model.tokens.bos != null)
        prompt[0] = model.tokens.bos;
    const pickNext = {generateNext: {token: true}};

    const runOnce = async () => {
        await sequence.clearHistory();
        await takePerf(context, logSink);
        let start = process.hrtime.bigint();
        const results = await sequence.controlledEvaluate(
            prompt.map((token, index) => index === prompt.length - 1 ? [token, pickNext] : token));
        const prefillWallMs = Number(process.hrtime.bigint() - start) / 1e6;
        const prefillPerf = await takePerf(context, logSink);
        let next = results[prompt.length - 1]?.next?.token ?? prompt[0];
        start = process.hrtime.bigint();
        for (let step = 0; step < genCount; step++) {
            const stepResults = await sequence.controlledEvaluate([[next, pickNext]]);
            next = stepResults[0]?.next?.token ?? next; // an EOG token is fed back too: speed is all we want
        }
        const decodeWallMs = Number(process.hrtime.bigint() - start) / 1e6;
        const decodePerf = await takePerf(context, logSink);
        return {prefillWallMs, decodeWallMs, prefillPerf, decodePerf};
    };

    await runOnce(); // warm-up, as llama-bench does
    const runs = [];
    for (let rep = 0; rep < reps; rep++)
        runs.push(await runOnce());

    const rate = (tokens, ms) => (ms > 0 ? tokens / (ms / 1000) : null);
    const perfRate = (perf, expected) => {
        if (perf === undefined)
            return null;
        if (perf.tokens !== expected)
            throw new Error(`llama.cpp perf counted ${perf.tokens} tokens, expected ${expected}`);
        return rate(perf.tokens, perf.ms);
    };
    // llama.cpp counts a 1-token llama_decode as "eval" and a larger one as "prompt eval", and prints each count
    // as at least 1 even when it is 0. So a 1-token prefill is "eval" alone, and a prefill split into batches
    // that ends with a 1-token batch is "prompt eval" (N-1 tokens) plus "eval" (1 run).
    const prefillTotal = ({prompt, decode}) => {
        if (promptCount === 1)
            return decode;
        if (prompt !== undefined && prompt.tokens === promptCount)
            return prompt;
        if (prompt !== undefined && decode !== undefined)
            return {ms: prompt.ms + decode.ms, tokens: prompt.tokens + decode.tokens};
        return undefined;
    };
    const prefillRates = runs.map((run) => perfRate(prefillTotal(run.prefillPerf), promptCount));
    const decodeRates = runs.map((run) => genCount === 0 ? null : perfRate(run.decodePerf.decode, genCount));
    if (prefillRates.includes(null) || (genCount > 0 && decodeRates.includes(null)))
        throw new Error("could not read llama.cpp's perf timings from its log (or it reported 0 ms)");
    return {
        model: flags.model,
        prompt_tokens: promptCount,
        gen_tokens: genCount,
        reps,
        prefill_tok_s: median(prefillRates),
        decode_tok_s: genCount === 0 ? null : median(decodeRates),
        prefill_tok_s_runs: prefillRates,
        decode_tok_s_runs: decodeRates,
        // Same phases timed around the JS calls (adds node-llama-cpp overhead and the per-token sampling).
        prefill_tok_s_wall: median(runs.map((run) => rate(promptCount, run.prefillWallMs))),
        decode_tok_s_wall: genCount === 0 ? null : median(runs.map((run) => rate(genCount, run.decodeWallMs))),
        llama_cpp: {release: llama.llamaCppRelease.release, build: llama.buildType, system_info: llama.systemInfo.trim()},
        settings: settings(context, threads, kvType)
    };
}

// Batched decode as a serving engine runs it: S sequences, each prefilled with its own prompt, then
// gen-tokens steps in which every sequence evaluates one token; node-llama-cpp gathers the S
// evaluations queued in the same tick into one llama_decode. Wall time of the steps (llama.cpp's perf
// counters file multi-token batches under "prompt eval"), median over reps after a warm-up.
async function cmdBenchBatch(flags) {
    const seqCount = parseCount(requireFlag(flags, "sequences"), "sequences", 1);
    const promptCount = parseCount(requireFlag(flags, "prompt-tokens"), "prompt-tokens", 1);
    const genCount = parseCount(requireFlag(flags, "gen-tokens"), "gen-tokens", 1);
    const reps = optionalCount(flags, "reps", 1) ?? 3;
    const session = await openLlama(flags, "info");
    const model = await loadModel(session.llama, flags);
    const nVocab = vocabSize(model) ?? 32;
    const {context, threads, kvType} = await createContext(session, model, flags,
        {neededTokens: seqCount * (promptCount + genCount), batchSize: Math.min(promptCount, 512), sequences: seqCount});
    const sequences = Array.from({length: seqCount}, () => context.getSequence());
    const pickNext = {generateNext: {token: true}};
    const runOnce = async () => {
        const next = [];
        for (let s = 0; s < seqCount; s++) {
            await sequences[s].clearHistory();
            const prompt = Array.from({length: promptCount}, (_, index) => (index * 7919 + 13 + 101 * s) % nVocab);
            if (model.tokens.bos != null)
                prompt[0] = model.tokens.bos;
            const results = await sequences[s].controlledEvaluate(
                prompt.map((token, index) => index === prompt.length - 1 ? [token, pickNext] : token));
            next.push(results[prompt.length - 1]?.next?.token ?? prompt[0]);
        }
        const start = process.hrtime.bigint();
        const cpuStart = process.cpuUsage();
        for (let step = 0; step < genCount; step++) {
            const stepResults = await Promise.all(sequences.map((sequence, s) => sequence.controlledEvaluate([[next[s], pickNext]])));
            stepResults.forEach((result, s) => { next[s] = result[0]?.next?.token ?? next[s]; });
        }
        const cpu = process.cpuUsage(cpuStart);
        return {wallMs: Number(process.hrtime.bigint() - start) / 1e6, cpuMs: (cpu.user + cpu.system) / 1000};
    };
    await runOnce(); // warm-up
    const rates = [];
    const cpuRates = [];
    for (let rep = 0; rep < reps; rep++) {
        const {wallMs, cpuMs} = await runOnce();
        rates.push(seqCount * genCount / (wallMs / 1000));
        cpuRates.push(seqCount * genCount / (cpuMs / 1000));
    }
    return {
        model: flags.model,
        sequences: seqCount,
        prompt_tokens: promptCount,
        gen_tokens: genCount,
        reps,
        decode_tok_s_wall: median(rates),
        decode_tok_s_wall_runs: rates,
        // Tokens per CPU-second of the whole process (all its threads): on a loaded machine the
        // wall rate measures the machine's other jobs as much as llama.cpp.
        decode_tok_s_cpu: median(cpuRates),
        decode_tok_s_cpu_runs: cpuRates,
        llama_cpp: {release: session.llama.llamaCppRelease.release, build: session.llama.buildType},
        settings: settings(context, threads, kvType)
    };
}

const COMMANDS = {logits: cmdLogits, tokenize: cmdTokenize, generate: cmdGenerate, bench: cmdBench,
    "bench-batch": cmdBenchBatch};

async function main() {
    const argv = process.argv.slice(2);
    if (argv.length === 0) {
        process.stderr.write(`oracle: error: no command\n${USAGE}\n`);
        return 2;
    }
    if (argv[0] === "--help" || argv[0] === "-h" || argv[0] === "help") {
        process.stdout.write(USAGE + "\n");
        return 0;
    }
    try {
        const {command, flags} = parseArgs(argv);
        if (flags.help === true) {
            process.stdout.write(USAGE + "\n");
            return 0;
        }
        const run = COMMANDS[command];
        if (run === undefined)
            throw new UsageError(`unknown command '${command}'`);
        const result = await run(flags);
        // Wait for the write to finish: process.exit() below must not cut a large JSON short.
        await new Promise((resolve, reject) =>
            process.stdout.write(JSON.stringify(result) + "\n", (error) => (error ? reject(error) : resolve())));
        return 0;
    } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        for (const line of heldLlamaErrors)
            process.stderr.write(line);
        process.stderr.write(`oracle: error: ${message}\n`);
        if (error instanceof UsageError)
            process.stderr.write(`${USAGE}\n`);
        return error instanceof UsageError ? 2 : 1;
    }
}

// Exit explicitly: llama.cpp's worker threads could otherwise keep the process alive.
main().then((code) => process.exit(code), (error) => {
    process.stderr.write(`oracle: error: ${error?.message ?? error}\n`);
    process.exit(1);
});
