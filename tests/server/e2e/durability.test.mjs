// kill -9 of a server with --kv-disk, mid-stream: after a restart every conversation continues
// from its KV on disk (cached_tokens) and answers exactly as a server that never crashed, both
// conversations named by X-Session-Id and ones the client never named (found by their text).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer } from './server.mjs';

const SESSIONS = 3;
const question = (i) => [{ role: 'user', content: `Tell me story number ${i} about a frog` }];

async function chat(server, id, messages, maxTokens) {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    headers: id ? { 'Content-Type': 'application/json', 'X-Session-Id': id } : { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: maxTokens, temperature: 0 }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  return res.json();
}

test('sessions on disk survive kill -9 mid-stream', { timeout: 300_000 }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tangram-kv-'));
  try {
    // The reference: one server, no disk, no crash.
    const ref = await startServer(['--kv-memory', '64MiB', '--log-level', 'warn']);
    const expected = [];
    const histories = [];
    for (let i = 0; i < SESSIONS; i++) {
      const t1 = await chat(ref, `s${i}`, question(i), 40);
      const history = [...question(i), { role: 'assistant', content: t1.choices[0].message.content }, { role: 'user', content: 'And then?' }];
      histories.push({ history, turn1: t1 });
      expected.push((await chat(ref, `s${i}`, history, 16)).choices[0].message.content);
    }
    await ref.stop();

    const first = await startServer(['--kv-memory', '64MiB', '--log-level', 'warn', '--kv-disk', dir]);
    for (let i = 0; i < SESSIONS; i++) {
      const t1 = await chat(first, `s${i}`, question(i), 40);
      assert.equal(t1.choices[0].message.content, histories[i].turn1.choices[0].message.content);
    }
    // A second turn in flight when the server dies.
    const res = await fetch(`${first.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Session-Id': 's0' },
      body: JSON.stringify({ messages: histories[0].history, max_tokens: 100000, ignore_eos: true, stream: true }),
    });
    const reader = res.body.getReader();
    await reader.read();
    await first.kill();
    await reader.read().catch(() => {});

    const second = await startServer(['--kv-memory', '64MiB', '--log-level', 'warn', '--kv-disk', dir]);
    try {
      for (let i = 0; i < SESSIONS; i++) {
        const t2 = await chat(second, `s${i}`, histories[i].history, 16);
        assert.equal(t2.choices[0].message.content, expected[i], `session s${i}`);
        const t1 = histories[i].turn1;
        assert.ok(t2.usage.prompt_tokens_details.cached_tokens >= t1.usage.prompt_tokens,
          `session s${i} reused only ${t2.usage.prompt_tokens_details.cached_tokens} tokens`);
      }
    } finally {
      await second.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('conversations without an id survive kill -9 too, found by their text', { timeout: 300_000 }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tangram-kv-'));
  try {
    const ref = await startServer(['--kv-memory', '64MiB', '--log-level', 'warn']);
    const histories = [];
    for (let i = 0; i < SESSIONS; i++) {
      const t1 = await chat(ref, null, question(i), 40);
      const history = [...question(i), { role: 'assistant', content: t1.choices[0].message.content }, { role: 'user', content: 'And then?' }];
      const t2 = await chat(ref, null, history, 16);
      histories.push({ history, turn1: t1, expected: t2.choices[0].message.content });
    }
    await ref.stop();

    const first = await startServer(['--kv-memory', '64MiB', '--log-level', 'warn', '--kv-disk', dir]);
    for (let i = 0; i < SESSIONS; i++) await chat(first, null, question(i), 40);
    await first.kill();  // right after the last answer: what the client has seen is on disk

    const second = await startServer(['--kv-memory', '64MiB', '--log-level', 'warn', '--kv-disk', dir]);
    try {
      const listed = (await (await fetch(`${second.url}/v1/sessions`)).json()).data;
      assert.equal(listed.length, SESSIONS, JSON.stringify(listed));
      for (let i = 0; i < SESSIONS; i++) {
        const t2 = await chat(second, null, histories[i].history, 16);
        assert.equal(t2.choices[0].message.content, histories[i].expected, `conversation ${i}`);
        const t1 = histories[i].turn1;
        assert.ok(t2.usage.prompt_tokens_details.cached_tokens >= t1.usage.prompt_tokens,
          `conversation ${i} reused only ${t2.usage.prompt_tokens_details.cached_tokens} tokens`);
        assert.ok(listed.some((s) => s.id === t2.session_id), `conversation ${i} continued as a new one`);
      }
    } finally {
      await second.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
