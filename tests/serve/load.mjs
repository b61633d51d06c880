// load.mjs — a bounded load test of `backplane serve`: 64 requests from 16
// concurrent clients against 4 slots (so 12 wait in the queue at a time).
// Every client has its own prompt whose greedy text was first measured
// alone; every one of the 64 answers must be exactly its own prompt's text,
// streamed or not, and all must finish within the time limit.
import assert from 'node:assert/strict';
import { loadOpenAI, startServer, metricEventually } from './harness.mjs';

const OpenAI = await loadOpenAI();
const CLIENTS = 16, PER_CLIENT = 4, MAX_TOKENS = 32, LIMIT_MS = 240000;
const MODEL = 'builtin:test';
const srv = await startServer(['--model', MODEL, '--device', 'cpu', '--threads', '1', '--parallel', '4',
  '--n-ctx', '256', '--max-queue', '64']);
const client = new OpenAI({ apiKey: 'none', baseURL: `${srv.url}/v1`, maxRetries: 0, timeout: LIMIT_MS });
const started = Date.now();
let failed = false;
try {
  const prompts = Array.from({ length: CLIENTS }, (_, i) => `Client ${i} wants ${String.fromCharCode(97 + i).repeat(i + 2)}`);
  const ask = async (prompt, stream) => {
    const req = { model: MODEL, prompt, temperature: 0, max_tokens: MAX_TOKENS };
    if (!stream) return (await client.completions.create(req)).choices[0].text;
    let text = '';
    for await (const ch of await client.completions.create({ ...req, stream: true })) text += ch.choices[0]?.text ?? '';
    return text;
  };
  const alone = [];
  for (const p of prompts) alone.push(await ask(p, false));
  const distinct = new Set(alone).size;
  assert.ok(distinct >= CLIENTS - 1, `the solo answers should differ (${distinct} distinct of ${CLIENTS})`);
  const deadline = new Promise((_, reject) => setTimeout(() => reject(new Error('the load test ran out of time')), LIMIT_MS).unref());
  const results = await Promise.race([deadline, Promise.all(prompts.map(async (p, i) => {
    const out = [];
    for (let k = 0; k < PER_CLIENT; k++) out.push(await ask(p, (i + k) % 2 === 0));
    return out;
  }))]);
  let n = 0;
  results.forEach((texts, i) => texts.forEach((t, k) => {
    assert.equal(t, alone[i], `client ${i}, request ${k}: another prompt's text or a different text`);
    n++;
  }));
  assert.equal(n, CLIENTS * PER_CLIENT);
  assert.equal(await metricEventually(srv.url, 'backplane_slots_busy', 0), 0);
  assert.equal(await metricEventually(srv.url, 'backplane_queue_length', 0), 0);
  console.log(`load: ${n} requests from ${CLIENTS} clients on 4 slots, all equal to their solo text, in ` +
    `${((Date.now() - started) / 1000).toFixed(1)} s`);
} catch (e) {
  failed = true;
  console.error(e);
} finally {
  const e = await srv.stop();
  if (e.code !== 0) {
    console.error(`serve exited with ${JSON.stringify(e)}: ${srv.stderr()}`);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
