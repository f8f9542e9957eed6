// 64 concurrent multi-turn chat clients on loopback against a server that queues at most 16
// beyond its 16 running: only 429s may fail, every page comes back afterwards, and the server's
// metrics agree with what the clients counted.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from './server.mjs';

const CLIENTS = 64;
const TURNS = 3;
let server;
before(async () => {
  server = await startServer(['--kv-memory', '128MiB', '--log-level', 'warn', '--max-running', '16', '--max-queue', '16']);
});
after(async () => { await server?.stop(); });

const metric = (text, name) => {
  const escaped = name.replace(/[{}"=/.[\]]/g, (c) => `\\${c}`);
  const m = new RegExp(`\\n${escaped} ([0-9.e+-]+)`).exec('\n' + text);
  return m ? Number(m[1]) : 0;
};

// One streamed chat turn; returns {status, text, usage, retryAfter}.
async function turn(messages) {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: 16, temperature: 0, stream: true, stream_options: { include_usage: true } }),
  });
  if (res.status !== 200) return { status: res.status, retryAfter: Number(res.headers.get('retry-after')), body: await res.text() };
  let buf = '';
  let text = '';
  let usage = null;
  let done = false;
  const decoder = new TextDecoder();
  for await (const piece of res.body) {
    buf += decoder.decode(piece, { stream: true });
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      if (!event.startsWith('data: ')) continue;
      const data = event.slice(6);
      if (data === '[DONE]') { done = true; continue; }
      const j = JSON.parse(data);
      if (j.error) throw new Error(`stream error: ${j.error.message}`);
      if (j.usage) usage = j.usage;
      text += j.choices[0]?.delta?.content ?? '';
    }
  }
  assert.ok(done, 'the stream ended without [DONE]');
  return { status: 200, text, usage };
}

test(`${CLIENTS} concurrent multi-turn clients`, { timeout: 600_000 }, async () => {
  const counts = { ok: 0, rejected: 0, completion: 0, prompt: 0, cached: 0 };
  const client = async (c) => {
    const messages = [{ role: 'user', content: `Client ${c}: tell me a story about the number ${c}` }];
    for (let t = 0; t < TURNS; t++) {
      for (;;) {
        const r = await turn(messages);
        if (r.status === 429) {
          counts.rejected++;
          assert.ok(r.retryAfter >= 1, 'a 429 without Retry-After');
          await new Promise((ok) => setTimeout(ok, 200 + Math.random() * 800));  // sooner than asked: keeps the test short
          continue;
        }
        assert.equal(r.status, 200, `client ${c} turn ${t}: ${r.body}`);
        counts.ok++;
        counts.completion += r.usage.completion_tokens;
        counts.prompt += r.usage.prompt_tokens;
        counts.cached += r.usage.prompt_tokens_details.cached_tokens;
        if (t > 0) assert.ok(r.usage.prompt_tokens_details.cached_tokens > 0, `client ${c} turn ${t} reused nothing`);
        messages.push({ role: 'assistant', content: r.text }, { role: 'user', content: `And then? (${t})` });
        break;
      }
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
  assert.equal(counts.ok, CLIENTS * TURNS);

  let m = await (await fetch(`${server.url}/metrics`)).text();
  assert.equal(metric(m, 'tangram_http_requests_total{endpoint="/v1/chat/completions",status="200"}'), counts.ok);
  assert.equal(metric(m, 'tangram_http_requests_total{endpoint="/v1/chat/completions",status="429"}'), counts.rejected);
  assert.equal(metric(m, 'tangram_requests_rejected_queue_full_total'), counts.rejected);
  assert.equal(metric(m, 'tangram_generation_tokens_total'), counts.completion);
  assert.equal(metric(m, 'tangram_prompt_tokens_total'), counts.prompt);
  assert.equal(metric(m, 'tangram_prompt_tokens_cached_total'), counts.cached);
  assert.equal(metric(m, 'tangram_time_to_first_token_seconds_count'), counts.ok);
  assert.equal(metric(m, 'tangram_requests_running'), 0);
  assert.equal(metric(m, 'tangram_http_requests_inflight'), 0);
  console.log(`# ${counts.ok} turns, ${counts.rejected} answered 429 and retried, ${counts.cached} of ${counts.prompt} prompt tokens reused`);

  // Every conversation's KV is resident; deleting them returns every page to the pool.
  const sessions = await (await fetch(`${server.url}/v1/sessions`)).json();
  assert.ok(sessions.data.length >= CLIENTS);
  for (const s of sessions.data) {
    const r = await fetch(`${server.url}/v1/sessions/${s.id}`, { method: 'DELETE' });
    assert.equal(r.status, 200);
  }
  m = await (await fetch(`${server.url}/metrics`)).text();
  assert.equal(metric(m, 'tangram_kv_pages_used'), 0);
  assert.equal(metric(m, 'tangram_sessions'), 0);
});
