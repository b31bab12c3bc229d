// Debian's `wrk` as the HTTP load generator (issue 24: the bench's own sequential client added
// 50–160 µs to both sides and never measured concurrency). One thread, N connections, a Lua script
// that round-robins POSTs over the given paths; the script's `done` prints one machine-readable line.
// The wrk process's own CPU is sampled from /proc so a client-bound figure can say so.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readCpu } from './rpc.ts';

export interface WrkResult {
  readonly requests: number;
  readonly perSec: number;
  /** Latency percentiles, µs. */
  readonly p50: number;
  readonly p99: number;
  /** Answers that were not 2xx/3xx, and socket errors (connect, read, write, timeout). */
  readonly badStatus: number;
  readonly socketErrors: number;
  /** The share of one core wrk used over the run (near 1: the client is the bound). */
  readonly clientCore: number;
}

const lua = (s: string) => `"${s.replace(/["\\]/g, '\\$&')}"`;

function script(paths: readonly string[], headers: Record<string, string>, body: string): string {
  return `local paths = { ${paths.map(lua).join(', ')} }
local headers = { ${Object.entries(headers)
    .map(([k, v]) => `[${lua(k)}] = ${lua(v)}`)
    .join(', ')} }
local body = ${lua(body)}
local i = 0
request = function()
  i = i % #paths + 1
  return wrk.format("POST", paths[i], headers, body)
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRK %d %d %d %d %d %d\\n", summary.requests, summary.duration, e.status,
    e.connect + e.read + e.write + e.timeout, latency:percentile(50), latency:percentile(99)))
end
`;
}

/** Runs wrk against 127.0.0.1:port for `seconds` with `connections` connections. */
export async function wrk(
  port: number,
  opts: { connections: number; seconds: number; paths: readonly string[]; headers: Record<string, string>; body: string },
): Promise<WrkResult> {
  const dir = mkdtempSync(join(tmpdir(), 'subrun-bench-wrk-'));
  const file = join(dir, 'post.lua');
  writeFileSync(file, script(opts.paths, opts.headers, opts.body));
  const child = spawn('wrk', ['-t1', `-c${opts.connections}`, `-d${opts.seconds}s`, '--timeout', '10s', '-s', file, `http://127.0.0.1:${port}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  // The last sample before exit is wrk's CPU to within one interval.
  let cpu = 0;
  const t0 = performance.now();
  const sampler = setInterval(() => (cpu = Math.max(cpu, readCpu(child.pid))), 100);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', resolve);
  });
  clearInterval(sampler);
  const secs = (performance.now() - t0) / 1000;
  const m = /^WRK (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)$/m.exec(out);
  if (code !== 0 || !m) throw new Error(`wrk exit ${code}: ${err.trim() || out.trim()}`);
  const [requests, durationUs, badStatus, socketErrors, p50, p99] = m.slice(1).map(Number) as [number, number, number, number, number, number];
  return { requests, perSec: requests / (durationUs / 1e6), p50, p99, badStatus, socketErrors, clientCore: cpu / 1e6 / secs };
}
