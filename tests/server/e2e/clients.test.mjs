// `tangram serve` driven by the two client libraries agents are built on, as their users call them:
// the Vercel AI SDK (`ai` with `@ai-sdk/openai-compatible`) and LangChain (`@langchain/openai`).
//
// The server runs the real TinyStories model with Qwen2.5's chat template, which takes tools. That
// model has never seen a tool call, so it answers in text: the tool tests check what the server
// does with tools (renders them through the template, takes a tool round trip back, answers with
// a reply the client parses) and that no call is invented, not the model's choice to call.
// Forced calls (tool_choice "required") and structured output need constrained decoding:
// structured_clients.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { generateText, streamText, tool, APICallError } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { HumanMessage, AIMessage, ToolMessage } from '@langchain/core/messages';
import { z } from 'zod';
import { startServer } from './server.mjs';

const KEY = 'client-key';
const qwenTemplate = () => path.join(path.dirname(process.env.TANGRAM_MODEL), '..', 'chat-templates',
                                     'Qwen-Qwen2.5-7B-Instruct.jinja');

let server;
let model;  // the AI SDK's model for this server

before(async () => {
  server = await startServer(['--kv-memory', '64MiB', '--api-key', KEY, '--chat-template', qwenTemplate(),
                              '--log-level', 'warn']);
  model = aiProvider(KEY).chatModel('stories260K');
});
after(async () => { await server?.stop(); });

function aiProvider(apiKey) {
  return createOpenAICompatible({ name: 'tangram', baseURL: `${server.url}/v1`, apiKey, includeUsage: true });
}

function chatOpenAI(fields = {}) {
  return new ChatOpenAI({ model: 'stories260K', apiKey: KEY, configuration: { baseURL: `${server.url}/v1` },
                          maxRetries: 0, temperature: 0, maxTokens: 16, ...fields });
}

// Greedy decoding, so that two requests with the same prompt give the same text.
const greedy = { temperature: 0, maxRetries: 0 };

const weatherSchema = z.object({ city: z.string().describe('the city') });
const executed = [];
const weather = tool({
  description: 'The weather in a city',
  inputSchema: weatherSchema,
  execute: async ({ city }) => { executed.push(city); return `sunny in ${city}, 21 C`; },
});
const weatherFunction = {
  type: 'function',
  function: { name: 'get_weather', description: 'The weather in a city',
              parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};

test('AI SDK: generateText', async () => {
  const r = await generateText({ model, prompt: 'Tell me a story about a dog', maxOutputTokens: 16, ...greedy });
  assert.ok(r.text.length > 0);
  assert.equal(r.finishReason, 'length');
  assert.equal(r.usage.outputTokens, 16);
  assert.equal(r.usage.totalTokens, r.usage.inputTokens + 16);
  assert.equal(r.response.modelId, 'stories260K');
  const again = await generateText({ model, prompt: 'Tell me a story about a dog', maxOutputTokens: 16, ...greedy });
  assert.equal(again.text, r.text);
});

test('AI SDK: streamText streams the generateText answer, with usage', async () => {
  const args = { model, prompt: 'Tell me a story about a cat', maxOutputTokens: 20, ...greedy };
  const plain = await generateText(args);
  const stream = streamText(args);
  const deltas = [];
  for await (const delta of stream.textStream) deltas.push(delta);
  // How many deltas arrive depends on how the reads meet the server's writes (a slow reader gets
  // several tokens per read), so only their text is asserted.
  assert.ok(deltas.length >= 1);
  assert.equal(deltas.join(''), plain.text);
  assert.equal(await stream.text, plain.text);
  assert.equal(await stream.finishReason, 'length');
  const usage = await stream.usage;
  assert.equal(usage.outputTokens, 20);
  assert.equal(usage.inputTokens, plain.usage.inputTokens);
});

test('AI SDK: a multi-turn conversation reuses the cache of the turn before', async () => {
  const system = 'You tell short stories.';
  const messages = [{ role: 'user', content: 'Tell me a story about a bird' }];
  const t1 = await generateText({ model, system, messages, maxOutputTokens: 16, ...greedy });
  messages.push(...t1.response.messages, { role: 'user', content: 'What happened next?' });
  const t2 = await generateText({ model, system, messages, maxOutputTokens: 16, ...greedy });
  // The whole first turn is cached; a reply cut at the length limit has its last token decoded
  // but not yet in the cache.
  const expected = t1.usage.inputTokens + t1.usage.outputTokens - (t1.finishReason === 'length' ? 1 : 0);
  assert.ok(t2.usage.inputTokenDetails.cacheReadTokens >= expected,
            `cached ${t2.usage.inputTokenDetails.cacheReadTokens}, first turn ${expected}`);
  assert.ok(t2.usage.inputTokens > expected);
});

test('AI SDK: generateText with tools renders them and gets a text answer, no invented call', async () => {
  const prompt = 'What is the weather in Oslo?';
  const without = await generateText({ model, prompt, maxOutputTokens: 12, ...greedy });
  const withTools = await generateText({ model, prompt, tools: { weather }, maxOutputTokens: 12, ...greedy });
  // The template wrote the tool's definition into the prompt.
  assert.ok(withTools.usage.inputTokens > without.usage.inputTokens + 20,
            `${withTools.usage.inputTokens} prompt tokens with the tool, ${without.usage.inputTokens} without`);
  // TinyStories writes a story, not a <tool_call>: the reply is text and no call is made.
  assert.ok(withTools.text.length > 0);
  assert.deepEqual(withTools.toolCalls, []);
  assert.equal(withTools.finishReason, 'length');
  assert.deepEqual(executed, []);
  // toolChoice "none" sends tool_choice: "none", which the server takes without rendering tools.
  const none = await generateText({ model, prompt, tools: { weather }, toolChoice: 'none', maxOutputTokens: 12,
                                    ...greedy });
  assert.equal(none.text, without.text);
});

test('AI SDK: a tool round trip (call and result in the history) continues the conversation', async () => {
  const call = { type: 'tool-call', toolCallId: 'call_1', toolName: 'weather', input: { city: 'Oslo' } };
  const result = { type: 'tool-result', toolCallId: 'call_1', toolName: 'weather',
                   output: { type: 'text', value: 'sunny in Oslo, 21 C' } };
  const question = { role: 'user', content: 'What is the weather in Oslo?' };
  const asked = await generateText({ model, tools: { weather }, messages: [question], maxOutputTokens: 8, ...greedy });
  const answered = await generateText({
    model, tools: { weather }, maxOutputTokens: 16, ...greedy,
    messages: [question, { role: 'assistant', content: [call] }, { role: 'tool', content: [result] }],
  });
  assert.ok(answered.text.length > 0);
  // The call and its result went into the prompt after the question and the tools.
  assert.ok(answered.usage.inputTokens > asked.usage.inputTokens + 10,
            `${answered.usage.inputTokens} prompt tokens with the round trip, ${asked.usage.inputTokens} without`);
});

test('AI SDK: errors arrive as APICallError with the status and the server\'s message', async () => {
  await assert.rejects(generateText({ model: aiProvider(KEY).chatModel('gpt-4o'), prompt: 'hi', maxRetries: 0 }), (e) => {
    assert.ok(APICallError.isInstance(e), e.constructor.name);
    assert.equal(e.statusCode, 404);
    assert.match(e.message, /the model 'gpt-4o' does not exist/);
    assert.equal(e.isRetryable, false);
    return true;
  });
  await assert.rejects(generateText({ model: aiProvider('wrong-key').chatModel('stories260K'), prompt: 'hi', maxRetries: 0 }),
                       (e) => APICallError.isInstance(e) && e.statusCode === 401 && /API key/.test(e.message));
  // A request the server refuses (a sampling field out of range) is a 400 with its reason.
  await assert.rejects(generateText({ model, prompt: 'hi', temperature: 7, maxRetries: 0 }),
                       (e) => APICallError.isInstance(e) && e.statusCode === 400 && /temperature/.test(e.message));
});

test('LangChain: ChatOpenAI invoke and stream', async () => {
  const chat = chatOpenAI();
  const r = await chat.invoke([new HumanMessage('Tell me a story about a dog')]);
  assert.ok(r instanceof AIMessage);
  assert.ok(r.content.length > 0);
  assert.equal(r.response_metadata.finish_reason, 'length');
  assert.equal(r.usage_metadata.output_tokens, 16);
  assert.equal(r.usage_metadata.total_tokens, r.usage_metadata.input_tokens + 16);
  let text = '';
  let chunks = 0;
  for await (const chunk of await chat.stream('Tell me a story about a dog')) {
    text += chunk.content;
    chunks++;
  }
  assert.ok(chunks >= 1);  // how many depends on how reads meet writes: only the text is asserted
  assert.equal(text, r.content);
});

test('LangChain: bindTools renders the tools, a tool round trip continues, no invented call', async () => {
  const chat = chatOpenAI({ maxTokens: 12 });
  const question = new HumanMessage('What is the weather in Oslo?');
  const plain = await chat.invoke([question]);
  const bound = chat.bindTools([weatherFunction]);
  const r = await bound.invoke([question]);
  assert.ok(r.usage_metadata.input_tokens > plain.usage_metadata.input_tokens + 20,
            `${r.usage_metadata.input_tokens} prompt tokens with the tool, ${plain.usage_metadata.input_tokens} without`);
  assert.deepEqual(r.tool_calls, []);
  assert.ok(r.content.length > 0);
  // A call and its result in the history: the conversation goes on from them.
  const call = new AIMessage({ content: '', tool_calls: [{ id: 'call_1', name: 'get_weather', args: { city: 'Oslo' } }] });
  const answered = await bound.invoke([question, call, new ToolMessage({ tool_call_id: 'call_1', content: 'sunny, 21 C' })]);
  assert.ok(answered.content.length > 0);
  assert.ok(answered.usage_metadata.input_tokens > r.usage_metadata.input_tokens);
});

test('LangChain: errors arrive as the OpenAI error classes with LangChain\'s error codes', async () => {
  await assert.rejects(chatOpenAI({ model: 'gpt-4o' }).invoke('hi'), (e) => {
    assert.equal(e.status, 404);
    assert.equal(e.lc_error_code, 'MODEL_NOT_FOUND');
    assert.match(e.message, /the model 'gpt-4o' does not exist/);
    return true;
  });
  await assert.rejects(chatOpenAI({ apiKey: 'wrong-key' }).invoke('hi'),
                       (e) => e.status === 401 && e.lc_error_code === 'MODEL_AUTHENTICATION');
});
