// Malformed and hostile requests over real sockets: each gets the right status and an OpenAI
// error object, and the server keeps serving everyone else throughout.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startServer, SANITIZED } from './server.mjs';
import { raw as wireRaw, rssBytes as processRss } from './wire.mjs';

let server;
before(async () => {
  server = await startServer(['--kv-memory', '64MiB', '--log-level', 'error', '--read-timeout', '2',
                              '--max-body', '1MiB']);
});
after(async () => { await server?.stop(); });

const user = [{ role: 'user', content: 'hi' }];
const chat = (extra) => JSON.stringify({ messages: user, max_tokens: 4, ...extra });

// [name, path, raw body (string or Buffer), expected status, method]
const cases = [
  ['broken JSON', '/v1/chat/completions', '{"messages": [', 400],
  ['empty body', '/v1/chat/completions', '', 400],
  ['JSON array body', '/v1/chat/completions', '[1,2,3]', 400],
  ['JSON null body', '/v1/chat/completions', 'null', 400],
  ['invalid UTF-8', '/v1/chat/completions', Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}]}')]), 400],
  ['overlong UTF-8', '/v1/chat/completions', Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}]}')]), 400],
  ['lone surrogate escape', '/v1/chat/completions', '{"messages":[{"role":"user","content":"\\ud800"}]}', 400],
  ['NUL in JSON', '/v1/chat/completions', '{"messages":\u0000[]}', 400],
  ['missing messages', '/v1/chat/completions', '{"max_tokens": 4}', 400],
  ['empty messages', '/v1/chat/completions', '{"messages": []}', 400],
  ['messages as object', '/v1/chat/completions', '{"messages": {"role": "user"}}', 400],
  ['role missing', '/v1/chat/completions', '{"messages": [{"content": "x"}]}', 400],
  ['unknown role', '/v1/chat/completions', '{"messages": [{"role": "root", "content": "x"}]}', 400],
  ['content number', '/v1/chat/completions', '{"messages": [{"role": "user", "content": 12}]}', 400],
  ['image content', '/v1/chat/completions', '{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}', 400],
  ['huge max_tokens', '/v1/chat/completions', chat({ max_tokens: 1e300 }), 400],
  ['max_tokens 2^64', '/v1/chat/completions', '{"messages":[{"role":"user","content":"x"}],"max_tokens":18446744073709551616}', 400],
  ['negative max_tokens', '/v1/chat/completions', chat({ max_tokens: -5 }), 400],
  ['temperature string', '/v1/chat/completions', chat({ temperature: 'warm' }), 400],
  ['temperature 1e400', '/v1/chat/completions', '{"messages":[{"role":"user","content":"x"}],"temperature":1e400}', 400],
  ['top_p 0', '/v1/chat/completions', chat({ top_p: 0 }), 400],
  ['n = 17 (over the limit of 16 choices)', '/v1/chat/completions', chat({ n: 17 }), 400],
  ['tools of no known type', '/v1/chat/completions', chat({ tools: [{ type: 'retrieval', function: { name: 'f' } }] }), 400],
  ['stop not strings', '/v1/chat/completions', chat({ stop: [1, 2] }), 400],
  ['stream not bool', '/v1/chat/completions', chat({ stream: 1 }), 400],
  ['bad session id', '/v1/chat/completions', chat({ session_id: '../../etc/passwd' }), 400],
  ['unknown model', '/v1/chat/completions', chat({ model: 'gpt-5' }), 404],
  ['token ids out of vocabulary', '/v1/completions', '{"prompt": [1, 2, 999999]}', 400],
  ['prompt longer than the context', '/v1/completions', JSON.stringify({ prompt: new Array(5000).fill(7) }), 400],
  ['deeply nested JSON', '/v1/chat/completions', '['.repeat(100000) + ']'.repeat(100000), 400],
  ['best_of 2', '/v1/completions', JSON.stringify({ prompt: 'x', best_of: 2 }), 400],
  ['echo with logprobs', '/v1/completions', JSON.stringify({ prompt: 'x', echo: true, logprobs: 1 }), 400],
  ['web_search_options', '/v1/chat/completions', chat({ web_search_options: {} }), 400],
  ['10 MB body', '/v1/chat/completions', '{"messages":[{"role":"user","content":"' + 'a'.repeat(10 << 20) + '"}]}', 413],
  ['unknown route', '/v1/engines', '{}', 404],
  ['wrong method', '/v1/models', '{}', 405],
];

test(`${cases.length} malformed requests each get their status and an error object`, async () => {
  assert.ok(cases.length >= 30);
  for (const [name, path, body, status] of cases) {
    const res = await fetch(server.url + path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
    const text = await res.text();
    assert.equal(res.status, status, `${name}: ${text.slice(0, 200)}`);
    const j = JSON.parse(text);
    assert.equal(typeof j.error.message, 'string', name);
    assert.ok(j.error.message.length > 0, name);
    // Everyone else is still served.
    const ok = await fetch(server.url + '/v1/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ prompt: 'Once', max_tokens: 2 }) });
    assert.equal(ok.status, 200, `after ${name}`);
  }
});

test('slow-loris headers are dropped after the read timeout while others are served', async () => {
  const sock = net.connect(server.port, '127.0.0.1');
  await new Promise((r) => sock.once('connect', r));
  sock.write('POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl');
  let reply = '';
  sock.on('data', (d) => { reply += d; });  // also keeps the socket flowing, so 'close' can fire
  const closed = new Promise((r) => sock.once('close', r));
  const ok = await fetch(server.url + '/health');
  assert.equal(ok.status, 200);
  const t0 = Date.now();
  await closed;  // the server gives up on the request after its read timeout (2 s) and hangs up
  assert.ok(Date.now() - t0 < 30_000);
  assert.match(reply, /^HTTP\/1\.1 4\d\d /);  // it said so first
});

test('a client that disconnects mid-stream frees its request at once', async () => {
  const ctl = new AbortController();
  const res = await fetch(server.url + '/v1/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, signal: ctl.signal,
    body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 100000, ignore_eos: true, stream: true }),
  });
  const reader = res.body.getReader();
  await reader.read();  // the first chunk has arrived: it is running
  ctl.abort();
  // The server notices on its next write and cancels; the metrics show it.
  let disconnects = 0;
  for (let i = 0; i < 200 && disconnects < 1; i++) {
    const m = await (await fetch(server.url + '/metrics')).text();
    disconnects = Number(/\ntangram_client_disconnects_total (\d+)/.exec(m)?.[1] ?? 0);
    if (disconnects < 1) await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(disconnects, 1);
  const m = await (await fetch(server.url + '/metrics')).text();
  assert.equal(Number(/\ntangram_requests_running (\d+)/.exec(m)[1]), 0);
  const ok = await fetch(server.url + '/v1/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ prompt: 'Once', max_tokens: 2 }) });
  assert.equal(ok.status, 200);
});

test('half a body, then a hang-up, loses nothing', async () => {
  const sock = net.connect(server.port, '127.0.0.1');
  await new Promise((r) => sock.once('connect', r));
  sock.resume();
  sock.end('POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{"messages": [');
  await new Promise((r) => sock.once('close', r));
  const ok = await fetch(server.url + '/v1/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ prompt: 'Once', max_tokens: 2 }) });
  assert.equal(ok.status, 200);
});

// ---- the second probe's cases, in groups; after each group the process is alive, /health
// answers, and its RSS and KV pages are back near where they were. -----------------------------

const rssBytes = () => processRss(server.pid);
async function pagesUsed() {
  const m = await (await fetch(server.url + '/metrics')).text();
  return Number(/\ntangram_kv_pages_used (\d+)/.exec(m)[1]);
}
const raw = (bytes, { end = false } = {}) => wireRaw(server.port, bytes, { untilMs: 20_000, end });
async function group(name, body) {
  const rss0 = rssBytes();
  const pages0 = await pagesUsed();
  await body();
  const health = await fetch(server.url + '/health');
  assert.equal(health.status, 200, `${name}: /health`);
  assert.ok(await pagesUsed() <= pages0 + 16, `${name}: KV pages ${pages0} -> ${await pagesUsed()}`);
  // Under AddressSanitizer freed memory sits in its quarantine: the resident size says nothing there.
  if (!SANITIZED) assert.ok(rssBytes() - rss0 < 96 << 20, `${name}: RSS grew by ${(rssBytes() - rss0) >> 20} MiB`);
}
const json = (path, body, headers = {}) =>
  fetch(server.url + path, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body });

test('the second probe: deep JSON at every entry point, memory, Host, content type, half-close, choices', async () => {
  const deep = (n) => '['.repeat(n) + '1' + ']'.repeat(n);
  await group('deep JSON', async () => {
    for (const n of [5000, 20000, 100000]) {
      const tools = `[{"type":"function","function":{"name":"f","parameters":{"type":"object","x":${deep(n)}}}}]`;
      const args = JSON.stringify(deep(n));
      const bodies = [
        ['/v1/chat/completions', `{"messages":[{"role":"user","content":"hi"}],"tools":${tools}}`],
        ['/v1/chat/completions', `{"messages":[{"role":"user","content":"hi"}],"tools":${tools},"tool_choice":"required"}`],
        ['/v1/chat/completions', `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":${args}}}]}]}`],
        ['/v1/responses', `{"input":"hi","tools":[{"type":"function","name":"f","parameters":${deep(n)}}]}`],
        ['/v1/responses', `{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":${args}}]}`],
        ['/apply-template', `{"messages":[{"role":"user","content":"hi"}],"tools":${tools}}`],
      ];
      for (const [path, body] of bodies) {
        const r = await json(path, body);
        assert.equal(r.status, 400, `${path} at depth ${n}: ${(await r.text()).slice(0, 200)}`);
      }
    }
  });
  await group('bodies that cost memory to parse', async () => {
    // Just under --max-body (1 MiB here) of values that each allocate a container, 8 at once.
    const costly = '[' + '[],'.repeat(349_000) + '[]]';
    const replies = await Promise.all(Array.from({ length: 8 }, () => json('/v1/chat/completions', costly)));
    for (const r of replies) assert.equal(r.status, 400);
  });
  await group('Host and content type', async () => {
    const body = chat({});
    assert.equal((await raw(`POST /v1/chat/completions HTTP/1.1\r\nHost: attacker.example\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${body.length}\r\n\r\n${body}`)).slice(0, 12), 'HTTP/1.1 403');
    const plain = await fetch(server.url + '/v1/chat/completions', { method: 'POST', body });  // text/plain, as a cross-site form would
    assert.equal(plain.status, 415);
    assert.equal((await raw('GET /health HTTP/1.1\r\nConnection: close\r\n\r\n')).slice(0, 12), 'HTTP/1.1 400');
    assert.equal((await raw('\r\n\r\nGET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n')).slice(0, 12), 'HTTP/1.1 200');
    assert.equal((await raw('POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n 2\r\n{}\r\n0\r\n\r\n')).slice(0, 12), 'HTTP/1.1 400');
    assert.equal((await raw('POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\n{}\r\n0\r\n\r\n')).slice(0, 12), 'HTTP/1.1 400');
  });
  await group('half-closed clients', async () => {
    const body = JSON.stringify({ prompt: 'Once upon a time', max_tokens: 8 });
    const reply = await raw(`POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`, { end: true });
    assert.match(reply, /HTTP\/1\.1 200 OK/);
    assert.match(reply, /"finish_reason":"length"/);
  });
  const before = new Set((await (await fetch(server.url + '/v1/sessions')).json()).data.map((x) => x.id));
  await group('choices past the first free their pages', async () => {
    for (let i = 0; i < 4; i++) {
      const r = await json('/v1/completions', JSON.stringify({ prompt: `Story ${i} starts`, max_tokens: 16, n: 8 }));
      assert.equal(r.status, 200);
    }
    const listed = (await (await fetch(server.url + '/v1/sessions')).json()).data;
    const m = await (await fetch(server.url + '/metrics')).text();
    assert.ok(Number(/\ntangram_sessions_resident (\d+)/.exec(m)[1]) <= listed.length);
    // Deleting the conversations these requests made returns every page they held.
    for (const s of listed.filter((x) => !before.has(x.id)))
      assert.equal((await fetch(`${server.url}/v1/sessions/${s.id}`, { method: 'DELETE' })).status, 200);
  });
});

// A property over seeded random bodies: any body under --max-body, at any JSON endpoint, is
// answered 2xx or 4xx (never a 5xx, a dropped connection or a dead server), and the resident
// size afterwards stays within a bound however deep or wide the values were.
function rng(seed) {
  let x = seed >>> 0 || 1;
  return () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x / 2 ** 32; };
}
function randomValue(r, budget) {
  const kind = Math.floor(r() * 9);
  if (budget <= 0 || kind < 3) return [null, true, 12, -1.5e300, 'x', '', '\u00e9'][Math.floor(r() * 7)];
  if (kind === 3) return '['.repeat(Math.floor(r() * 5000)) + ']'.repeat(0);  // a string that looks deep
  if (kind === 4 || kind === 5) {  // deep
    let v = 1;
    const depth = Math.floor(r() * 200);
    for (let i = 0; i < depth; i++) v = r() < 0.5 ? [v] : { k: v };
    return v;
  }
  if (kind === 6) return Array.from({ length: Math.floor(r() * 50_000) }, () => (r() < 0.5 ? [] : {}));  // wide
  const o = {};
  for (let i = 0; i < 1 + Math.floor(r() * 4); i++) o['f' + Math.floor(r() * 10)] = randomValue(r, budget - 1);
  return o;
}
test('property: any body under --max-body at any JSON endpoint gets 2xx or 4xx', async () => {
  const endpoints = [
    ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 },
     ['messages', 'tools', 'tool_choice', 'response_format', 'stop', 'n', 'seed', 'logprobs', 'max_tokens', 'extra']],
    ['/v1/completions', { prompt: 'Once', max_tokens: 2 }, ['prompt', 'stop', 'n', 'echo', 'logprobs', 'extra']],
    ['/v1/responses', { input: 'hi', max_output_tokens: 2 }, ['input', 'tools', 'text', 'instructions', 'extra']],
    ['/tokenize', { content: 'hi' }, ['content', 'with_pieces', 'extra']],
    ['/detokenize', { tokens: [1, 2] }, ['tokens', 'extra']],
    ['/apply-template', { messages: [{ role: 'user', content: 'hi' }] }, ['messages', 'tools', 'extra']],
  ];
  const rss0 = rssBytes();
  for (let seed = 1; seed <= 120; seed++) {
    const r = rng(seed * 7919);
    const [path, base, fields] = endpoints[seed % endpoints.length];
    const body = { ...base, [fields[Math.floor(r() * fields.length)]]: randomValue(r, 3) };
    const text = JSON.stringify(body);
    if (text.length > (1 << 20)) continue;  // the server's --max-body here
    const res = await json(path, text);
    await res.arrayBuffer();
    assert.ok(res.status < 500, `seed ${seed} at ${path}: ${res.status}`);
  }
  assert.equal((await fetch(server.url + '/health')).status, 200);
  if (!SANITIZED) assert.ok(rssBytes() - rss0 < 128 << 20, `RSS grew by ${(rssBytes() - rss0) >> 20} MiB`);
});
