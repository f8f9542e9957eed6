// The Responses API (POST/GET/DELETE /v1/responses) driven by OpenAI's official Node client:
// a chain of turns by previous_response_id reuses its KV, streams parse as typed events, stored
// responses can be read back and deleted, and what the server does not do is refused.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './server.mjs';

let server;
let client;

before(async () => {
  server = await startServer(['--kv-memory', '64MiB', '--log-level', 'warn']);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => { await server?.stop(); });

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
  await client.responses.del(r.id);
  await assert.rejects(client.responses.retrieve(r.id), (e) => e.status === 404);
  await assert.rejects(client.responses.create({ previous_response_id: r.id, input: 'more' }),
                       (e) => e.status === 404 && e.param === 'previous_response_id');
});

test('what the server does not do is refused with the field named', async () => {
  await assert.rejects(
    client.responses.create({ input: 'hi', tools: [{ type: 'function', name: 'f', parameters: {} }] }),
    (e) => e.status === 400 && e.param === 'tools');
  await assert.rejects(client.responses.create({ input: 'hi', text: { format: { type: 'json_object' } } }),
                       (e) => e.status === 400 && e.param === 'text.format');
  await assert.rejects(client.responses.create({ input: 'hi', store: false, max_output_tokens: 4 }).then((r) => client.responses.retrieve(r.id)),
                       (e) => e.status === 404);
});
