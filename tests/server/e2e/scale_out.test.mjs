// Scale-out on loopback through scripts/cluster.sh: Redis + 2 replicas behind HAProxy (consistent
// hash of X-Session-Id). A replica is killed (-9) mid-stream; every conversation continues on the
// surviving replica with its cache restored from Redis (cached_tokens) and answers exactly as a
// single server that never crashed. Then Redis itself dies: turns are still served (recomputed
// or from local memory), and the replica reports Redis down in /metrics.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from './server.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const SESSIONS = 4;
const question = (i) => [{ role: 'user', content: `Tell me story number ${i} about a fox` }];

function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Runs scripts/cluster.sh until "cluster ready"; stop() sends SIGTERM (the script stops all).
async function startCluster(dir) {
  const port = await freePort();
  const args = [path.join(ROOT, 'scripts/cluster.sh'), '--bin', process.env.TANGRAM_BIN, '-m', process.env.TANGRAM_MODEL,
    '--replicas', '2', '--port', String(port), '--dir', dir, '--', '--kv-memory', '64MiB', '--log-level', 'warn'];
  const child = spawn('bash', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let output = '';
  child.stderr.setEncoding('utf8').on('data', (t) => { output = (output + t).slice(-4000); });
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`cluster did not start:\n${output}`)), 300_000);
    child.stdout.setEncoding('utf8').on('data', (t) => {
      output += t;
      if (t.includes('cluster ready')) { clearTimeout(timer); resolve(); }
    });
    exited.then((code) => { clearTimeout(timer); reject(new Error(`cluster.sh exited (${code}):\n${output}`)); });
  });
  const state = (name) => readFileSync(path.join(dir, name), 'utf8').trim();
  return {
    url: `http://127.0.0.1:${port}`,
    replicaUrl: (k) => `http://127.0.0.1:${state(`replica-${k}.port`)}`,
    pid: (name) => Number(state(`${name}.pid`)),
    async stop() { child.kill('SIGTERM'); await exited; },
  };
}

async function chat(url, id, messages, maxTokens) {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    headers: { 'Content-Type': 'application/json', 'X-Session-Id': id },
    body: JSON.stringify({ messages, max_tokens: maxTokens, temperature: 0 }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  return res.json();
}

async function sessionsOn(url) {
  const res = await fetch(`${url}/v1/sessions`);
  return (await res.json()).data.map((s) => s.id);
}

test('a replica dies mid-stream; its conversations continue on another from Redis', { timeout: 600_000 }, async () => {
  // The reference: one server, no crash. Turn 1, turn 2, turn 3 of every session.
  const ref = await startServer(['--kv-memory', '64MiB', '--log-level', 'warn']);
  const histories = [];
  try {
    for (let i = 0; i < SESSIONS; i++) {
      let messages = question(i);
      const turns = [];
      for (const follow of ['And then?', 'How did it end?']) {
        const r = await chat(ref.url, `s${i}`, messages, 24);
        turns.push(r.choices[0].message.content);
        messages = [...messages, { role: 'assistant', content: r.choices[0].message.content }, { role: 'user', content: follow }];
      }
      const last = await chat(ref.url, `s${i}`, messages, 16);
      histories.push({ turns, messages, expected: last.choices[0].message.content });
    }
  } finally {
    await ref.stop();
  }

  const dir = mkdtempSync(path.join(tmpdir(), 'tangram-cluster-'));
  const cluster = await startCluster(dir);
  try {
    // Turns 1 and 2 through the load balancer.
    for (let i = 0; i < SESSIONS; i++) {
      let messages = question(i);
      for (let t = 0; t < 2; t++) {
        const r = await chat(cluster.url, `s${i}`, messages, 24);
        assert.equal(r.choices[0].message.content, histories[i].turns[t], `s${i} turn ${t + 1}`);
        messages = [...messages, { role: 'assistant', content: r.choices[0].message.content },
          { role: 'user', content: t === 0 ? 'And then?' : 'How did it end?' }];
      }
    }
    // Session affinity: each conversation lives on exactly one replica.
    const on = [await sessionsOn(cluster.replicaUrl(1)), await sessionsOn(cluster.replicaUrl(2))];
    for (let i = 0; i < SESSIONS; i++)
      assert.equal(on[0].includes(`s${i}`) + on[1].includes(`s${i}`), 1, `s${i} on ${JSON.stringify(on)}`);
    const victim = on[0].includes('s0') ? 1 : 2;
    const moved = on[victim - 1];

    // Turn 3 of s0 in flight when its replica is killed.
    const res = await fetch(`${cluster.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Session-Id': 's0' },
      body: JSON.stringify({ messages: histories[0].messages, max_tokens: 100000, ignore_eos: true, stream: true }),
    });
    const reader = res.body.getReader();
    await reader.read();
    process.kill(cluster.pid(`replica-${victim}`), 'SIGKILL');
    await reader.read().catch(() => {});
    while (!(await reader.read().catch(() => ({ done: true }))).done) { /* drain what was sent */ }

    // Every conversation's turn 3 (the client retries s0's), through the load balancer.
    for (let i = 0; i < SESSIONS; i++) {
      const r = await chat(cluster.url, `s${i}`, histories[i].messages, 16);
      assert.equal(r.choices[0].message.content, histories[i].expected, `s${i} turn 3`);
      const cached = r.usage.prompt_tokens_details.cached_tokens;
      assert.ok(cached > r.usage.prompt_tokens / 2, `s${i} reused only ${cached} of ${r.usage.prompt_tokens} tokens`);
    }
    const survivor = cluster.replicaUrl(3 - victim);
    const metrics = await (await fetch(`${survivor}/metrics`)).text();
    const restored = Number(/tangram_kv_restores_total\{tier="redis"\} (\d+)/.exec(metrics)[1]);
    assert.equal(restored, moved.length, `sessions restored from Redis:\n${metrics}`);

    // Redis dies: the survivor still serves (local KV, one warning), and says Redis is down.
    process.kill(cluster.pid('redis'), 'SIGKILL');
    const more = [...histories[1].messages, { role: 'assistant', content: histories[1].expected }, { role: 'user', content: 'Thanks!' }];
    const r = await chat(cluster.url, 's1', more, 8);
    assert.ok(r.usage.prompt_tokens_details.cached_tokens > 0);
    // The write-through after that turn runs in the background: wait for it to find Redis gone.
    let after = '';
    for (let i = 0; i < 100 && !/tangram_kv_redis_up 0/.test(after); i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = await (await fetch(`${survivor}/metrics`)).text();
    }
    assert.match(after, /tangram_kv_redis_up 0/);
    assert.match(after, /tangram_kv_redis_errors_total [1-9]/);
  } finally {
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
