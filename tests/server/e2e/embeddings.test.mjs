// Embeddings through the official clients: OpenAI's `embeddings.create` (which asks for base64
// and decodes it) and Ollama's `embed`, on the TinyStories model. Checked: one unit-length vector
// per input in input order, the model's width, the same text giving the same vector through both
// APIs and as token ids, usage counting the tokens /tokenize gives, truncation as each API
// defines it, and embeddings served while a chat is generating.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { startServer } from './server.mjs';

let server;  // pooling as the GGUF says: stories260K says nothing, so the last token's
let mean;    // --pooling mean
let openai;

before(async () => {
  server = await startServer(['--kv-memory', '64MiB', '--log-level', 'warn']);
  mean = await startServer(['--kv-memory', '64MiB', '--pooling', 'mean', '--log-level', 'warn']);
  openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  await server?.stop();
  await mean?.stop();
});

const texts = ['Once upon a time there was a cat.', 'The dog ran to the park.',
               'Once upon a time there was a cat.'];
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const maxDiff = (a, b) => Math.max(...a.map((x, i) => Math.abs(x - b[i])));
// Equal up to rounding: a row's sums may round differently with its place in a batched step.
const SAME = 1e-4;
const post = async (s, path, body) => {
  const r = await fetch(`${s.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
};
const tokenize = async (s, content) =>
  (await post(s, '/tokenize', { content, add_special: true, parse_special: false })).body.tokens;

test('OpenAI embeddings.create: a unit vector per input, in order, usage from the tokens', async () => {
  const r = await openai.embeddings.create({ model: 'stories260K', input: texts });
  assert.equal(r.object, 'list');
  assert.equal(r.data.length, 3);
  const width = r.data[0].embedding.length;
  assert.equal(width, 64);  // stories260K's n_embd
  r.data.forEach((d, i) => {
    assert.equal(d.index, i);
    assert.equal(d.embedding.length, width);
    assert.ok(Math.abs(norm(d.embedding) - 1) < 1e-4, `norm of ${i}`);
  });
  assert.ok(maxDiff(r.data[0].embedding, r.data[2].embedding) < SAME, 'same text, same vector');
  assert.ok(maxDiff(r.data[0].embedding, r.data[1].embedding) > 1e-3, 'different texts differ');
  let tokens = 0;
  for (const t of texts) tokens += (await tokenize(server, t)).length;
  assert.equal(r.usage.prompt_tokens, tokens);
  assert.equal(r.usage.total_tokens, tokens);
  // The client asked for base64 and decoded it; floats give the same numbers.
  const floats = await openai.embeddings.create({ input: texts[1], encoding_format: 'float' });
  assert.ok(maxDiff(floats.data[0].embedding, r.data[1].embedding) < SAME);
});

test('token ids embed as the text that tokenizes to them; too long is refused', async () => {
  const ids = await tokenize(server, texts[1]);
  const r = await openai.embeddings.create({ input: [ids], encoding_format: 'float' });
  const t = await openai.embeddings.create({ input: texts[1], encoding_format: 'float' });
  assert.ok(maxDiff(r.data[0].embedding, t.data[0].embedding) < SAME);
  const long = Array(2100).fill(ids[1]);  // the context holds 2048
  await assert.rejects(openai.embeddings.create({ input: [long] }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.code, 'context_length_exceeded');
    return true;
  });
  await assert.rejects(openai.embeddings.create({ input: '' }), (e) => e.status === 400);
  await assert.rejects(openai.embeddings.create({ input: 'x', dimensions: 32 }), (e) => e.param === 'dimensions');
});

test('Ollama embed gives the OpenAI vectors; truncate decides over-long inputs', async () => {
  const c = new Ollama({ host: server.url });
  const r = await c.embed({ model: 'stories260K', input: texts.slice(0, 2) });
  assert.equal(r.embeddings.length, 2);
  const o = await openai.embeddings.create({ input: texts.slice(0, 2), encoding_format: 'float' });
  for (let i = 0; i < 2; ++i) assert.ok(maxDiff(r.embeddings[i], o.data[i].embedding) < SAME);
  assert.equal(r.prompt_eval_count, o.usage.prompt_tokens);
  assert.ok(r.total_duration > 0);
  const long = 'the cat sat on the mat and '.repeat(250);  // far past 2048 tokens
  const cut = await c.embed({ model: 'stories260K', input: long });
  assert.equal(cut.prompt_eval_count, 2047);  // cut to fit, one position left
  assert.ok(Math.abs(norm(cut.embeddings[0]) - 1) < 1e-4);
  await assert.rejects(c.embed({ model: 'stories260K', input: long, truncate: false }),
                       (e) => e.status_code === 400 && /context/.test(e.error));
  await assert.rejects(c.embed({ model: 'other', input: 'x' }), (e) => e.status_code === 404);
});

test('mean pooling differs from last-token pooling and is still unit length', async () => {
  const last = (await post(server, '/v1/embeddings', { input: texts[0] })).body.data[0].embedding;
  const r = await post(mean, '/v1/embeddings', { input: texts[0] });
  assert.equal(r.status, 200);
  const m = r.body.data[0].embedding;
  assert.ok(Math.abs(norm(m) - 1) < 1e-4);
  assert.ok(maxDiff(m, last) > 1e-3);
  // A one-token input: every pooling is that token's state.
  const one = { input: [[(await tokenize(server, 'cat'))[0]]] };
  const a = (await post(server, '/v1/embeddings', one)).body.data[0].embedding;
  const b = (await post(mean, '/v1/embeddings', one)).body.data[0].embedding;
  assert.ok(maxDiff(a, b) < SAME);
});

test('embeddings are served while a chat streams, and the chat is unchanged', async () => {
  const args = { model: 'stories260K', messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 40, temperature: 0 };
  const alone = await openai.chat.completions.create(args);
  const stream = await openai.chat.completions.create({ ...args, stream: true });
  const embeds = Promise.all([0, 1, 2].map(() => openai.embeddings.create({ input: texts })));
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  const done = await embeds;
  assert.equal(text, alone.choices[0].message.content);
  for (const r of done) assert.equal(r.data.length, 3);
});
