// Clients and load drivers for the wire cases: a newline-delimited JSON-RPC client over a child
// process's stdio, a WebSocket client, a vscode-jsonrpc client, and two drivers (pipelined with a
// fixed number in flight, and sequential round trips), each bounded in count and in time.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { WebSocket } from 'ws';
import { FloodRun, requestText, type Flood } from './flood.ts';
import { percentile } from './stats.ts';

/** The project's root: the first directory up from here with package.json (the cases also run compiled, from .bench-build/). */
export const ROOT = findRoot(fileURLToPath(new URL('.', import.meta.url)));

function findRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}

/** Sends one request (already framed by the client) and resolves with the parsed reply. */
export type Call = (method: string, params: Record<string, unknown>) => Promise<unknown>;

export interface RpcClient {
  readonly call: Call;
  /**
   * Pipelined load with the client's own cost kept small (stdio clients only): requests are framed
   * by string concatenation and replies are counted by their framing, not parsed, except one in
   * FLOOD_CHECK_EVERY, which must be a result. With a full parse per 2.4 KB reply the client spent
   * more CPU per reply than the servers it measured, and its throughput was the figure.
   */
  readonly flood?: Flood;
  /** Notifications (events) as they arrive. */
  onNotify?: (message: { method: string; params: unknown }) => void;
  close(): Promise<void>;
}

interface Pending {
  resolve(value: unknown): void;
  reject(err: Error): void;
}

/** Matches replies to requests by id; notifications go to onNotify. */
class Matcher {
  readonly pending = new Map<number, Pending>();
  next = 1;
  onNotify?: (message: { method: string; params: unknown }) => void;

  frame(method: string, params: Record<string, unknown>): { id: number; text: string; done: Promise<unknown> } {
    const id = this.next++;
    const done = new Promise<unknown>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    return { id, text: JSON.stringify({ jsonrpc: '2.0', id, method, params }), done };
  }

  receive(text: string): void {
    const msg = JSON.parse(text) as { id?: number; result?: unknown; error?: { code: number; message: string }; method?: string; params?: unknown };
    if (msg.id === undefined || msg.id === null) {
      if (msg.method) this.onNotify?.({ method: msg.method, params: msg.params });
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if (msg.error) p.reject(Object.assign(new Error(`${msg.error.code} ${msg.error.message}`), { code: msg.error.code }));
    else p.resolve(msg.result);
  }

  failAll(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}

export interface ServerProcess {
  readonly child: ChildProcess;
  readonly stderr: () => string;
  /** Resident set size of the server process, in bytes (from /proc). */
  rss(): number;
  /** CPU time (user + system) the process has used so far, µs (from /proc; 10 ms resolution). */
  cpu(): number;
  stop(): Promise<void>;
}

/**
 * Starts `node [args]` from the repository root with piped stdio. BENCH_SERVER_NODE_ARGS adds
 * node flags to every server (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile them).
 */
export function startProcess(args: readonly string[], env: Record<string, string> = {}): ServerProcess {
  const extra = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter((a) => a !== '');
  const child = spawn(process.execPath, [...extra, ...args], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let err = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (d: string) => {
    // Keep the last 256 KiB: enough for every line a case looks for.
    err = (err + d).slice(-256 * 1024);
  });
  return {
    child,
    stderr: () => err,
    rss: () => readRss(child.pid),
    cpu: () => readCpu(child.pid),
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.stdin?.end();
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await once(child, 'exit').catch(() => undefined);
      clearTimeout(timer);
    },
  };
}

export function readRss(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    // /proc/PID/statm: size resident ... in pages.
    const statm = readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ');
    return Number(statm[1]) * 4096;
  } catch {
    return 0;
  }
}

/**
 * CPU time of a live process, µs; 0 once it is gone. The sum of its threads' time on a CPU from
 * /proc/PID/task/TID/schedstat (nanoseconds), so a figure over a short window is exact: utime +
 * stime in /proc/PID/stat count 10 ms ticks, which put ±0.2 ms on a 50-child batch's per-child
 * figure (bench: remote.cp_cpu_per_child read 1.6x–2.6x from run to run on that alone). The ticks
 * are the fallback where schedstat is missing. A thread that exited takes its time with it; the
 * servers measured here keep theirs (the main thread, libuv's pool, V8's workers).
 */
export function readCpu(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    if (Number.isFinite(ns) && ns > 0) return ns / 1000;
  } catch {
    // No schedstat (or a thread went between the listing and its read): the ticks below.
  }
  try {
    // /proc/PID/stat: the command may hold spaces, so count fields after its closing paren;
    // utime and stime are fields 14 and 15, in clock ticks (100 a second on Linux).
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10_000;
  } catch {
    return 0;
  }
}

/** A newline-delimited JSON-RPC client over a process's stdin/stdout. */
export function ndjsonClient(proc: ServerProcess): RpcClient {
  const m = new Matcher();
  const { stdin, stdout } = proc.child;
  if (!stdin || !stdout) throw new Error('process has no stdio pipes');
  let rest = '';
  let flooding: FloodRun | undefined;
  stdout.setEncoding('utf8');
  stdout.on('data', (chunk: string) => {
    let start = 0;
    const text = rest + chunk;
    for (;;) {
      const nl = text.indexOf('\n', start);
      if (nl < 0) break;
      const from = start;
      start = nl + 1;
      if (nl === from) continue;
      if (flooding === undefined) m.receive(text.slice(from, nl));
      else flooding.replied(flooding.checkNext ? text.slice(from, nl) : undefined);
    }
    rest = text.slice(start);
  });
  proc.child.once('exit', () => {
    m.failAll(new Error('server exited'));
    flooding?.failed(new Error('server exited'));
  });
  const client: RpcClient = {
    call(method, params) {
      const f = m.frame(method, params);
      stdin.write(`${f.text}\n`);
      return f.done;
    },
    async flood(method, params, inflight, durationMs) {
      if (m.pending.size > 0) throw new Error('flood: calls are still pending');
      const text = requestText(method, params);
      // Ids far above the matcher's, so a stray reply can never resolve one of its calls.
      const base = 1e9;
      flooding = new FloodRun((id) => stdin.write(`${text(base + id)}\n`), inflight);
      try {
        return await flooding.run(durationMs);
      } finally {
        flooding = undefined;
      }
    },
    async close() {
      await proc.stop();
    },
  };
  Object.defineProperty(client, 'onNotify', { set: (fn) => (m.onNotify = fn), get: () => m.onNotify });
  return client;
}

/**
 * A JSON-RPC client with LSP framing (`Content-Length: N` headers), the framing vscode-jsonrpc's
 * stream reader and writer use. As lean as the NDJSON client, so that the client's own cost is the
 * same whichever server is measured.
 */
export function lspClient(proc: ServerProcess): RpcClient {
  const m = new Matcher();
  const { stdin, stdout } = proc.child;
  if (!stdin || !stdout) throw new Error('process has no stdio pipes');
  let buf: Buffer = Buffer.alloc(0);
  let flooding: FloodRun | undefined;
  stdout.on('data', (chunk: Buffer) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    for (;;) {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const len = Number(/Content-Length: *(\d+)/i.exec(buf.subarray(0, end).toString('latin1'))?.[1]);
      if (buf.length < end + 4 + len) return;
      const body = buf.subarray(end + 4, end + 4 + len);
      if (flooding === undefined) m.receive(body.toString('utf8'));
      else flooding.replied(flooding.checkNext ? body.toString('utf8') : undefined);
      buf = buf.subarray(end + 4 + len);
    }
  });
  proc.child.once('exit', () => {
    m.failAll(new Error('server exited'));
    flooding?.failed(new Error('server exited'));
  });
  const lspFrame = (text: string) => `Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`;
  const client: RpcClient = {
    call(method, params) {
      const f = m.frame(method, params);
      stdin.write(lspFrame(f.text));
      return f.done;
    },
    async flood(method, params, inflight, durationMs) {
      if (m.pending.size > 0) throw new Error('flood: calls are still pending');
      const text = requestText(method, params);
      const base = 1e9;
      flooding = new FloodRun((id) => stdin.write(lspFrame(text(base + id))), inflight);
      try {
        return await flooding.run(durationMs);
      } finally {
        flooding = undefined;
      }
    },
    async close() {
      await proc.stop();
    },
  };
  Object.defineProperty(client, 'onNotify', { set: (fn) => (m.onNotify = fn), get: () => m.onNotify });
  return client;
}

/** A WebSocket JSON-RPC client (one message per text frame). */
export async function wsClient(url: string, token?: string): Promise<RpcClient & { readonly ws: WebSocket }> {
  const m = new Matcher();
  const ws = new WebSocket(url, { perMessageDeflate: false, headers: token ? { Authorization: `Bearer ${token}` } : {} });
  await once(ws, 'open');
  ws.on('message', (data) => m.receive(String(data)));
  ws.on('close', () => m.failAll(new Error('socket closed')));
  const client = {
    ws,
    call(method: string, params: Record<string, unknown>) {
      const f = m.frame(method, params);
      ws.send(f.text);
      return f.done;
    },
    async close() {
      if (ws.readyState === ws.CLOSED) return;
      ws.terminate();
      await once(ws, 'close').catch(() => undefined);
    },
  } as RpcClient & { ws: WebSocket };
  Object.defineProperty(client, 'onNotify', { set: (fn) => (m.onNotify = fn), get: () => m.onNotify });
  return client;
}

/** Reads the server's stderr until `pattern` matches; returns the match. */
export async function waitForStderr(proc: ServerProcess, pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = proc.stderr().match(pattern);
    if (m) return m;
    if (Date.now() > deadline) throw new Error(`no ${pattern} on the server's stderr within ${timeoutMs} ms:\n${proc.stderr().slice(-2000)}`);
    if (proc.child.exitCode !== null) throw new Error(`server exited ${proc.child.exitCode}:\n${proc.stderr().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface PipelinedResult {
  readonly opsPerSec: number;
  readonly completed: number;
}

/**
 * Keeps `inflight` calls outstanding for `durationMs` (after which no new call starts) or until
 * `maxCalls` have been sent, whichever comes first; counts completions per second.
 */
export async function pipelined(call: () => Promise<unknown>, inflight: number, durationMs: number, maxCalls: number): Promise<PipelinedResult> {
  let sent = 0;
  let completed = 0;
  const t0 = performance.now();
  const deadline = t0 + durationMs;
  await new Promise<void>((resolve, reject) => {
    let active = 0;
    const pump = () => {
      while (active < inflight && sent < maxCalls && performance.now() < deadline) {
        active++;
        sent++;
        call().then(
          () => {
            active--;
            completed++;
            if (active === 0 && (sent >= maxCalls || performance.now() >= deadline)) resolve();
            else pump();
          },
          (err: unknown) => reject(err instanceof Error ? err : new Error(String(err))),
        );
      }
      if (active === 0) resolve();
    };
    pump();
  });
  const secs = (performance.now() - t0) / 1000;
  return { opsPerSec: completed / secs, completed };
}

export interface SequentialResult {
  readonly p50: number;
  readonly p99: number;
  readonly count: number;
  /** Every round trip, µs. */
  readonly latencies: number[];
}

/** One call at a time, `count` calls or `durationMs`, whichever comes first; latencies in µs. */
export async function sequential(call: () => Promise<unknown>, count: number, durationMs: number): Promise<SequentialResult> {
  const lat: number[] = [];
  const deadline = performance.now() + durationMs;
  while (lat.length < count && performance.now() < deadline) {
    const t = performance.now();
    await call();
    lat.push((performance.now() - t) * 1000);
  }
  return { p50: percentile(lat, 50), p99: percentile(lat, 99), count: lat.length, latencies: lat };
}
