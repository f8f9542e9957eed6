// Anthropic's Messages API through its official client (@anthropic-ai/sdk): messages.create,
// messages.stream with the event sequence the SDK assembles, multi-turn KV reuse reported as
// cache-read tokens, count_tokens, stop sequences, a tool round trip and a forced call in Qwen2.5's
// template, x-api-key and Bearer keys, and errors in Anthropic's shape.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { startServer } from './server.mjs';

const KEY = 'anthropic-key';
const MODEL = 'stories260K';
const qwenTemplate = () => path.join(path.dirname(process.env.TANGRAM_MODEL), '..', 'chat-templates',
                                     'Qwen-Qwen2.5-7B-Instruct.jinja');

let server;  // the model's own template
let qwen;    // Qwen2.5's template, which takes tools

before(async () => {
  server = await startServer(['--kv-memory', '64MiB', '--api-key', KEY, '--log-level', 'warn']);
  qwen = await startServer(['--kv-memory', '64MiB', '--api-key', KEY, '--chat-template', qwenTemplate(),
                            '--log-level', 'warn']);
});
after(async () => {
  await server?.stop();
  await qwen?.stop();
});

// The SDK sends the key as x-api-key; authToken sends it as "Authorization: Bearer".
const client = (s, options = {}) => new Anthropic({ apiKey: KEY, baseURL: s.url, maxRetries: 0, ...options });
const greedy = { model: MODEL, temperature: 0 };
const textOf = (message) => message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

test('messages.create: a text message with usage', async () => {
  const m = await client(server).messages.create({
    ...greedy, max_tokens: 16, system: 'You tell short stories.',
    messages: [{ role: 'user', content: 'Tell me a story about a dog' }],
  });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.model, MODEL);
  assert.match(m.id, /^msg_/);
  assert.equal(m.content.length, 1);
  assert.equal(m.content[0].type, 'text');
  assert.ok(m.content[0].text.length > 0);
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.stop_sequence, null);
  assert.equal(m.usage.output_tokens, 16);
  assert.ok(m.usage.input_tokens > 0);
  assert.equal(m.usage.cache_read_input_tokens, 0);
  // The same request again gives the same text (greedy).
  const again = await client(server).messages.create({
    ...greedy, max_tokens: 16, system: 'You tell short stories.',
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Tell me a story about a dog' }] }],
  });
  assert.equal(textOf(again), textOf(m));
});

test('messages.stream: Anthropic\'s event order, and the text messages.create gives', async () => {
  const args = { ...greedy, max_tokens: 20, messages: [{ role: 'user', content: 'Tell me a story about a cat' }] };
  const plain = await client(server).messages.create(args);
  const stream = client(server).messages.stream(args);
  const events = [];
  let streamed = '';
  stream.on('streamEvent', (e) => events.push(e));
  stream.on('text', (delta) => { streamed += delta; });
  const final = await stream.finalMessage();
  const types = events.map((e) => e.type);
  assert.equal(types[0], 'message_start');
  assert.equal(types.at(-1), 'message_stop');
  assert.equal(types.at(-2), 'message_delta');
  assert.equal(types[1], 'content_block_start');
  assert.equal(types.at(-3), 'content_block_stop');
  assert.ok(types.slice(2, -3).every((t) => t === 'content_block_delta'), types.join(' '));
  assert.ok(types.length >= 6);
  assert.equal(streamed, textOf(plain));
  assert.equal(textOf(final), textOf(plain));
  assert.equal(final.stop_reason, 'max_tokens');
  assert.equal(final.usage.output_tokens, 20);
  assert.equal(final.usage.input_tokens, plain.usage.input_tokens);
  // message_start already names the prompt's size; message_delta gives the final split.
  assert.equal(events[0].message.usage.input_tokens, plain.usage.input_tokens);
});

test('a multi-turn conversation reuses the turn before: cache-read tokens, counted like count_tokens', async () => {
  const system = 'You tell short stories.';
  const messages = [{ role: 'user', content: 'Tell me a story about a bird' }];
  const t1 = await client(server).messages.create({ ...greedy, max_tokens: 16, system, messages });
  messages.push({ role: 'assistant', content: t1.content }, { role: 'user', content: 'What happened next?' });
  const t2 = await client(server).messages.create({ ...greedy, max_tokens: 16, system, messages });
  // The whole first turn is cached but for a length-cut reply's last token (decoded, not yet stored).
  const firstTurn = t1.usage.input_tokens + t1.usage.output_tokens - (t1.stop_reason === 'max_tokens' ? 1 : 0);
  assert.ok(t2.usage.cache_read_input_tokens >= firstTurn,
            `cache read ${t2.usage.cache_read_input_tokens}, first turn ${firstTurn}`);
  assert.ok(t2.usage.input_tokens > 0);
  const counted = await client(server).messages.countTokens({ model: MODEL, system, messages });
  assert.equal(counted.input_tokens, t2.usage.input_tokens + t2.usage.cache_read_input_tokens);
});

test('stop_sequences: the reply ends before the sequence, which the message names', async () => {
  const args = { ...greedy, max_tokens: 24, messages: [{ role: 'user', content: 'Tell me a story about a fox' }] };
  const full = textOf(await client(server).messages.create(args));
  const words = full.trim().split(/\s+/).filter((w) => w.length >= 3);
  assert.ok(words.length >= 2, `too few words in ${JSON.stringify(full)}`);
  const stop = words[1];
  const cut = await client(server).messages.create({ ...args, stop_sequences: ['@@never@@', stop] });
  assert.equal(cut.stop_reason, 'stop_sequence');
  assert.equal(cut.stop_sequence, stop);
  assert.equal(textOf(cut), full.slice(0, full.indexOf(stop)));
  // Streamed: message_delta carries the same stop.
  const streamed = await client(server).messages.stream({ ...args, stop_sequences: [stop] }).finalMessage();
  assert.equal(streamed.stop_reason, 'stop_sequence');
  assert.equal(streamed.stop_sequence, stop);
});

test('a tool round trip (tool_use, then tool_result) renders through the template and continues', async () => {
  const tools = [{ name: 'get_weather', description: 'The weather in a city',
                   input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }];
  const question = { role: 'user', content: 'What is the weather in Oslo?' };
  const asked = await client(qwen).messages.create({ ...greedy, max_tokens: 8, tools, messages: [question] });
  const plain = await client(qwen).messages.create({ ...greedy, max_tokens: 8, messages: [question] });
  // The template wrote the tool into the prompt.
  assert.ok(asked.usage.input_tokens > plain.usage.input_tokens + 20);
  const answered = await client(qwen).messages.create({
    ...greedy, max_tokens: 8, tools,
    messages: [question,
               { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Oslo' } }] },
               { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny, 21 C' }] }],
  });
  // The call and its result went into the prompt after the question.
  assert.ok(answered.usage.input_tokens + answered.usage.cache_read_input_tokens > asked.usage.input_tokens + 10);
  assert.ok(textOf(answered).length > 0);
  assert.equal(answered.stop_reason, 'max_tokens');
});

test('tool_choice "tool" forces a call: a tool_use block with valid input, streamed the same', async () => {
  const tools = [{ name: 'get_weather', description: 'The weather in a city',
                   input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 24 } },
                                   required: ['city'], additionalProperties: false } }];
  const args = { ...greedy, max_tokens: 200, tools, tool_choice: { type: 'tool', name: 'get_weather' },
                 messages: [{ role: 'user', content: 'What is the weather in Oslo?' }] };
  const m = await client(qwen).messages.create(args);
  assert.equal(m.stop_reason, 'tool_use');
  const calls = m.content.filter((b) => b.type === 'tool_use');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'get_weather');
  assert.match(calls[0].id, /^toolu_/);
  assert.equal(typeof calls[0].input.city, 'string');
  const streamed = await client(qwen).messages.stream(args).finalMessage();
  assert.equal(streamed.stop_reason, 'tool_use');
  const streamedCalls = streamed.content.filter((b) => b.type === 'tool_use');
  assert.equal(streamedCalls.length, 1);
  assert.deepEqual(streamedCalls[0].input, calls[0].input);
  // Raw events: the tool_use block opens with an empty input, its pieces join into the input.
  let json = '';
  let opened = null;
  for await (const e of await client(qwen).messages.create({ ...args, stream: true })) {
    if (e.type === 'content_block_start' && e.content_block.type === 'tool_use') opened = e.content_block;
    if (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta') json += e.delta.partial_json;
  }
  assert.equal(opened.name, 'get_weather');
  assert.deepEqual(opened.input, {});
  assert.deepEqual(JSON.parse(json), calls[0].input);
});

test('keys: x-api-key and Bearer both work; a wrong key is an AuthenticationError', async () => {
  const bearer = new Anthropic({ authToken: KEY, apiKey: null, baseURL: server.url, maxRetries: 0 });
  const m = await bearer.messages.create({ ...greedy, max_tokens: 2, messages: [{ role: 'user', content: 'Hi' }] });
  assert.equal(m.usage.output_tokens, 2);
  await assert.rejects(
    client(server, { apiKey: 'wrong' }).messages.create({ ...greedy, max_tokens: 2, messages: [{ role: 'user', content: 'Hi' }] }),
    (e) => e instanceof Anthropic.AuthenticationError && e.status === 401 && e.error?.error?.type === 'authentication_error');
});

test('errors come in Anthropic\'s shape, and the server goes on', async () => {
  const c = client(server);
  await assert.rejects(c.messages.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }] }),
    (e) => e instanceof Anthropic.BadRequestError && e.error?.type === 'error' &&
           e.error.error.type === 'invalid_request_error' && /max_tokens/.test(e.error.error.message));
  await assert.rejects(c.messages.create({ model: 'claude-nonexistent', max_tokens: 2, messages: [{ role: 'user', content: 'Hi' }] }),
    (e) => e instanceof Anthropic.NotFoundError && e.error?.error?.type === 'not_found_error');
  await assert.rejects(c.messages.create({ ...greedy, max_tokens: 2,
                                           messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }] }),
    (e) => e instanceof Anthropic.BadRequestError && /image/.test(e.error.error.message));
  // A streamed request refused before it starts is an error response, not a stream.
  await assert.rejects(c.messages.stream({ ...greedy, max_tokens: 2, temperature: 3, messages: [{ role: 'user', content: 'Hi' }] }).finalMessage(),
    (e) => e instanceof Anthropic.BadRequestError && /temperature/.test(e.error.error.message));
  const ok = await c.messages.create({ ...greedy, max_tokens: 2, messages: [{ role: 'user', content: 'Hi' }] });
  assert.equal(ok.usage.output_tokens, 2);
});
