// n > 1 choices through OpenAI's official Node client: one prefill, n decodes sharing the
// prompt's KV pages; choices indexed, usage counting the prompt once.
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

const story = [{ role: 'user', content: 'Tell me a story about a cat' }];

test('n: 3, greedy: three equal choices, usage counts the prompt once', async () => {
  const one = await client.chat.completions.create({ messages: story, max_tokens: 16, temperature: 0 });
  const r = await client.chat.completions.create({ messages: story, max_tokens: 16, temperature: 0, n: 3 });
  assert.equal(r.choices.length, 3);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  for (const c of r.choices) {
    assert.equal(c.message.content, one.choices[0].message.content);
    assert.equal(c.finish_reason, one.choices[0].finish_reason);
  }
  assert.equal(r.usage.prompt_tokens, one.usage.prompt_tokens);
  assert.equal(r.usage.completion_tokens, 3 * one.usage.completion_tokens);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('n: 3 with temperature: the choices differ, a seed reproduces them', async () => {
  const args = { messages: story, max_tokens: 24, temperature: 1.5, n: 3, seed: 7 };
  const a = await client.chat.completions.create(args);
  const b = await client.chat.completions.create(args);
  const texts = a.choices.map((c) => c.message.content);
  assert.equal(new Set(texts).size, 3, `choices should differ: ${JSON.stringify(texts)}`);
  assert.deepEqual(b.choices.map((c) => c.message.content), texts);
  let completion = 0;
  for (const c of a.choices) completion += c.finish_reason === 'length' ? 24 : 0;
  assert.ok(a.usage.completion_tokens >= completion);
});

test('n: 3, streaming: chunks carry each choice index and end like the non-streamed choices', async () => {
  const args = { messages: story, max_tokens: 20, temperature: 1.5, n: 3, seed: 11 };
  const plain = await client.chat.completions.create(args);
  const stream = await client.chat.completions.create({ ...args, stream: true, stream_options: { include_usage: true } });
  const text = ['', '', ''];
  const finish = [null, null, null];
  const roles = [null, null, null];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) roles[c.index] = c.delta.role;
      if (c.delta.content) text[c.index] += c.delta.content;
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  }
  assert.deepEqual(roles, ['assistant', 'assistant', 'assistant']);
  assert.deepEqual(text, plain.choices.map((c) => c.message.content));
  assert.deepEqual(finish, plain.choices.map((c) => c.finish_reason));
  assert.equal(usage.prompt_tokens, plain.usage.prompt_tokens);
  assert.equal(usage.completion_tokens, plain.usage.completion_tokens);
});

test('completions with n: 2, streaming and not', async () => {
  const args = { prompt: 'Once upon a time', max_tokens: 12, temperature: 0, n: 2 };
  const r = await client.completions.create(args);
  assert.equal(r.choices.length, 2);
  assert.equal(r.choices[0].text, r.choices[1].text);
  assert.equal(r.usage.completion_tokens, 24);
  const streamed = ['', ''];
  for await (const chunk of await client.completions.create({ ...args, stream: true }))
    for (const c of chunk.choices) streamed[c.index] += c.text;
  assert.deepEqual(streamed, [r.choices[0].text, r.choices[1].text]);
});

test('n out of range is refused with a 400 naming n', async () => {
  for (const n of [0, 17])
    await assert.rejects(client.chat.completions.create({ messages: story, max_tokens: 4, n }),
      (e) => e.status === 400 && e.error?.param === 'n');
});
