// The processes and connections of the durability tests: a real `subrun serve --ws` on a state
// directory (started, killed with SIGKILL or stopped with SIGTERM, started again on the same
// directory) and hosts, WebSocket clients that keep every event and reply they get. Every wait is
// on a line, a message or an exit, bounded by a timeout.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSubrun, WAIT_MS, type Exit, type Proc } from '../helpers/process.ts';
import { connectWs, type RpcReply, type RpcTestClient, type WireEvent } from '../helpers/rpc-client.ts';

export const TOKEN = 'kill9-token';

/** A non-negative integer from the environment (unset or empty: `fallback`). */
export function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(raw)}`);
  return n;
}

/** A state directory of its own (mkdtemp makes it 0700, as the store requires). */
export function freshStateDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'subrun-kill9-'));
}

export function removeStateDir(dir: string): Promise<void> {
  return rm(dir, { recursive: true, force: true });
}

/** Resolves with `p`, or rejects naming `what` after `ms`. */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

export interface Server {
  readonly proc: Proc;
  readonly url: string;
  readonly dir: string;
}

/**
 * The flags every durability server gets. Depth 2 lets first-level children run a `spawn` step,
 * so the restart must settle a tree (descendants first). KILL9_CHECKPOINT_MS adds
 * `--checkpoint-ms N` (unset: the server's default), to squeeze the coalesced checkpoint writes.
 */
export function serverArgs(dir: string): string[] {
  const checkpoint = process.env.KILL9_CHECKPOINT_MS;
  return [
    'serve',
    '--ws',
    '--port',
    '0',
    '--token',
    TOKEN,
    '--state-dir',
    dir,
    '--max-spawn-depth',
    '2',
    ...(checkpoint ? ['--checkpoint-ms', checkpoint] : []),
  ];
}

/**
 * Starts a server on `dir` (a port of its own each time), with `extra` flags after the usual ones
 * (a later flag wins); fails at once if it exits instead.
 */
export async function startServer(dir: string, extra: readonly string[] = []): Promise<Server> {
  const proc = spawnSubrun([...serverArgs(dir), ...extra]);
  const line = proc.stderr.take((l) => l.startsWith('subrun listening on '), WAIT_MS, 'the listening line');
  const first = await Promise.race([line.then((l) => ({ line: l })), proc.exited.then((exit) => ({ exit }))]);
  if ('exit' in first) {
    throw new Error(`the server on ${dir} exited before listening (${describeExit(first.exit)}): ${proc.stderr.all.join('\n').slice(0, 800)}`);
  }
  return { proc, url: first.line.slice('subrun listening on '.length).trim(), dir };
}

function describeExit(exit: Exit): string {
  return exit.signal ?? `code ${exit.code}`;
}

/** kill -9: no shutdown code runs; resolves once the process is gone. */
export async function sigkill(server: Server): Promise<void> {
  await server.proc.kill();
}

/** An orderly stop: resolves with the exit once the process is gone. */
export function sigterm(server: Server): Promise<Exit> {
  server.proc.child.kill('SIGTERM');
  return server.proc.waitExit(30_000);
}

export interface Host {
  readonly index: number;
  readonly client: RpcTestClient;
  /** The gateway.ready this connection was greeted with. */
  readonly ready: WireEvent;
  close(): Promise<void>;
}

/** Opens a WebSocket to `server` and waits for its gateway.ready. */
export async function connectHost(server: Server, index: number): Promise<Host> {
  const ep = await connectWs(server.url, TOKEN);
  const ready = await within(
    ep.client.waitForEvent((e) => e.type === 'gateway.ready'),
    WAIT_MS,
    `gateway.ready on host ${index}`,
  );
  return { index, client: ep.client, ready, close: ep.close };
}

/** The call's reply, or undefined when the connection closed first (the request was in flight). */
export async function callOrLost(host: Host, method: string, params: Record<string, unknown>): Promise<RpcReply | undefined> {
  try {
    return await host.client.call(method, params);
  } catch {
    return undefined;
  }
}

/** The call's result; throws naming the method and the error otherwise (for calls that must work). */
export async function mustCall<T = Record<string, unknown>>(host: Host, method: string, params: Record<string, unknown>): Promise<T> {
  const reply = await within(host.client.call(method, params), WAIT_MS, `the reply to ${method}`);
  if (reply.error) throw new Error(`${method} ${JSON.stringify(params).slice(0, 200)} answered ${reply.error.code} ${reply.error.message}`);
  return reply.result as T;
}

/** The events of session `sid` this host received, in arrival order. */
export function sessionEvents(host: Host, sid: string): WireEvent[] {
  return host.client.events.filter((e) => e.session_id === sid);
}

/** The highest seq of session `sid` this host received (0: none). */
export function lastSeen(host: Host, sid: string): number {
  return sessionEvents(host, sid).reduce((max, e) => Math.max(max, e.seq), 0);
}

/** JSON with every object's keys sorted: equal facts compare equal whatever order a store keeps. */
export function canonical(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((k) => [k, sortKeys((value as Record<string, unknown>)[k])]),
  );
}
