// harness.mjs — what the serve tests share: the openai package (fetched at
// set-up by client-setup.sh; its absence skips, exit 77, except under CI),
// and a `backplane serve` started on a free loopback port.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

export const SKIP = 77;

export async function loadOpenAI() {
  const dir = process.env.BP_OPENAI_DIR;
  const entry = dir ? `${dir}/node_modules/openai/index.mjs` : '';
  if (!entry || !existsSync(entry)) {
    const why = `the npm package openai is not in ${dir || '(BP_OPENAI_DIR unset)'}/node_modules`;
    if (process.env.CI === 'true') throw new Error(`${why}; the serve_client set-up should have fetched it.`);
    console.log(`SKIP: ${why} (scripts/packages.sh, bp_fetch_openai_client).`);
    process.exit(SKIP);
  }
  return (await import(pathToFileURL(entry).href)).default;
}

// Starts `backplane serve --port 0 ...args` and resolves once it listens.
export function startServer(args, env = {}) {
  const bin = process.env.BP_BIN;
  if (!bin) throw new Error('BP_BIN (the backplane program) is not set');
  const proc = spawn(bin, ['serve', '--port', '0', '--host', '127.0.0.1', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`serve did not start in 120 s: ${stderr}`)), 120000);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/[^\s]+)/) ?? out.match(/"url":"(http:\/\/[^"]+)"/);
      if (!m) return;
      clearTimeout(timer);
      resolve({
        url: m[1],
        proc,
        exited,
        stderr: () => stderr,
        async stop() {
          proc.kill('SIGTERM');
          return exited;
        },
      });
    });
    exited.then((e) => { clearTimeout(timer); reject(new Error(`serve exited (${JSON.stringify(e)}): ${stderr}`)); });
  });
}

// Polls GET /metrics until the gauge name reads want (or ms pass).
export async function metricEventually(url, name, want, headers = {}, ms = 10000) {
  const until = Date.now() + ms;
  let last;
  while (Date.now() < until) {
    const text = await (await fetch(`${url}/metrics`, { headers })).text();
    const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
    last = m ? Number(m[1]) : undefined;
    if (last === want) return last;
    await new Promise((r) => setTimeout(r, 50));
  }
  return last;
}
