// Hostile HTTP over raw sockets, every case the outside probe found and the protocol cases
// around them: limits held on what is decoded (gzip bombs, chunked bodies), whole-request
// deadlines (a client dripping bytes), slow clients that must not starve /health, Range,
// header floods, smuggling, HTTP/0.9 and HTTP/2 prefaces, oversized URIs, pipelining, log
// injection, ambiguous credentials, and abandoned requests. After all of it the server is up and
// /metrics is back at its baseline.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import zlib from 'node:zlib';
import { startServer, SANITIZED } from './server.mjs';
import { raw as wireRaw, rssBytes as processRss, statusOf } from './wire.mjs';

let server;
before(async () => {
  server = await startServer(['--kv-memory', '64MiB', '--log-level', 'info', '--read-timeout', '2',
                              '--max-body', '1MiB', '--api-key', 'A', '--api-key', 'B']);
});
after(async () => { await server?.stop(); });

const auth = { Authorization: 'Bearer A' };

const raw = (bytes, options) => wireRaw(server.port, bytes, options);

async function metrics() {
  return (await fetch(`${server.url}/metrics`)).text();
}
function metric(text, name) {
  const at = text.indexOf(`\n${name} `);
  return at < 0 ? NaN : Number(text.slice(at + name.length + 2).split('\n')[0]);
}
const rssBytes = () => processRss(server.pid);
async function healthy() {
  const r = await fetch(`${server.url}/health`);
  assert.equal(r.status, 200);
}

test('a gzip bomb and an oversized chunked body get 413 within the decoded limit', async () => {
  const rss0 = rssBytes();
  const bomb = zlib.gzipSync(Buffer.alloc(100 << 20, 'a'), { level: 9 });  // ~100 KB expanding to 100 MiB
  const r = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST', headers: { ...auth, 'Content-Encoding': 'gzip', 'Content-Type': 'application/json' }, body: bomb,
  });
  assert.equal(r.status, 413);
  assert.equal((await r.json()).error.code, 'payload_too_large');
  let chunked = 'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer A\r\nTransfer-Encoding: chunked\r\n\r\n';
  for (let i = 0; i < 40; i++) chunked += `8000\r\n${'x'.repeat(0x8000)}\r\n`;  // 1.25 MiB > 1 MiB
  assert.equal(statusOf(await raw(chunked + '0\r\n\r\n')), 413);
  // Under AddressSanitizer freed memory sits in its quarantine: the resident size says nothing there.
  if (!SANITIZED) assert.ok(rssBytes() - rss0 < 64 << 20, `RSS grew by ${(rssBytes() - rss0) >> 20} MiB`);
  // Within the limit, a gzip body is decoded and served.
  const ok = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', ...auth, 'Content-Encoding': 'gzip' },
    body: zlib.gzipSync(JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 })),
  });
  assert.equal(ok.status, 200);
});

test('a client dripping a byte at a time is cut off after the read timeout, with 408', async () => {
  const reply = await new Promise((resolve) => {
    const sock = net.connect(server.port, '127.0.0.1');
    let got = '';
    const drip = setInterval(() => sock.write('X'), 200);
    sock.on('connect', () => sock.write('POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Drip: '));
    sock.on('data', (d) => { got += d; });
    sock.on('error', () => {});
    const bound = setTimeout(() => sock.destroy(), 30_000);
    sock.on('close', () => { clearInterval(drip); clearTimeout(bound); resolve(got); });
  });
  assert.equal(statusOf(reply), 408, reply);
});

test('a hundred slow connections do not keep /health from answering', async () => {
  const socks = [];
  for (let i = 0; i < 100; i++) {
    const s = net.connect(server.port, '127.0.0.1');
    s.on('error', () => {});
    s.write('POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Le');
    socks.push(s);
  }
  try {
    await healthy();
    const r = await fetch(`${server.url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...auth }, body: JSON.stringify({ prompt: 'Once', max_tokens: 2 }) });
    assert.equal(r.status, 200);
  } finally {
    for (const s of socks) s.destroy();
  }
});

test('Range is ignored, header floods get 431, protocol abuse gets 4xx/5xx and a close', async () => {
  const page = await (await fetch(`${server.url}/`)).text();
  const ranges = 'bytes=0-' + ',0-'.repeat(2000);
  const r = await fetch(`${server.url}/`, { headers: { Range: ranges } });
  assert.equal(r.status, 200);
  assert.equal((await r.text()).length, page.length);
  const m = await fetch(`${server.url}/v1/models`, { headers: { ...auth, Range: ranges } });
  assert.equal(m.status, 200);
  assert.ok(!(m.headers.get('content-type') ?? '').includes('multipart'));

  let flood = 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n';
  for (let i = 0; i < 5000; i++) flood += `X-F${i}: ${'v'.repeat(100)}\r\n`;
  assert.equal(statusOf(await raw(flood + '\r\n')), 431);
  assert.equal(statusOf(await raw(`GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'v'.repeat(200_000)}\r\n\r\n`)), 431);

  const cases = [
    ['HTTP/2 preface', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 505],
    ['HTTP/0.9', 'GET /\r\n\r\n', 400],
    ['smuggling CL+TE', 'POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400],
    ['two Content-Lengths', 'POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde', 400],
    ['bad chunk size', 'POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer A\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', 400],
    ['unknown transfer coding', 'POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n', 501],
    ['unknown content coding', 'POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Encoding: br\r\nContent-Length: 1\r\n\r\nx', 415],
    ['oversized URI', `GET /${'a'.repeat(20_000)} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`, 414],
    ['obs-fold', 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX: a\r\n b\r\n\r\n', 400],
    ['NUL in a header', 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX: a\u0000b\r\n\r\n', 400],
  ];
  for (const [name, bytes, status] of cases) {
    const reply = await raw(bytes);
    assert.equal(statusOf(reply), status, `${name}: ${reply.slice(0, 200)}`);
    assert.match(reply, /"error"/, name);
    await healthy();
  }
});

test('pipelined requests are answered in order on one connection', async () => {
  const body = JSON.stringify({ prompt: 'Once', max_tokens: 2 });
  const one = `POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer A\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  const reply = await raw(one + 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' + 'GET /ready HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
  const statuses = [...reply.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((x) => Number(x[1]));
  assert.deepEqual(statuses, [200, 200, 200]);
  assert.ok(reply.indexOf('"text_completion"') < reply.indexOf('"status":"ok"'));
  assert.ok(reply.indexOf('"status":"ok"') < reply.indexOf('"status":"ready"'));
});

test('control characters never reach the log raw', async () => {
  await raw('GET /%00 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
  await raw('GET /%0d%0aX-Injected:%201 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
  await healthy();
  const log = server.log();
  assert.ok(!log.includes('\r'), 'a raw CR in the log');
  assert.ok(!log.includes('\u0000'), 'a raw NUL in the log');
  for (const line of log.split('\n')) assert.ok(!line.startsWith('X-Injected'), `an injected log line: ${line}`);
});

test('credentials and session ids are taken exactly as sent', async () => {
  const models = (headers) => raw(`GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers}Connection: close\r\n\r\n`);
  assert.equal(statusOf(await models('Authorization: Bearer A\r\n')), 200);
  assert.equal(statusOf(await models('Authorization: bearer A\r\n')), 200);  // the scheme is case-insensitive
  assert.equal(statusOf(await models('Authorization: Bearer A \r\n')), 401);
  assert.equal(statusOf(await models('Authorization: Bearer  A\r\n')), 401);
  assert.equal(statusOf(await models('Authorization: Bearer A\r\nAuthorization: Bearer B\r\n')), 400);
  assert.equal(statusOf(await models('Authorization: Bearer Z\r\nAuthorization: Bearer A\r\n')), 400);
  const chat = (sessionHeader) => fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', ...auth, 'X-Session-Id': sessionHeader },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
  });
  assert.equal((await chat('abc%00def')).status, 400);
  assert.equal((await chat('a%2Fb')).status, 400);
  assert.equal((await chat('good-id.1')).status, 200);
});

test('after all of it: the server is up and /metrics is back at its baseline', async () => {
  await healthy();
  let m = await metrics();
  for (let i = 0; i < 100 && (metric(m, 'tangram_requests_running') !== 0 || metric(m, 'tangram_http_requests_inflight') !== 0); i++) {
    await new Promise((r) => setTimeout(r, 100));
    m = await metrics();
  }
  assert.equal(metric(m, 'tangram_requests_running'), 0);
  assert.equal(metric(m, 'tangram_requests_waiting'), 0);
  assert.equal(metric(m, 'tangram_http_requests_inflight'), 0);
  for (const key of ['A', 'B']) {
    const list = await (await fetch(`${server.url}/v1/sessions`, { headers: { Authorization: `Bearer ${key}` } })).json();
    for (const s of list.data) {
      const r = await fetch(`${server.url}/v1/sessions/${s.id}`, { method: 'DELETE', headers: { Authorization: `Bearer ${key}` } });
      assert.equal(r.status, 200);
    }
  }
  m = await metrics();
  assert.equal(metric(m, 'tangram_kv_pages_used'), 0);
});
