#!/usr/bin/env node
// bench-serve.mjs — load a running `backplane serve` (or any OpenAI-compatible
// server) with N concurrent streaming clients and report what its users see:
// aggregate generated tokens per second, time to first token (p50, p99) and
// inter-token latency (p50, p99). Plain fetch, no dependencies.
//
//   node scripts/bench-serve.mjs --url http://127.0.0.1:8080 --clients 8 \
//        --requests 32 --max-tokens 64 [--prompt-words 32] [--api-key KEY] [--json]
//
// Each client sends its requests one after another (greedy, ignore-EOS is
// not an OpenAI field, so a request may end early at end of generation; the
// token counts come from the server's usage). Latencies are measured at the
// client from the SSE events: one event per engine step and request.
const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1] && !all[i + 1].startsWith('--') ? all[i + 1] : true]);
  return acc;
}, []));
if (args.help || !args.url) {
  console.log('usage: node scripts/bench-serve.mjs --url URL [--clients N] [--requests N] [--max-tokens N] ' +
    '[--prompt-words N] [--api-key KEY] [--json]');
  process.exit(args.help ? 0 : 2);
}
const clients = Number(args.clients ?? 8), total = Number(args.requests ?? clients * 4);
const maxTokens = Number(args['max-tokens'] ?? 64), words = Number(args['prompt-words'] ?? 32);
const headers = { 'Content-Type': 'application/json' };
if (args['api-key']) headers.Authorization = `Bearer ${args['api-key']}`;

const vocab = ['river', 'stone', 'light', 'market', 'winter', 'engine', 'garden', 'signal', 'paper', 'orbit'];
const promptFor = (i) => Array.from({ length: words }, (_, k) => vocab[(i * 7 + k * 3) % vocab.length]).join(' ');

async function one(i) {
  const t0 = performance.now();
  const r = await fetch(`${args.url}/v1/completions`, { method: 'POST', headers, body: JSON.stringify({
    prompt: `${i}: ${promptFor(i)}`, max_tokens: maxTokens, temperature: 0, stream: true,
    stream_options: { include_usage: true } }) });
  if (!r.ok) throw new Error(`request ${i}: HTTP ${r.status} ${await r.text()}`);
  const dec = new TextDecoder();
  let buf = '', first = null, last = null, tokens = 0;
  const gaps = [];
  for await (const part of r.body) {
    buf += dec.decode(part, { stream: true });
    let at;
    while ((at = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, at);
      buf = buf.slice(at + 2);
      if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
      const j = JSON.parse(ev.slice(6));
      if (j.usage) tokens = j.usage.completion_tokens;
      if (!j.choices?.length || j.choices[0].finish_reason) continue;
      const now = performance.now();
      if (first === null) first = now - t0;
      else gaps.push(now - last);
      last = now;
    }
  }
  return { ttft: first, gaps, tokens };
}

const pct = (xs, p) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

let next = 0;
const results = [];
const t0 = performance.now();
await Promise.all(Array.from({ length: clients }, async () => {
  while (next < total) results.push(await one(next++));
}));
const wall = (performance.now() - t0) / 1000;
const tokens = results.reduce((a, r) => a + r.tokens, 0);
const ttft = results.map((r) => r.ttft).filter((x) => x !== null);
const itl = results.flatMap((r) => r.gaps);
const report = {
  clients, requests: results.length, max_tokens: maxTokens, generated_tokens: tokens, wall_s: +wall.toFixed(3),
  tokens_per_s: +(tokens / wall).toFixed(2),
  ttft_ms: { p50: +pct(ttft, 50).toFixed(1), p99: +pct(ttft, 99).toFixed(1) },
  itl_ms: { p50: +pct(itl, 50).toFixed(1), p99: +pct(itl, 99).toFixed(1) },
};
if (args.json) console.log(JSON.stringify(report));
else console.log(`${report.requests} requests, ${clients} clients: ${tokens} tokens in ${report.wall_s} s = ` +
  `${report.tokens_per_s} tokens/s; TTFT p50 ${report.ttft_ms.p50} ms, p99 ${report.ttft_ms.p99} ms; ` +
  `inter-token p50 ${report.itl_ms.p50} ms, p99 ${report.itl_ms.p99} ms`);
