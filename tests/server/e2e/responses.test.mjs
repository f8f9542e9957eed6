// The Responses API (POST/GET/DELETE /v1/responses) driven by OpenAI's official Node client:
// a chain of turns by previous_response_id reuses its KV, streams parse as typed events, stored
// responses can be read back and deleted, and what the server does not do is refused.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './server.mjs';

let server;
let client;

// Idle conversations leave the pool for the host tier after a second, so a chain can be
// continued from there.
before(async () => {
  server = await startServer(['--kv-memory', '64MiB', '--kv-host-memory', '64MiB', '--kv-idle-offload', '1',
                              '--api-key', 'key-a', '--api-key', 'key-b', '--log-level', 'warn']);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'key-a', maxRetries: 0 });
});
after(async () => { await server?.stop(); });

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const textOf = (r) => r.output[0].content[0].text;

test('a response, and a chain of three that reuses its cache', async () => {
  const r1 = await client.responses.create({ model: 'stories260K', input: 'Tell me a story about a dog',
                                             max_output_tokens: 40, temperature: 0 });
  assert.equal(r1.object, 'response');
  assert.match(r1.id, /^resp_/);
  assert.equal(r1.output[0].type, 'message');
  assert.equal(r1.output[0].role, 'assistant');
  assert.ok(textOf(r1).length > 0);
  assert.equal(r1.output_text, textOf(r1));  // the client's convenience field
  assert.equal(r1.usage.total_tokens, r1.usage.input_tokens + r1.usage.output_tokens);
  let previous = r1;
  for (const question of ['What did the dog do next?', 'How did it end?']) {
    const r = await client.responses.create({ previous_response_id: previous.id, input: question,
                                              max_output_tokens: 24, temperature: 0 });
    assert.equal(r.previous_response_id, previous.id);
    // Everything before this turn's new message was cached: at least 90% of the prompt.
    const cached = r.usage.input_tokens_details.cached_tokens;
    assert.ok(cached >= 0.9 * (previous.usage.input_tokens + previous.usage.output_tokens) - 1,
              `cached ${cached} of ${r.usage.input_tokens}`);
    previous = r;
  }
});

test('a chain continues from the host tier, and only for its key', async () => {
  const r1 = await client.responses.create({ input: 'Tell me a story about a cat', max_output_tokens: 32, temperature: 0 });
  let tier = null;
  for (let i = 0; i < 50 && tier !== 'host'; i++) {
    await sleep(200);
    const sessions = await (await fetch(`${server.url}/v1/sessions`, { headers: { Authorization: 'Bearer key-a' } })).json();
    tier = sessions.data.find((x) => x.id === r1.session_id)?.tier;
  }
  assert.equal(tier, 'host', 'the idle conversation moved to the host tier');
  const r2 = await client.responses.create({ previous_response_id: r1.id, input: 'What next?', max_output_tokens: 8,
                                            temperature: 0 });
  assert.ok(r2.usage.input_tokens_details.cached_tokens >= 0.9 * (r1.usage.input_tokens + r1.usage.output_tokens) - 1,
            `cached ${r2.usage.input_tokens_details.cached_tokens} of ${r2.usage.input_tokens}`);
  const other = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'key-b', maxRetries: 0 });
  await assert.rejects(other.responses.retrieve(r2.id), (e) => e.status === 404);
  await assert.rejects(other.responses.create({ previous_response_id: r2.id, input: 'x' }), (e) => e.status === 404);
});

test('the client\'s responses.stream() helper', async () => {
  const stream = client.responses.stream({ input: 'Once upon a time', max_output_tokens: 12, temperature: 0 });
  let text = '';
  stream.on('response.output_text.delta', (e) => { text += e.delta; });
  const final = await stream.finalResponse();
  assert.equal(final.output_text, text);
  assert.ok(text.length > 0);
});

test('streaming: typed events in order whose text equals the stored response', async () => {
  const stream = await client.responses.create({ input: 'Once upon a time', max_output_tokens: 16,
                                                 temperature: 0, stream: true });
  const types = [];
  let text = '';
  let final = null;
  let sequence = 0;
  for await (const event of stream) {
    assert.equal(event.sequence_number, sequence++);
    types.push(event.type);
    if (event.type === 'response.output_text.delta') text += event.delta;
    if (event.type === 'response.completed' || event.type === 'response.incomplete') final = event.response;
  }
  assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added',
                                       'response.content_part.added']);
  assert.deepEqual(types.slice(-4, -1), ['response.output_text.done', 'response.content_part.done',
                                         'response.output_item.done']);
  assert.ok(final, 'a completed or incomplete event ends the stream');
  assert.equal(text, textOf(final));
  const stored = await client.responses.retrieve(final.id);
  assert.equal(textOf(stored), text);
  assert.equal(stored.usage.output_tokens, final.usage.output_tokens);
});

test('instructions, message items, retrieve and delete', async () => {
  const r = await client.responses.create({
    instructions: 'Answer briefly.',
    input: [{ role: 'user', content: [{ type: 'input_text', text: 'Tell me about a cat' }] }],
    max_output_tokens: 8, metadata: { ticket: '42' },
  });
  assert.equal(r.instructions, 'Answer briefly.');
  assert.deepEqual(r.metadata, { ticket: '42' });
  assert.equal((await client.responses.retrieve(r.id)).id, r.id);
  await client.responses.delete(r.id);
  await assert.rejects(client.responses.retrieve(r.id), (e) => e.status === 404);
  await assert.rejects(client.responses.create({ previous_response_id: r.id, input: 'more' }),
                       (e) => e.status === 404 && e.param === 'previous_response_id');
});

test('text.format json_object holds the output to JSON: it parses, or the response says it was cut', async () => {
  for (const seed of [1, 2, 3]) {
    const r = await client.responses.create({ input: 'Tell me about a cat as JSON.', text: { format: { type: 'json_object' } },
                                              max_output_tokens: 48, temperature: 1, seed });
    assert.deepEqual(r.text.format, { type: 'json_object' });
    if (r.status === 'completed') assert.doesNotThrow(() => JSON.parse(r.output_text), r.output_text);
    else assert.equal(r.incomplete_details?.reason, 'max_output_tokens');
  }
});

test('top_logprobs with include: logprobs on the output_text part and on every delta', async () => {
  const args = { input: 'Tell me a story about a bird', max_output_tokens: 10, temperature: 0, top_logprobs: 3,
                 include: ['message.output_text.logprobs'] };
  const r = await client.responses.create(args);
  assert.equal(r.top_logprobs, 3);
  const part = r.output[0].content[0];
  assert.equal(part.logprobs.length, r.usage.output_tokens);
  for (const e of part.logprobs) {
    assert.ok(e.logprob <= 0);
    assert.equal(e.top_logprobs.length, 3);
    assert.equal(e.top_logprobs[0].token, e.token);  // greedy: the chosen token is the likeliest
  }
  const stream = await client.responses.create({ ...args, stream: true });
  const streamed = [];
  let done = null;
  for await (const event of stream) {
    if (event.type === 'response.output_text.delta') streamed.push(...event.logprobs);
    if (event.type === 'response.output_text.done') done = event.logprobs;
  }
  assert.deepEqual(streamed.map((e) => e.token), part.logprobs.map((e) => e.token));
  assert.deepEqual(done.map((e) => e.logprob), part.logprobs.map((e) => e.logprob));
  const plain = await client.responses.create({ input: 'hi', max_output_tokens: 4 });
  assert.deepEqual(plain.output[0].content[0].logprobs, []);
});

test('what the server does not do is refused with the field named', async () => {
  await assert.rejects(
    client.responses.create({ input: 'hi', tools: [{ type: 'web_search_preview' }] }),
    (e) => e.status === 400 && e.param === 'tools[0].type');
  await assert.rejects(client.responses.create({ input: 'hi', text: { format: { type: 'xml' } } }),
                       (e) => e.status === 400 && e.param === 'text.format.type');
  await assert.rejects(client.responses.create({ input: 'hi', store: false, max_output_tokens: 4 }).then((r) => client.responses.retrieve(r.id)),
                       (e) => e.status === 404);
});
