// Structured output and forced tool calls through the Vercel AI SDK and LangChain: generateObject
// with a zod schema (response_format json_schema), generateText with toolChoice "required" or a
// named tool, ChatOpenAI.withStructuredOutput (json_schema and function calling) and bindTools
// with tool_choice "required". The model (TinyStories) knows nothing of JSON or tools, so every
// valid object here is the server's constrained decoding at work; each is checked over several
// seeds, by the client's own zod validation and again here.
//
// Needs constrained decoding in the server; run.sh leaves this file out until it is there.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { generateObject, generateText, tool } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';
import { startServer } from './server.mjs';

const SEEDS = [1, 2, 3, 4, 5];
// Enough tokens for the longest object the schemas allow, so that no reply is cut short.
const MAX_TOKENS = 256;

let server;
let model;

before(async () => {
  const template = path.join(path.dirname(process.env.TANGRAM_MODEL), '..', 'chat-templates',
                             'Qwen-Qwen2.5-7B-Instruct.jinja');
  server = await startServer(['--kv-memory', '64MiB', '--chat-template', template, '--log-level', 'warn']);
  // supportsStructuredOutputs: the SDK sends the schema as response_format json_schema (strict).
  model = createOpenAICompatible({ name: 'tangram', baseURL: `${server.url}/v1`, apiKey: 'unused',
                                   supportsStructuredOutputs: true }).chatModel('stories260K');
});
after(async () => { await server?.stop(); });

// Bounded on purpose: a random model left to write a free string could fill any token budget.
const petSchema = z.object({
  name: z.string().min(1).max(16),
  kind: z.enum(['dog', 'cat', 'bird']),
  friendly: z.boolean(),
  legs: z.number().int().min(0).max(8),
}).strict();

const citySchema = z.object({ city: z.string().min(1).max(24) }).strict();

function chatOpenAI(seed) {
  return new ChatOpenAI({ model: 'stories260K', apiKey: 'unused', configuration: { baseURL: `${server.url}/v1` },
                          maxRetries: 0, maxTokens: MAX_TOKENS, temperature: 1, modelKwargs: { seed } });
}

test('AI SDK: generateObject returns an object that satisfies the zod schema, for every seed', async () => {
  const objects = [];
  for (const seed of SEEDS) {
    const r = await generateObject({ model, schema: petSchema, schemaName: 'pet', prompt: 'Describe a pet.',
                                     maxOutputTokens: MAX_TOKENS, temperature: 1, seed, maxRetries: 0 });
    assert.equal(r.finishReason, 'stop', `seed ${seed}`);
    assert.deepEqual(petSchema.parse(r.object), r.object);
    objects.push(JSON.stringify(r.object));
  }
  // Sampled, not a fixed answer: the seeds do not all give the same object.
  assert.ok(new Set(objects).size > 1, objects.join('\n'));
});

const calledWith = [];
const weather = tool({
  description: 'The weather in a city',
  inputSchema: citySchema,
  execute: async ({ city }) => { calledWith.push(city); return `sunny in ${city}`; },
});
const noop = tool({ description: 'Does nothing', inputSchema: z.object({}).strict(), execute: async () => 'done' });

// toolChoice "required" is not tried through the AI SDK: its OpenAI-compatible provider cannot send
// parallel_tool_calls false, and with parallel calls allowed this tiny model never ends its list of
// calls before max tokens (LangChain's test below sends it and passes).
test('AI SDK: a named tool always produces one valid call, which the SDK runs', async () => {
  for (const seed of SEEDS) {
    const named = await generateText({ model, prompt: 'Weather?', tools: { weather, noop },
                                       toolChoice: { type: 'tool', toolName: 'weather' }, maxOutputTokens: MAX_TOKENS,
                                       temperature: 1, seed, maxRetries: 0 });
    assert.equal(named.toolCalls.length, 1, `seed ${seed}`);
    assert.equal(named.toolCalls[0].toolName, 'weather');
    citySchema.parse(named.toolCalls[0].input);
    assert.equal(named.toolResults[0].output, `sunny in ${named.toolCalls[0].input.city}`);
  }
  assert.ok(calledWith.length >= SEEDS.length);
});

test('LangChain: withStructuredOutput, by json_schema and by function calling, parses for every seed', async () => {
  for (const seed of SEEDS) {
    for (const method of ['jsonSchema', 'functionCalling']) {
      const pet = await chatOpenAI(seed).withStructuredOutput(petSchema, { name: 'pet', method })
        .invoke('Describe a pet.');
      assert.deepEqual(petSchema.parse(pet), pet, `seed ${seed}, ${method}`);
    }
  }
});

test('LangChain: bindTools with tool_choice "required" always calls a tool with valid arguments', async () => {
  const schema = { type: 'object', properties: { city: { type: 'string', maxLength: 24 } }, required: ['city'],
                   additionalProperties: false };
  for (const seed of SEEDS) {
    const bound = chatOpenAI(seed).bindTools(
      [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: schema } }],
      { tool_choice: 'required', parallel_tool_calls: false });
    const r = await bound.invoke('What is the weather in Oslo?');
    assert.equal(r.response_metadata.finish_reason, 'tool_calls', `seed ${seed}`);
    assert.ok(r.tool_calls.length >= 1);
    assert.equal(r.tool_calls[0].name, 'get_weather');
    assert.equal(typeof r.tool_calls[0].args.city, 'string');
    assert.deepEqual(r.invalid_tool_calls ?? [], []);
  }
});
