// openai.mjs — `backplane serve` driven by OpenAI's own Node client (npm
// openai 6.x) and by raw fetch: models, chat and completions, streaming,
// batch invariance under concurrency, client aborts, auth, bad inputs,
// a full queue, and shutdown on SIGTERM.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test, after, before } from 'node:test';
import { loadOpenAI, startServer, metricEventually } from './harness.mjs';

const OpenAI = await loadOpenAI();
const KEY = 'test-key-123';
const MODEL = 'builtin:test';
let srv, client;

before(async () => {
  srv = await startServer(['--model', MODEL, '--device', 'cpu', '--threads', '1', '--parallel', '4',
    '--n-ctx', '256', '--api-key', KEY, '--max-body', '1048576']);
  client = new OpenAI({ apiKey: KEY, baseURL: `${srv.url}/v1`, maxRetries: 0, timeout: 120000 });
});
after(async () => {
  if (srv) {
    const e = await srv.stop();
    assert.equal(e.code, 0, `serve exited with ${JSON.stringify(e)}: ${srv.stderr()}`);
  }
});

const auth = { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' };
const greedy = { temperature: 0, max_tokens: 24 };

async function chat(content, extra = {}) {
  return client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content }], ...greedy, ...extra });
}
async function chatStream(content, extra = {}) {
  const s = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content }], ...greedy, stream: true,
    stream_options: { include_usage: true }, ...extra,
  });
  let text = '', finish = null, usage = null, finishes = 0;
  for await (const ch of s) {
    if (ch.usage) usage = ch.usage;
    for (const c of ch.choices) {
      text += c.delta?.content ?? '';
      if (c.finish_reason) { finish = c.finish_reason; finishes++; }
    }
  }
  assert.equal(finishes, 1, 'exactly one chunk carries a finish_reason');
  return { text, finish, usage };
}

test('GET /v1/models lists the one model', async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [MODEL]);
});

test('chat completion: text, finish_reason and usage', async () => {
  const r = await chat('Say hello.');
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 24);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('completion: max_tokens bounds the text and gives finish_reason length', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', temperature: 0, max_tokens: 5 });
  assert.equal(r.object, 'text_completion');
  assert.ok(r.usage.completion_tokens <= 5);
  if (r.usage.completion_tokens === 5) assert.equal(r.choices[0].finish_reason, 'length');
});

test('streamed text equals non-streamed text (chat and completions)', async () => {
  for (const q of ['The weather today', 'Count to ten', 'éàü — unicode ✓']) {
    const whole = await chat(q);
    const s = await chatStream(q);
    assert.equal(s.text, whole.choices[0].message.content, q);
    assert.equal(s.finish, whole.choices[0].finish_reason);
    assert.deepEqual(s.usage, whole.usage);
  }
  const whole = await client.completions.create({ model: MODEL, prompt: 'abc', ...greedy });
  const s = await client.completions.create({ model: MODEL, prompt: 'abc', ...greedy, stream: true });
  let text = '';
  for await (const ch of s) text += ch.choices[0]?.text ?? '';
  assert.equal(text, whole.choices[0].text);
});

test('8 concurrent greedy streams equal each request sent alone', async () => {
  const prompts = Array.from({ length: 8 }, (_, i) => `Request number ${i}: tell me about ${'xyz'.repeat(i + 1)}`);
  const alone = [];
  for (const p of prompts) alone.push((await chat(p, { max_tokens: 40 })).choices[0].message.content);
  const together = await Promise.all(prompts.map((p) => chatStream(p, { max_tokens: 40 })));
  together.forEach((t, i) => assert.equal(t.text, alone[i], `prompt ${i}`));
});

test('a greedy completion is the text `backplane run` generates for the same prompt', async () => {
  for (const prompt of ['Hello world', 'The quick brown fox']) {
    const r = spawnSync(process.env.BP_BIN, ['run', '--model', MODEL, '--device', 'cpu', '--threads', '1', '--prompt',
      prompt, '--n-gen', '16'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const printed = r.stdout.split('\nmodel:')[0];   // the prompt as read, then the generated text
    assert.ok(printed.startsWith(prompt), printed);
    const c = await client.completions.create({ model: MODEL, prompt, temperature: 0, max_tokens: 16 });
    assert.equal(c.choices[0].text, printed.slice(prompt.length), prompt);
  }
});

test('stop strings end the text before them, streamed or not', async () => {
  const base = (await client.completions.create({ model: MODEL, prompt: 'stop here', temperature: 0, max_tokens: 40 }))
    .choices[0].text;
  const chars = [...base];
  assert.ok(chars.length > 8, `need a longer text than ${JSON.stringify(base)}`);
  const stop = chars.slice(5, 8).join('');
  const want = base.slice(0, base.indexOf(stop));
  const r = await client.completions.create({ model: MODEL, prompt: 'stop here', temperature: 0, max_tokens: 40, stop });
  assert.equal(r.choices[0].text, want);
  assert.equal(r.choices[0].finish_reason, 'stop');
  const s = await client.completions.create({ model: MODEL, prompt: 'stop here', temperature: 0, max_tokens: 40,
    stop: [stop, 'never-appears'], stream: true });
  let text = '';
  for await (const ch of s) text += ch.choices[0]?.text ?? '';
  assert.equal(text, want);
});

test('seeded sampling repeats; logprobs come per token', async () => {
  const a = await chat('Pick a word', { temperature: 0.9, seed: 42 });
  const b = await chat('Pick a word', { temperature: 0.9, seed: 42 });
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  const r = await chat('Pick a word', { logprobs: true, top_logprobs: 3 });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, r.usage.completion_tokens);
  for (const t of lp) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    assert.ok(t.top_logprobs[0].logprob >= t.logprob - 1e-6);   // greedy: the chosen token is the top one
  }
});

test('tokenize and detokenize round-trip', async () => {
  const t = await (await fetch(`${srv.url}/tokenize`, { method: 'POST', headers: auth,
    body: JSON.stringify({ content: 'Hello world' }) })).json();
  assert.ok(t.tokens.length > 0);
  const d = await (await fetch(`${srv.url}/detokenize`, { method: 'POST', headers: auth,
    body: JSON.stringify({ tokens: t.tokens }) })).json();
  assert.equal(d.content, 'Hello world');
});

test('client aborts free their slots', async () => {
  const ctrls = [];
  const runs = [];
  for (let i = 0; i < 4; i++) {
    const ctrl = new AbortController();
    ctrls.push(ctrl);
    runs.push((async () => {
      const s = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: `long ${i}` }],
        temperature: 0, max_tokens: 150, stream: true }, { signal: ctrl.signal });
      let n = 0;
      try {
        for await (const _ of s) if (++n === 2) break;   // leave after two chunks
      } catch (e) { /* aborted */ }
    })());
  }
  // A non-streamed request whose client gives up.
  const ctrl = new AbortController();
  const gone = client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'give up' }],
    temperature: 0, max_tokens: 150 }, { signal: ctrl.signal }).catch((e) => e);
  setTimeout(() => ctrl.abort(), 5);
  await Promise.all(runs);
  await gone;
  assert.equal(await metricEventually(srv.url, 'backplane_slots_busy', 0, auth), 0);
  const r = await chat('still there?');
  assert.ok(r.usage.completion_tokens >= 1);
});

test('authentication', async () => {
  const bad = new OpenAI({ apiKey: 'wrong', baseURL: `${srv.url}/v1`, maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e.status === 401);
  const none = await fetch(`${srv.url}/v1/models`);
  assert.equal(none.status, 401);
  const body = await none.json();
  assert.equal(typeof body.error.message, 'string');
  assert.equal((await fetch(`${srv.url}/health`)).status, 200);   // health needs no key
});

test('bad inputs get their status and an error object; the server still answers', async () => {
  const chatBody = (extra) => JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }], ...extra });
  const cases = [
    ['truncated JSON', 'POST', '/v1/chat/completions', '{"model": "builtin:test", "messages": [', 400, null],
    ['not an object', 'POST', '/v1/chat/completions', '[1, 2]', 400, null],
    ['max_tokens a string', 'POST', '/v1/chat/completions', chatBody({ max_tokens: '10' }), 400, 'max_tokens'],
    ['negative max_tokens', 'POST', '/v1/chat/completions', chatBody({ max_tokens: -5 }), 400, 'max_tokens'],
    ['temperature a string', 'POST', '/v1/chat/completions', chatBody({ temperature: 'hot' }), 400, 'temperature'],
    ['temperature too high', 'POST', '/v1/chat/completions', chatBody({ temperature: 7 }), 400, 'temperature'],
    ['top_p out of range', 'POST', '/v1/chat/completions', chatBody({ top_p: 1.5 }), 400, 'top_p'],
    ['top_k negative', 'POST', '/v1/chat/completions', chatBody({ top_k: -1 }), 400, 'top_k'],
    ['stream not a boolean', 'POST', '/v1/chat/completions', chatBody({ stream: 'yes' }), 400, 'stream'],
    ['stop a number', 'POST', '/v1/chat/completions', chatBody({ stop: 5 }), 400, 'stop'],
    ['n above 1', 'POST', '/v1/chat/completions', chatBody({ n: 2 }), 400, 'n'],
    ['messages not an array', 'POST', '/v1/chat/completions', JSON.stringify({ messages: 'hi' }), 400, 'messages'],
    ['a message without a role', 'POST', '/v1/chat/completions', JSON.stringify({ messages: [{ content: 'hi' }] }), 400,
      'messages[0].role'],
    ['top_logprobs without logprobs', 'POST', '/v1/chat/completions', chatBody({ top_logprobs: 2 }), 400, 'top_logprobs'],
    ['prompt missing', 'POST', '/v1/completions', JSON.stringify({ max_tokens: 3 }), 400, 'prompt'],
    ['prompt token out of range', 'POST', '/v1/completions', JSON.stringify({ prompt: [1, 99999999] }), 400, 'prompt'],
    ['max_tokens past the context', 'POST', '/v1/completions', JSON.stringify({ prompt: 'x', max_tokens: 100000 }), 400,
      'max_tokens'],
    ['unknown model', 'POST', '/v1/chat/completions', chatBody({ model: 'gpt-nope' }), 404, 'model'],
    ['unknown route', 'GET', '/v1/nothing-here', undefined, 404, null],
    ['wrong method', 'GET', '/v1/chat/completions', undefined, 405, null],
    ['a 20 MB body', 'POST', '/v1/chat/completions', chatBody({ pad: 'x'.repeat(20 << 20) }), 413, null],
    ['tokenize without content', 'POST', '/tokenize', '{}', 400, 'content'],
    ['detokenize a bad id', 'POST', '/detokenize', '{"tokens": [-1]}', 400, 'tokens'],
  ];
  for (const [name, method, path, body, status, param] of cases) {
    const r = await fetch(`${srv.url}${path}`, { method, headers: auth, body });
    assert.equal(r.status, status, name);
    const e = (await r.json()).error;
    assert.equal(typeof e.message, 'string', name);
    assert.ok(e.message.length > 10, name);
    assert.equal(typeof e.type, 'string', name);
    assert.ok('param' in e && 'code' in e, name);
    if (param) assert.equal(e.param, param, `${name}: ${e.message}`);
    // The client library turns the same into its typed errors.
  }
  await assert.rejects(chat('x', { max_tokens: -1 }), (e) => e.status === 400 && /max_tokens/.test(e.message));
  assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  assert.ok((await chat('after the bad inputs')).usage.completion_tokens >= 1);
});

test('/metrics counts requests and tokens', async () => {
  const text = await (await fetch(`${srv.url}/metrics`, { headers: auth })).text();
  for (const name of ['backplane_requests_total', 'backplane_prompt_tokens_total', 'backplane_generated_tokens_total',
    'backplane_queue_length', 'backplane_slots_busy', 'backplane_time_to_first_token_seconds_bucket',
    'backplane_request_duration_seconds_count', 'backplane_inter_token_latency_seconds_sum'])
    assert.match(text, new RegExp(`^${name}`, 'm'), name);
  const gen = Number(text.match(/^backplane_generated_tokens_total (\d+)/m)[1]);
  assert.ok(gen > 100);
});

test('a full queue answers 503', async () => {
  const one = await startServer(['--model', MODEL, '--device', 'cpu', '--threads', '1', '--parallel', '1',
    '--max-queue', '0']);
  try {
    const body = JSON.stringify({ prompt: 'busy', temperature: 0, max_tokens: 200 });
    const rs = await Promise.all(Array.from({ length: 6 }, () =>
      fetch(`${one.url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body })));
    const codes = rs.map((r) => r.status);
    assert.ok(codes.includes(503), `statuses ${codes}`);
    assert.ok(codes.every((c) => c === 200 || c === 503), `statuses ${codes}`);
    for (const r of rs) {
      const j = await r.json();
      if (r.status === 503) assert.equal(j.error.type, 'unavailable_error');
    }
  } finally {
    assert.equal((await one.stop()).code, 0);
  }
});

test('usage errors exit 2 with a sentence; --help documents every option', () => {
  for (const [args, word] of [[['--port', 'abc'], '--port'], [['--parallel', '0'], '--parallel'], [['--bogus'], '--bogus'],
    [['--model'], '--model']]) {
    const r = spawnSync(process.env.BP_BIN, ['serve', ...args], { encoding: 'utf8' });
    assert.equal(r.status, 2, args.join(' '));
    assert.ok(r.stderr.includes(word), r.stderr);
  }
  const help = spawnSync(process.env.BP_BIN, ['serve', '--help'], { encoding: 'utf8' }).stdout;
  for (const o of ['--model', '--device', '--threads', '--host', '--port', '--parallel', '--n-ctx', '--max-queue',
    '--api-key', 'BACKPLANE_API_KEY', '--max-body', '--timeout', '--json'])
    assert.ok(help.includes(o), o);
});

test('SIGTERM finishes the requests in flight, then the server exits', async () => {
  const s = await startServer(['--model', MODEL, '--device', 'cpu', '--threads', '1', '--parallel', '2', '--json']);
  const r = await fetch(`${s.url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'finish me', temperature: 0, max_tokens: 200, stream: true }) });
  const reader = r.body.getReader();
  let raw = new TextDecoder().decode((await reader.read()).value);   // the first event
  s.proc.kill('SIGTERM');
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    raw += new TextDecoder().decode(value);
  }
  assert.match(raw, /"finish_reason":"(stop|length)"/);
  assert.match(raw, /data: \[DONE\]\n\n$/);
  assert.equal((await s.exited).code, 0);
});
