// The chat page served at GET / driven in a real browser (Chromium through playwright-core):
// streaming replies, the stats line, multi-turn KV reuse through X-Session-Id, New chat, and the
// API key field. Run: TANGRAM_BIN=... TANGRAM_MODEL=... node --test chat_page.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { startServer } from './server.mjs';

const WAIT_MS = 60_000;  // for one reply of a tiny model; a bound, not a synchronisation

let browser;

before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox'],
  });
});

after(async () => {
  await browser?.close();
});

// Opens the page in a fresh browser context (empty localStorage) and records what goes wrong in
// it, and every chat request with its headers and body.
async function openPage(url) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const problems = { pageErrors: [], consoleErrors: [] };
  page.on('pageerror', (e) => problems.pageErrors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') problems.consoleErrors.push(m.text()); });
  const chatRequests = [];
  page.on('request', (r) => {
    if (r.url().endsWith('/v1/chat/completions')) chatRequests.push(r);
  });
  const response = await page.goto(url + '/');
  assert.equal(response.status(), 200);
  // Settings that keep replies short and repeatable.
  await page.getByTestId('max-tokens').fill('16');
  await page.getByTestId('temperature').fill('0');
  return { context, page, problems, chatRequests };
}

// Types a message (Shift+Enter between lines), sends it with Enter, and waits for the reply's
// stats line (the n-th, 1-based).
async function sendAndWait(page, text, n) {
  const input = page.getByTestId('input');
  const lines = text.split('\n');
  await input.fill(lines[0]);
  for (const line of lines.slice(1)) {
    await input.press('Shift+Enter');
    await input.pressSequentially(line);
  }
  assert.equal(await input.inputValue(), text, 'Shift+Enter did not make a new line');
  await input.press('Enter');
  await page.getByTestId('stats').nth(n - 1).waitFor({ timeout: WAIT_MS });
  const reply = await page.getByTestId('assistant').nth(n - 1).textContent();
  const stats = await page.getByTestId('stats').nth(n - 1).textContent();
  return { reply, stats };
}

function cachedOf(stats) {
  const m = /cached (\d+)/.exec(stats);
  assert.ok(m, `the stats line "${stats}" shows no "cached N"`);
  return Number(m[1]);
}

test('multi-turn chat streams replies, shows stats and reuses the KV cache', async () => {
  const server = await startServer();
  const { context, page, problems, chatRequests } = await openPage(server.url);
  try {
    // The model name comes from GET /v1/models.
    await page.waitForFunction(() => document.querySelector('[data-testid=model]').textContent !== '',
                               null, { timeout: WAIT_MS });

    const first = await sendAndWait(page, 'Once upon a time there was a little cat.', 1);
    assert.ok(first.reply.trim().length > 0, 'the first reply is empty');
    assert.match(first.stats, /tok\/s/);
    assert.match(first.stats, /TTFT \d+ ms/);
    assert.match(first.stats, /prompt [1-9]\d*/);
    cachedOf(first.stats);

    const second = await sendAndWait(page, 'The cat went\nto the park.', 2);
    assert.ok(second.reply.trim().length > 0, 'the second reply is empty');
    assert.ok(cachedOf(second.stats) > 0, `the second turn reused no cache: "${second.stats}"`);
    assert.equal(await page.getByTestId('assistant').count(), 2);

    // The page sent the whole conversation and the first turn's session back.
    assert.equal(chatRequests.length, 2);
    const firstResponse = await chatRequests[0].response();
    const session = firstResponse.headers()['x-session-id'];
    assert.ok(session, 'the server sent no X-Session-Id');
    assert.equal((await chatRequests[0].allHeaders())['x-session-id'], undefined);
    assert.equal((await chatRequests[1].allHeaders())['x-session-id'], session);
    assert.equal((await chatRequests[0].allHeaders())['authorization'], undefined);
    const body = chatRequests[1].postDataJSON();
    assert.equal(body.stream, true);
    assert.deepEqual(body.stream_options, { include_usage: true });
    assert.equal(body.max_tokens, 16);
    assert.equal(body.temperature, 0);
    assert.deepEqual(body.messages.map((m) => m.role), ['user', 'assistant', 'user']);
    assert.equal(body.messages[1].content, first.reply);
    assert.equal(body.messages[2].content, 'The cat went\nto the park.');

    // New chat forgets the conversation and its session.
    await page.getByTestId('new-chat').click();
    assert.equal(await page.getByTestId('assistant').count(), 0);
    await sendAndWait(page, 'A dog ran fast.', 1);
    assert.equal(chatRequests.length, 3);
    assert.equal((await chatRequests[2].allHeaders())['x-session-id'], undefined);
    assert.deepEqual(chatRequests[2].postDataJSON().messages.map((m) => m.role), ['user']);

    assert.equal(await page.getByTestId('error').isVisible(), false);
    assert.deepEqual(problems.pageErrors, []);
    assert.deepEqual(problems.consoleErrors, []);
  } finally {
    await context.close();
    await server.stop();
  }
});

test('with --api-key the page shows an error until the key is entered', async () => {
  const server = await startServer(['--api-key', 'secret']);
  const { context, page, problems, chatRequests } = await openPage(server.url);
  try {
    const input = page.getByTestId('input');
    await input.fill('Once upon a time');
    await page.getByTestId('send').click();
    const error = page.getByTestId('error');
    await error.waitFor({ state: 'visible', timeout: WAIT_MS });
    assert.match(await error.textContent(), /API key/);
    assert.equal(await page.getByTestId('assistant').count(), 0, 'a failed turn left a bubble');
    assert.equal(await input.inputValue(), 'Once upon a time', 'the failed message was not restored');
    assert.equal((await chatRequests[0].allHeaders())['authorization'], undefined);

    await page.getByTestId('api-key').fill('secret');
    await page.getByTestId('send').click();
    await page.getByTestId('stats').first().waitFor({ timeout: WAIT_MS });
    assert.ok((await page.getByTestId('assistant').first().textContent()).trim().length > 0);
    assert.equal(await error.isVisible(), false);
    assert.equal((await chatRequests[1].allHeaders())['authorization'], 'Bearer secret');
    // The refused turn was undone, not left in the conversation.
    assert.deepEqual(chatRequests[1].postDataJSON().messages, [{ role: 'user', content: 'Once upon a time' }]);

    // The key is remembered: after a reload it is in the field and /v1/models answers.
    await page.reload();
    assert.equal(await page.getByTestId('api-key').inputValue(), 'secret');
    await page.waitForFunction(() => document.querySelector('[data-testid=model]').textContent !== '',
                               null, { timeout: WAIT_MS });

    assert.deepEqual(problems.pageErrors, []);
    // The browser itself logs each refused request (the chat and /v1/models at first load).
    const unexpected = problems.consoleErrors.filter((t) => !/status of 401/.test(t));
    assert.deepEqual(unexpected, []);
    assert.ok(problems.consoleErrors.length > 0, 'no 401 was seen before the key was entered');
  } finally {
    await context.close();
    await server.stop();
  }
});
