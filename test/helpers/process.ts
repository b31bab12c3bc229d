// Process-level test helpers: spawn `node bin/subrun.js ...` as a real child process, read its
// stdout/stderr line by line (LF only, like the protocol), talk JSON-RPC to it over its stdin/stdout
// or over a real WebSocket on 127.0.0.1, and kill whatever was spawned on teardown.
// Every wait is event-driven (a line, a message, an exit) and bounded by a timeout.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import WebSocket, { type ClientOptions } from 'ws';
import { splitLines } from './split.ts';

export const BIN = fileURLToPath(new URL('../../bin/subrun.js', import.meta.url));
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Default bound for one wait. Startup of the bin takes ~1 s, more on a loaded 2-core machine. */
export const WAIT_MS = 15_000;

/** The parent's environment without any SUBRUN_* variable, plus `extra`. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SUBRUN_')) env[k] = v;
  // Each process its own default state directory: a `serve --ws` keeps its state by default, and
  // two servers on one directory refuse each other (docs/durability.md).
  return { ...env, XDG_STATE_HOME: mkdtempSync(join(tmpdir(), 'subrun-state-')), ...extra };
}

/** The state home cleanEnv made for a process (not one the caller gave), removed once it exits. */
function madeStateHome(env: NodeJS.ProcessEnv, extra: Record<string, string>): string | undefined {
  return extra.XDG_STATE_HOME === undefined ? env.XDG_STATE_HOME : undefined;
}

export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<never>((_r, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
    }),
  ]);
}

/** A predicate that throws (e.g. JSON.parse of an unexpected line) is a non-match. */
function safe<T>(pred: (item: T) => boolean, item: T): boolean {
  try {
    return pred(item);
  } catch {
    return false;
  }
}

/**
 * An ordered queue of items with consuming waits: `take(pred)` removes and returns the first
 * buffered item matching `pred`, or waits for one. Items that do not match stay queued.
 */
export class Inbox<T> {
  readonly #items: T[] = [];
  readonly #waiters: { pred: (item: T) => boolean; resolve: (item: T) => void }[] = [];
  /** Everything ever pushed, in order (not consumed by take). */
  readonly all: T[] = [];
  #ended = false;
  #endWaiters: (() => void)[] = [];
  readonly label: string;

  constructor(label: string) {
    this.label = label;
  }

  push(item: T): void {
    this.all.push(item);
    const i = this.#waiters.findIndex((w) => safe(w.pred, item));
    if (i >= 0) {
      const [w] = this.#waiters.splice(i, 1);
      w?.resolve(item);
      return;
    }
    this.#items.push(item);
  }

  end(): void {
    this.#ended = true;
    for (const w of this.#endWaiters.splice(0)) w();
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** Resolves when the source ended (stream end, socket close). */
  whenEnded(ms = WAIT_MS): Promise<void> {
    if (this.#ended) return Promise.resolve();
    return withTimeout(new Promise<void>((resolve) => this.#endWaiters.push(resolve)), ms, `${this.label} to end`);
  }

  take(pred: (item: T) => boolean = () => true, ms = WAIT_MS, what = 'an item'): Promise<T> {
    const i = this.#items.findIndex((item) => safe(pred, item));
    if (i >= 0) return Promise.resolve(this.#items.splice(i, 1)[0] as T);
    let waiter: { pred: (item: T) => boolean; resolve: (item: T) => void } | undefined;
    const p = new Promise<T>((resolve) => {
      waiter = { pred, resolve };
      this.#waiters.push(waiter);
    });
    return withTimeout(p, ms, `${what} on ${this.label}; buffered: ${JSON.stringify(this.#items).slice(0, 600)}`).catch((err: unknown) => {
      const j = waiter ? this.#waiters.indexOf(waiter) : -1;
      if (j >= 0) this.#waiters.splice(j, 1);
      throw err;
    });
  }

  /** Unconsumed items right now. */
  get pending(): readonly T[] {
    return this.#items;
  }
}

/** Splits a byte stream into lines on LF only (a CR before it is kept in the line). */
export function lineInbox(stream: Readable, label: string): Inbox<string> {
  const inbox = new Inbox<string>(label);
  const lines = splitLines((line) => inbox.push(line));
  stream.on('data', (chunk: Buffer) => lines.push(chunk));
  stream.on('end', () => {
    const rest = lines.rest();
    if (rest !== undefined) inbox.push(rest);
    inbox.end();
  });
  return inbox;
}

export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface Proc {
  readonly child: ChildProcessWithoutNullStreams;
  readonly stdout: Inbox<string>;
  readonly stderr: Inbox<string>;
  readonly exited: Promise<Exit>;
  /** Bounded wait for the exit. */
  waitExit(ms?: number): Promise<Exit>;
  /** SIGKILL unless already gone; resolves once it exited. */
  kill(): Promise<void>;
}

const live = new Set<Proc>();

/** Spawns `node bin/subrun.js ...args` with a clean environment (plus `env`). */
export function spawnSubrun(args: readonly string[], env: Record<string, string> = {}): Proc {
  const childEnv = cleanEnv(env);
  const stateHome = madeStateHome(childEnv, env);
  const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: childEnv, stdio: ['pipe', 'pipe', 'pipe'] });
  const name = `subrun ${args.join(' ')}`.slice(0, 80);
  const stdout = lineInbox(child.stdout, `stdout of ${name}`);
  const stderr = lineInbox(child.stderr, `stderr of ${name}`);
  // The tests may close stdin or kill the child while writing; a broken pipe is expected then.
  child.stdin.on('error', () => undefined);
  const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const proc: Proc = {
    child,
    stdout,
    stderr,
    exited,
    waitExit: (ms = WAIT_MS) => withTimeout(exited, ms, `${name} to exit; stderr: ${stderr.all.join('\n').slice(0, 800)}`),
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
      live.delete(proc);
    },
  };
  live.add(proc);
  void exited.then(() => {
    live.delete(proc);
    if (stateHome !== undefined) rmSync(stateHome, { recursive: true, force: true });
  });
  return proc;
}

/** Kills every process spawned through this module that is still running. */
export async function killAll(): Promise<void> {
  await Promise.all([...live].map((p) => p.kill()));
}

/** Runs `subrun ...args` to completion; returns its exit code and whole output. */
export async function runSubrun(
  args: readonly string[],
  env: Record<string, string> = {},
  ms = 30_000,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  const p = spawnSubrun(args, env);
  p.child.stdin.end();
  try {
    const exit = await p.waitExit(ms);
    await Promise.all([p.stdout.whenEnded(), p.stderr.whenEnded()]);
    return { ...exit, stdout: p.stdout.all.join('\n'), stderr: p.stderr.all.join('\n') };
  } finally {
    await p.kill();
  }
}

export interface WsServer {
  readonly proc: Proc;
  readonly url: string;
  readonly port: number;
  readonly token: string;
}

/**
 * Spawns `serve --ws --port 0 ...` and waits for the listening line. `token: null` passes no
 * --token: the token is then SUBRUN_TOKEN from `env`, or the generated one printed to stderr.
 */
export async function startWsServer(extraArgs: readonly string[] = [], opts: { token?: string | null; env?: Record<string, string> } = {}): Promise<WsServer> {
  const token = opts.token === undefined ? 'test-token' : opts.token;
  const args = ['serve', '--ws', '--port', '0', ...(token === null ? [] : ['--token', token]), ...extraArgs];
  const proc = spawnSubrun(args, opts.env);
  const listening = await proc.stderr.take((l) => l.startsWith('subrun listening on '), WAIT_MS, 'the listening line');
  const url = listening.slice('subrun listening on '.length).trim();
  const port = Number(new URL(url).port);
  let actual = token ?? opts.env?.SUBRUN_TOKEN ?? null;
  if (actual === null) {
    const line = await proc.stderr.take((l) => l.startsWith('subrun token: '), WAIT_MS, 'the token line');
    actual = line.slice('subrun token: '.length).trim();
  }
  return { proc, url, port, token: actual };
}

// ---- JSON-RPC peers ----

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export interface Msg {
  jsonrpc?: unknown;
  id?: unknown;
  method?: unknown;
  params?: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}
/** A received message: one object, or a batch reply (an array). */
export type Received = Msg | Msg[];

export const isEvent = (m: Received): boolean => !Array.isArray(m) && m.method === 'event';
export const isReply = (m: Received): boolean => !isEvent(m);

/** A JSON-RPC peer over any transport: raw text out, parsed messages in. */
export interface Peer {
  readonly name: string;
  /** Sends one raw message (a stdio line without its LF, or one WebSocket text frame). */
  send(text: string): void;
  /** Every parsed message in arrival order, consumed by take(). */
  readonly inbox: Inbox<Received>;
  close(): Promise<void>;
}

let nextId = 0;

/** Sends a request and waits for the reply with its id (events and other replies stay queued). */
export async function request(peer: Peer, method: string, params?: unknown, ms = WAIT_MS): Promise<Msg> {
  const id = `req-${++nextId}`;
  const msg: Record<string, unknown> = { jsonrpc: '2.0', id, method };
  if (params !== undefined) msg.params = params;
  peer.send(JSON.stringify(msg));
  return (await peer.inbox.take((m) => !Array.isArray(m) && m.id === id, ms, `the reply to ${method}`)) as Msg;
}

/** Like request() but returns the result, throwing on an error reply. */
export async function call<T = Record<string, unknown>>(peer: Peer, method: string, params?: unknown): Promise<T> {
  const r = await request(peer, method, params);
  if (r.error) throw new Error(`${method} failed: ${JSON.stringify(r.error)}`);
  return r.result as T;
}

/** The next message that is not an event notification. */
export function nextReply(peer: Peer, ms = WAIT_MS): Promise<Received> {
  return peer.inbox.take(isReply, ms, 'the next reply');
}

export interface WireEvent {
  type: string;
  session_id?: string;
  seq: number;
  ts: number;
  payload: Record<string, unknown>;
}

/** Waits for (and consumes) the next event matching `pred`. */
export async function nextEvent(peer: Peer, pred: (e: WireEvent) => boolean = () => true, ms = WAIT_MS, what = 'an event'): Promise<WireEvent> {
  const m = (await peer.inbox.take((x) => isEvent(x) && pred((x as Msg).params as WireEvent), ms, what)) as Msg;
  return m.params as WireEvent;
}

function parseInto(inbox: Inbox<Received>, text: string): void {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // A non-JSON message is a protocol violation; keep it visible to the assertions.
    value = { __unparsable: text };
  }
  inbox.push(value as Received);
}

/** A peer over a `serve --stdio` child: one line per message. */
export function stdioPeer(proc: Proc): Peer {
  const inbox = new Inbox<Received>('stdio peer');
  let seen = 0;
  const pump = () => {
    for (; seen < proc.stdout.all.length; seen++) parseInto(inbox, proc.stdout.all[seen] as string);
  };
  // Mirror the line inbox (its `all` list is complete even if nobody takes lines).
  proc.child.stdout.on('data', () => queueMicrotask(pump));
  proc.child.stdout.on('end', () => queueMicrotask(() => (pump(), inbox.end())));
  pump();
  return {
    name: 'stdio',
    inbox,
    send(text) {
      proc.child.stdin.write(`${text}\n`);
    },
    async close() {
      await proc.kill();
    },
  };
}

/** Spawns `serve --stdio ...args` and returns its peer once `gateway.ready` arrived. */
export async function startStdio(extraArgs: readonly string[] = [], env: Record<string, string> = {}): Promise<{ proc: Proc; peer: Peer; ready: WireEvent }> {
  const proc = spawnSubrun(['serve', '--stdio', ...extraArgs], env);
  const peer = stdioPeer(proc);
  const ready = await nextEvent(peer, (e) => e.type === 'gateway.ready', WAIT_MS, 'gateway.ready');
  return { proc, peer, ready };
}

export interface WsPeer extends Peer {
  readonly ws: WebSocket;
  /** Resolves with the close code and reason once the socket closed. */
  readonly closed: Promise<{ code: number; reason: string }>;
}

/** Opens a WebSocket; rejects with `HTTP <status>` if the upgrade was refused. */
export function openWs(url: string, options: ClientOptions = {}): Promise<WsPeer> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, options);
    const inbox = new Inbox<Received>(`ws peer ${url}`);
    // Listen from the start so nothing sent right after the upgrade is missed.
    ws.on('message', (data, isBinary) => parseInto(inbox, isBinary ? `<binary ${String(data)}>` : String(data)));
    const closed = new Promise<{ code: number; reason: string }>((res) =>
      ws.once('close', (code, reason) => {
        inbox.end();
        res({ code, reason: reason.toString() });
      }),
    );
    ws.once('unexpected-response', (_req, res) => {
      reject(new Error(`HTTP ${res.statusCode}`));
      res.resume();
    });
    ws.once('error', (err) => reject(err));
    ws.once('open', () => {
      ws.on('error', () => undefined);
      resolve({
        name: 'ws',
        ws,
        inbox,
        closed,
        send(text) {
          ws.send(text);
        },
        async close() {
          if (ws.readyState === WebSocket.CLOSED) return;
          ws.terminate();
          await closed;
        },
      });
    });
  });
}

/** Opens a WebSocket with the server's token and waits for `gateway.ready`. */
export async function connectWs(server: WsServer, options: ClientOptions = {}): Promise<{ peer: WsPeer; ready: WireEvent }> {
  const peer = await openWs(server.url, { headers: { Authorization: `Bearer ${server.token}` }, ...options });
  const ready = await nextEvent(peer, (e) => e.type === 'gateway.ready', WAIT_MS, 'gateway.ready');
  return { peer, ready };
}

/** A scripted task for delegation.spawn. */
export function scriptedTask(goal: string, steps: unknown[]): Record<string, unknown> {
  return { goal, agent: { kind: 'scripted', steps } };
}
