// Ollama's API through its official client (the `ollama` npm package), as Open WebUI, Continue and
// editors speak it: list, ps, show, version, chat and generate streamed and not, multi-turn KV
// reuse (only the new tokens are evaluated), a JSON-schema format, a tool round trip in Qwen2.5's
// template, and errors in Ollama's shape.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { Ollama } from 'ollama';
import { startServer } from './server.mjs';

const NAME = 'stories260K:latest';
const qwenTemplate = () => path.join(path.dirname(process.env.TANGRAM_MODEL), '..', 'chat-templates',
                                     'Qwen-Qwen2.5-7B-Instruct.jinja');

let server;  // the model's own template
let qwen;    // Qwen2.5's template, which takes tools

before(async () => {
  server = await startServer(['--kv-memory', '64MiB', '--log-level', 'warn']);
  qwen = await startServer(['--kv-memory', '64MiB', '--chat-template', qwenTemplate(), '--log-level', 'warn']);
});
after(async () => {
  await server?.stop();
  await qwen?.stop();
});

const client = (s) => new Ollama({ host: s.url });
const greedy = (n) => ({ temperature: 0, num_predict: n });

test('list, ps, show and version describe the served model', async () => {
  const c = client(server);
  const { models } = await c.list();
  assert.equal(models.length, 1);
  assert.equal(models[0].name, NAME);
  assert.equal(models[0].model, NAME);
  assert.ok(models[0].size > 1_000_000);
  assert.equal(models[0].details.format, 'gguf');
  assert.equal(models[0].details.family, 'llama');
  assert.match(models[0].details.parameter_size, /^\d+\.\dK$/);
  assert.ok(!Number.isNaN(Date.parse(models[0].modified_at)));
  const ps = await c.ps();
  assert.equal(ps.models[0].name, NAME);
  const shown = await c.show({ model: NAME });
  assert.ok(shown.template.includes('im_start'));
  assert.ok(shown.capabilities.includes('completion'));
  assert.ok(shown.capabilities.includes('tools'));  // chatml shows none: the server's own
  assert.ok(shown.model_info['llama.context_length'] > 0);
  assert.ok(shown.model_info['general.parameter_count'] > 200_000);
  assert.ok((await client(qwen).show({ model: 'stories260K' })).capabilities.includes('tools'));
  assert.match((await c.version()).version, /^\d+\.\d+\.\d+$/);
});

test('chat: the streamed pieces make the non-streamed answer, with Ollama\'s counts', async () => {
  const args = { model: NAME, messages: [{ role: 'user', content: 'Tell me a story about a cat' }], options: greedy(12) };
  const plain = await client(server).chat(args);
  assert.equal(plain.model, NAME);
  assert.equal(plain.message.role, 'assistant');
  assert.ok(plain.message.content.length > 0);
  assert.equal(plain.done, true);
  assert.equal(plain.done_reason, 'length');
  assert.equal(plain.eval_count, 12);
  assert.ok(plain.prompt_eval_count > 0);
  assert.ok(plain.total_duration >= plain.eval_duration && plain.eval_duration > 0);
  const parts = [];
  for await (const part of await client(server).chat({ ...args, stream: true })) parts.push(part);
  assert.ok(parts.length >= 2);
  assert.ok(parts.slice(0, -1).every((p) => p.done === false));
  const last = parts.at(-1);
  assert.equal(last.done, true);
  assert.equal(last.done_reason, 'length');
  assert.equal(last.eval_count, 12);
  assert.equal(parts.map((p) => p.message.content).join(''), plain.message.content);
});

test('a multi-turn chat evaluates only the new tokens', async () => {
  const messages = [{ role: 'system', content: 'You tell short stories.' },
                    { role: 'user', content: 'Tell me a story about a bird' }];
  const t1 = await client(server).chat({ model: NAME, messages, options: greedy(16) });
  messages.push(t1.message, { role: 'user', content: 'What happened next?' });
  const t2 = await client(server).chat({ model: NAME, messages, options: greedy(16) });
  // Turn 2's prompt holds all of turn 1 and more, yet fewer tokens than turn 1 were evaluated.
  assert.ok(t2.prompt_eval_count > 0);
  assert.ok(t2.prompt_eval_count < t1.prompt_eval_count + t1.eval_count - 1,
            `turn 2 evaluated ${t2.prompt_eval_count} tokens, turn 1 had ${t1.prompt_eval_count} + ${t1.eval_count}`);
});

test('generate: templated and raw, streamed and not; an empty prompt loads', async () => {
  const c = client(server);
  const plain = await c.generate({ model: NAME, prompt: 'Tell me a story about a dog', options: greedy(10) });
  assert.ok(plain.response.length > 0);
  assert.equal(plain.eval_count, 10);
  let streamed = '';
  let last;
  for await (const part of await c.generate({ model: NAME, prompt: 'Tell me a story about a dog', options: greedy(10), stream: true })) {
    streamed += part.response;
    last = part;
  }
  assert.equal(streamed, plain.response);
  assert.equal(last.done, true);
  const raw = await c.generate({ model: NAME, prompt: 'Once upon a time', raw: true, options: greedy(10) });
  assert.ok(raw.prompt_eval_count < plain.prompt_eval_count);  // no template around it
  assert.match(raw.response, /^[ ,.]/);  // the story goes on from the prompt's own words
  const loaded = await c.generate({ model: NAME, prompt: '' });
  assert.equal(loaded.done, true);
  assert.equal(loaded.done_reason, 'load');
});

test('format: a JSON Schema holds the answer to it', async () => {
  const format = { type: 'object', properties: { name: { type: 'string', maxLength: 12 } }, required: ['name'],
                   additionalProperties: false };
  const r = await client(server).chat({ model: NAME, format, options: { ...greedy(96) },
                                        messages: [{ role: 'user', content: 'Name a pet.' }] });
  assert.equal(r.done_reason, 'stop');
  const value = JSON.parse(r.message.content);
  assert.deepEqual(Object.keys(value), ['name']);
  assert.equal(typeof value.name, 'string');
});

test('tools: rendered by the template, and a call with its result continues the chat', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
                   parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const question = { role: 'user', content: 'What is the weather in Oslo?' };
  const withTools = await client(qwen).chat({ model: NAME, tools, messages: [question], options: greedy(8) });
  const without = await client(qwen).chat({ model: NAME, messages: [question], options: greedy(8) });
  assert.ok(withTools.prompt_eval_count > without.prompt_eval_count + 20);
  const answered = await client(qwen).chat({
    model: NAME, tools, options: greedy(8),
    messages: [question,
               { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Oslo' } } }] },
               { role: 'tool', tool_name: 'get_weather', content: 'sunny, 21 C' }],
  });
  assert.ok(answered.message.content.length > 0);
  assert.equal(answered.eval_count, 8);
});

test('errors come as {error} with the status, and the server goes on', async () => {
  const c = client(server);
  await assert.rejects(c.chat({ model: 'llama3:8b', messages: [{ role: 'user', content: 'Hi' }] }),
    (e) => e.name === 'ResponseError' && e.status_code === 404 && /not found/.test(e.error));
  await assert.rejects(c.chat({ model: NAME, messages: [{ role: 'user', content: 'Hi', images: ['AAAA'] }] }),
    (e) => e.status_code === 400 && /images/.test(e.error));
  await assert.rejects(c.generate({ model: NAME, prompt: 'Hi', options: { mirostat: 2 } }),
    (e) => e.status_code === 400 && /mirostat/.test(e.error));
  await assert.rejects(c.show({ model: 'other' }), (e) => e.status_code === 404);
  const ok = await c.chat({ model: NAME, messages: [{ role: 'user', content: 'Hi' }], options: greedy(2) });
  assert.equal(ok.eval_count, 2);
});
