// `tangram serve` driven by OpenAI's official Node client, and by curl for the raw SSE bytes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import OpenAI from 'openai';
import Ajv from 'ajv';
import { startServer } from './server.mjs';

let server;
let client;

before(async () => {
  server = await startServer(['--kv-memory', '64MiB', '--log-level', 'warn']);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => { await server?.stop(); });

const story = [{ role: 'user', content: 'Tell me a story about a dog' }];

test('chat completion, non-streaming', async () => {
  const r = await client.chat.completions.create({ model: 'stories260K', messages: story, max_tokens: 20, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(r.choices[0].message.content.length > 0);
  assert.equal(r.usage.completion_tokens, 20);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 20);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
});

test('chat completion, streaming, equals the non-streaming answer', async () => {
  const args = { messages: story, max_tokens: 24, temperature: 0 };
  const plain = await client.chat.completions.create(args);
  const stream = await client.chat.completions.create({ ...args, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let role = null;
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    if (chunk.choices.length === 0) continue;
    const c = chunk.choices[0];
    if (c.delta.role) role = c.delta.role;
    if (c.delta.content) text += c.delta.content;
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.ok(chunks >= 3);
  assert.equal(role, 'assistant');
  assert.equal(text, plain.choices[0].message.content);
  assert.equal(finish, plain.choices[0].finish_reason);
  assert.equal(usage.completion_tokens, plain.usage.completion_tokens);
});

test('completions: text and token prompts, streaming and not', async () => {
  const r = await client.completions.create({ model: 'stories260K', prompt: 'Once upon a time', max_tokens: 12, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.ok(r.choices[0].text.length > 0);
  let streamed = '';
  const s = await client.completions.create({ prompt: 'Once upon a time', max_tokens: 12, temperature: 0, stream: true });
  for await (const chunk of s) streamed += chunk.choices[0]?.text ?? '';
  assert.equal(streamed, r.choices[0].text);
  const ids = await client.completions.create({ prompt: [1, 400, 401], max_tokens: 4, temperature: 0 });
  assert.equal(ids.usage.prompt_tokens, 3);
  assert.equal(ids.usage.completion_tokens, 4);
});

test('logprobs and top_logprobs through the client', async () => {
  const r = await client.chat.completions.create({ messages: story, max_tokens: 8, temperature: 0, logprobs: true,
                                                   top_logprobs: 5 });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, 8);
  assert.equal(content.map((e) => e.token).join(''), r.choices[0].message.content);
  for (const e of content) {
    assert.equal(e.top_logprobs.length, 5);
    assert.equal(e.top_logprobs[0].token, e.token);
    assert.ok(e.logprob <= 0);
  }
});

test('response_format json_schema: every reply parses and has the schema shape', async () => {
  const schema = {
    type: 'object', additionalProperties: false, required: ['mood', 'age'],
    properties: { mood: { enum: ['calm', 'cross'] }, age: { type: 'integer' } },
  };
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      messages: story, max_tokens: 200, temperature: 1, seed,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
    });
    assert.equal(r.choices[0].finish_reason, 'stop');
    const value = JSON.parse(r.choices[0].message.content);
    assert.deepEqual(Object.keys(value).sort(), ['age', 'mood']);
    assert.ok(['calm', 'cross'].includes(value.mood));
    assert.ok(Number.isInteger(value.age));
  }
  await assert.rejects(
    client.chat.completions.create({ messages: story, response_format: { type: 'json_schema',
      json_schema: { name: 'p', schema: { type: 'string', pattern: '^a' } } } }),
    (e) => e.status === 400 && e.param === 'response_format.json_schema.schema');
});

test('json_schema (strict) over 16 seeds: every reply validates against the schema (Ajv)', async () => {
  // Every feature the grammar compiles: nested objects, a nullable branch (anyOf), enums, an
  // array with bounds, strings and integers with bounds, booleans. The bounds also bound the
  // reply's length, so each one ends by itself whatever the sampler draws on this CPU.
  const schema = {
    type: 'object', additionalProperties: false,
    required: ['name', 'age', 'tags', 'pet', 'happy'],
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 12 },
      age: { type: 'integer', minimum: 0, maximum: 120 },
      tags: { type: 'array', items: { enum: ['red', 'green', 'blue'] }, minItems: 1, maxItems: 3 },
      pet: { anyOf: [{ type: 'null' }, {
        type: 'object', additionalProperties: false, required: ['kind'],
        properties: { kind: { type: 'string', maxLength: 8 } },
      }] },
      happy: { type: 'boolean' },
    },
  };
  const validate = new Ajv({ strict: true }).compile(schema);
  for (let seed = 1; seed <= 16; ++seed) {
    const r = await client.chat.completions.create({
      messages: story, max_tokens: 400, temperature: 1, seed,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
    });
    const text = r.choices[0].message.content;
    assert.equal(r.choices[0].finish_reason, 'stop', `seed ${seed}: ${text}`);
    assert.ok(validate(JSON.parse(text)), `seed ${seed}: ${text}: ${JSON.stringify(validate.errors)}`);
  }
});

test('models list', async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ['stories260K']);
});

test('multi-turn: the second turn reuses the first turn prompt and reply', async () => {
  const q1 = [{ role: 'system', content: 'You tell short stories.' }, { role: 'user', content: 'A story about a bird' }];
  const t1 = await client.chat.completions.create({ messages: q1, max_tokens: 60, temperature: 0 });
  const history = [...q1, t1.choices[0].message, { role: 'user', content: 'And then?' }];
  const t2 = await client.chat.completions.create({ messages: history, max_tokens: 16, temperature: 0 });
  const expected = t1.usage.prompt_tokens + t1.usage.completion_tokens - (t1.choices[0].finish_reason === 'length' ? 1 : 0);
  assert.equal(t2.usage.prompt_tokens_details.cached_tokens, expected);
  // The explicit session id works through the OpenAI client's extra headers too.
  const t3 = await client.chat.completions.create(
    { messages: [...history, t2.choices[0].message, { role: 'user', content: 'The end?' }], max_tokens: 8, temperature: 0 },
    { headers: { 'X-Session-Id': t2.session_id } });
  assert.ok(t3.usage.prompt_tokens_details.cached_tokens > t2.usage.prompt_tokens);
});

test('errors arrive as OpenAI error objects through the client', async () => {
  await assert.rejects(client.chat.completions.create({ messages: [], max_tokens: 4 }),
    (e) => e.status === 400 && e.error?.param === 'messages');
  await assert.rejects(client.chat.completions.create({ model: 'gpt-4o', messages: story }),
    (e) => e.status === 404 && e.code === 'model_not_found');
  await assert.rejects(client.chat.completions.create({ messages: story, temperature: 7 }),
    (e) => e.status === 400 && e.error?.param === 'temperature');
});

test('raw SSE framing (curl)', () => {
  const body = JSON.stringify({ messages: story, max_tokens: 6, temperature: 0, stream: true, stream_options: { include_usage: true } });
  const out = execFileSync('curl', ['-sN', '-H', 'Content-Type: application/json', '-d', body, `${server.url}/v1/chat/completions`],
    { encoding: 'utf8' });
  assert.ok(out.endsWith('data: [DONE]\n\n'), JSON.stringify(out.slice(-40)));
  const events = out.split('\n\n').filter((e) => e.length > 0);
  for (const e of events) assert.match(e, /^(data: |:)/);
  const data = events.filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));
  assert.equal(data.at(-1), '[DONE]');
  const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
  assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  const finishIdx = chunks.findIndex((c) => c.choices[0]?.finish_reason);
  assert.ok(finishIdx > 0);
  assert.deepEqual(chunks[finishIdx].choices[0].delta, {});
  assert.equal(chunks.at(-1).choices.length, 0);
  assert.equal(chunks.at(-1).usage.completion_tokens, 6);
  for (const c of chunks.slice(0, -1)) assert.equal(c.usage, null);
});

// A forced call, in the server's own (Hermes) syntax since this template shows none: streamed, it
// comes as a first delta with id, type and name, then its arguments in pieces that join into
// what the non-streamed answer holds. (How many pieces depends on how many tokens the server
// finds waiting at each write: the unit tests of the stream formats check the piece-by-piece
// shape.)
const weather = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 24 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
                required: ['city', 'days'], additionalProperties: false } } }];

test('a forced tool call streams as a named first piece and argument pieces', async () => {
  const args = { messages: [{ role: 'user', content: 'Weather in Oslo?' }], tools: weather, max_tokens: 120,
                 tool_choice: { type: 'function', function: { name: 'get_weather' } }, temperature: 0 };
  const plain = await client.chat.completions.create(args);
  assert.equal(plain.choices[0].finish_reason, 'tool_calls');
  const call = plain.choices[0].message.tool_calls[0];
  const stream = await client.chat.completions.create({ ...args, stream: true });
  const pieces = [];
  let first = null;
  let finish = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (c?.finish_reason) finish = c.finish_reason;
    for (const d of c?.delta?.tool_calls ?? []) {
      assert.equal(d.index, 0);
      if (first === null) first = d;
      else assert.equal(d.id, undefined, 'only the first piece names the call');
      pieces.push(d.function.arguments);
    }
  }
  assert.equal(finish, 'tool_calls');
  assert.match(first.id, /^call_/);
  assert.equal(first.type, 'function');
  assert.equal(first.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(pieces.join('')), JSON.parse(call.function.arguments));
});

test('Responses: a forced call streams function_call_arguments.delta pieces under the stored ids', async () => {
  const tools = [{ type: 'function', ...weather[0].function }];
  const stream = await client.responses.create({ model: 'stories260K', input: 'Weather in Oslo?', tools,
                                                 tool_choice: { type: 'function', name: 'get_weather' },
                                                 max_output_tokens: 120, temperature: 0, stream: true });
  const types = [];
  const deltas = [];
  let added = null;
  let done = null;
  let completed = null;
  for await (const e of stream) {
    types.push(e.type);
    if (e.type === 'response.output_item.added' && e.item.type === 'function_call') added = e.item;
    if (e.type === 'response.function_call_arguments.delta') deltas.push(e.delta);
    if (e.type === 'response.function_call_arguments.done') done = e;
    if (e.type === 'response.completed') completed = e.response;
  }
  assert.ok(added && done && completed);
  assert.equal(added.name, 'get_weather');
  assert.ok(deltas.length >= 1);
  assert.ok(types.indexOf('response.output_item.added') < types.indexOf('response.function_call_arguments.delta'));
  assert.deepEqual(JSON.parse(deltas.join('')), JSON.parse(done.arguments));
  const stored = await client.responses.retrieve(completed.id);
  const item = stored.output.find((o) => o.type === 'function_call');
  assert.equal(item.id, added.id);
  assert.equal(item.call_id, added.call_id);
  assert.deepEqual(JSON.parse(item.arguments), JSON.parse(done.arguments));
});
