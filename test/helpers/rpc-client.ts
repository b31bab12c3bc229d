// A transport-agnostic JSON-RPC test client: give it a `send(text)` and feed it every text the
// server sends with `receive(text)`. It matches replies to calls by id, keeps every message and
// every `event` notification in arrival order, and lets a test wait for an event by predicate
// (event-driven: no sleeps). Adapters below wire it to the in-memory pair and to a WebSocket; a
// process-level test wires it to a child's stdin/stdout the same way.
import WebSocket from 'ws';
import type { z } from 'zod';
import type { EventEnvelope } from '../../src/registry/events.ts';
import type { Connection } from '../../src/rpc/connection.ts';
import { resultSchemas, type MethodName } from '../../src/contract/wire.ts';
import type { RpcServer } from '../../src/rpc/server.ts';
import { memoryPair } from '../../src/rpc/transports/memory.ts';

export type RpcId = string | number | null;

export interface RpcErrorObject {
  readonly code: number;
  readonly message: string;
  readonly data?: unknown;
}

export interface RpcReply {
  readonly jsonrpc: '2.0';
  readonly id: RpcId;
  readonly result?: unknown;
  readonly error?: RpcErrorObject;
}

/** The params of an `event` notification. */
export interface WireEvent {
  readonly type: string;
  readonly session_id?: string;
  readonly seq: number;
  readonly ts: number;
  readonly payload: Record<string, unknown>;
}

export type EventPredicate = (event: WireEvent) => boolean;

interface EventWaiter {
  readonly predicate: EventPredicate;
  readonly from: number;
  readonly resolve: (event: WireEvent) => void;
  readonly reject: (err: Error) => void;
}

interface PendingCall {
  readonly method: string;
  readonly resolve: (reply: RpcReply) => void;
  readonly reject: (err: Error) => void;
}

/** Thrown by `result()` when the server answered with an error. */
export class RpcCallError extends Error {
  override readonly name = 'RpcCallError';
  readonly error: RpcErrorObject;

  constructor(method: string, error: RpcErrorObject) {
    super(`${method} failed: ${error.code} ${error.message}`);
    this.error = error;
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export class RpcTestClient {
  /** Every parsed message received (replies, batch replies, notifications), in arrival order. */
  readonly messages: unknown[] = [];
  /** Texts that were not JSON (a conforming server never sends one). */
  readonly unparsable: string[] = [];
  /** Every `event` notification's params, in arrival order. */
  readonly events: WireEvent[] = [];
  /** Replies whose id matched no pending call, and notifications other than `event`. */
  readonly unmatched: unknown[] = [];
  readonly #send: (text: string) => void;
  readonly #pending = new Map<number, PendingCall>();
  readonly #methods = new Map<number, string>();
  #waiters: EventWaiter[] = [];
  #nextId = 0;
  #closed = false;
  #resolveClosed!: () => void;
  /** Resolves once the transport under this client closed. */
  readonly closed: Promise<void> = new Promise((resolve) => (this.#resolveClosed = resolve));

  constructor(send: (text: string) => void) {
    this.#send = send;
  }

  get isClosed(): boolean {
    return this.#closed;
  }

  /** Feed every text the server sent, in order. */
  receive(text: string): void {
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch {
      this.unparsable.push(text);
      return;
    }
    this.messages.push(msg);
    if (Array.isArray(msg)) {
      for (const item of msg) this.#reply(item);
      return;
    }
    if (isObject(msg) && msg.method === 'event' && !Object.hasOwn(msg, 'id')) {
      this.#event(msg.params as WireEvent);
      return;
    }
    this.#reply(msg);
  }

  /** Call when the transport closed: pending calls and event waits fail instead of hanging. */
  handleClosed(): void {
    if (this.#closed) return;
    this.#closed = true;
    const err = new Error('connection closed');
    for (const p of this.#pending.values()) p.reject(new Error(`${p.method}: connection closed before the reply`));
    this.#pending.clear();
    for (const w of this.#waiters) w.reject(err);
    this.#waiters = [];
    this.#resolveClosed();
  }

  /** Sends a request and resolves with its reply (result or error). */
  call(method: string, params?: unknown): Promise<RpcReply> {
    if (this.#closed) return Promise.reject(new Error(`${method}: connection is closed`));
    const id = ++this.#nextId;
    this.#methods.set(id, method);
    return new Promise<RpcReply>((resolve, reject) => {
      this.#pending.set(id, { method, resolve, reject });
      const msg = params === undefined ? { jsonrpc: '2.0', id, method } : { jsonrpc: '2.0', id, method, params };
      this.#send(JSON.stringify(msg));
    });
  }

  /** The call's result; throws RpcCallError if the server answered with an error. */
  async result<T = Record<string, unknown>>(method: string, params?: unknown): Promise<T> {
    const reply = await this.call(method, params);
    if (reply.error) throw new RpcCallError(method, reply.error);
    return reply.result as T;
  }

  /** The call's error; throws if the server answered with a result. */
  async error(method: string, params?: unknown): Promise<RpcErrorObject> {
    const reply = await this.call(method, params);
    if (!reply.error) throw new Error(`${method}: expected an error, got result ${JSON.stringify(reply.result)}`);
    return reply.error;
  }

  /** The method of the call this client sent with `id` (to tell replies apart). */
  methodOf(id: unknown): string | undefined {
    return typeof id === 'number' ? this.#methods.get(id) : undefined;
  }

  /** Sends a notification (no id, no reply). */
  notify(method: string, params?: unknown): void {
    this.#send(JSON.stringify(params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params }));
  }

  /** Sends raw text as is (for framing and envelope tests). */
  sendRaw(text: string): void {
    this.#send(text);
  }

  /** The index the next received event will have: pass it as `from` to wait only for later ones. */
  mark(): number {
    return this.events.length;
  }

  /**
   * Resolves with the first event (at index `from` or later; default: any received so far) that
   * matches, as soon as it has arrived. Rejects if the connection closes first.
   */
  waitForEvent(predicate: EventPredicate, from = 0): Promise<WireEvent> {
    for (let i = from; i < this.events.length; i++) {
      const e = this.events[i] as WireEvent;
      if (predicate(e)) return Promise.resolve(e);
    }
    if (this.#closed) return Promise.reject(new Error('connection closed'));
    return new Promise((resolve, reject) => this.#waiters.push({ predicate, from, resolve, reject }));
  }

  /** The events matching `predicate` received so far. */
  eventsWhere(predicate: EventPredicate): WireEvent[] {
    return this.events.filter(predicate);
  }

  #event(params: WireEvent): void {
    const index = this.events.length;
    this.events.push(params);
    const still: EventWaiter[] = [];
    for (const w of this.#waiters) {
      let hit = false;
      try {
        hit = index >= w.from && w.predicate(params);
      } catch (err) {
        w.reject(err as Error);
        continue;
      }
      if (hit) w.resolve(params);
      else still.push(w);
    }
    this.#waiters = still;
  }

  #reply(msg: unknown): void {
    if (!isObject(msg) || typeof msg.id !== 'number') {
      this.unmatched.push(msg);
      return;
    }
    const p = this.#pending.get(msg.id);
    if (!p) {
      this.unmatched.push(msg);
      return;
    }
    this.#pending.delete(msg.id);
    p.resolve(msg as unknown as RpcReply);
  }
}

// ---- schema-checked calls ----

export type ResultOf<M extends MethodName> = z.output<(typeof resultSchemas)[M]>;

/** Calls `method` and parses its result with the protocol's result schema (throws on an error reply or a wrong shape). */
export async function ok<M extends MethodName>(client: RpcTestClient, method: M, params?: Record<string, unknown>): Promise<ResultOf<M>> {
  const result = await client.result<unknown>(method, params);
  return (resultSchemas[method] as z.ZodType).parse(result) as ResultOf<M>;
}

/** Calls `method` and returns the error it must answer with. */
export function fails(client: RpcTestClient, method: string, params?: Record<string, unknown>): Promise<RpcErrorObject> {
  return client.error(method, params);
}

// ---- leak checks ----

/** Keys that must never appear in a reply or an event (protocol section 4). */
export const PRIVATE_KEYS: ReadonlySet<string> = new Set(['owner', 'transport', 'session_key', 'runner']);

/** Dotted paths (`.result.a.0.b`) of every key of `keys` anywhere inside `value`. */
export function keyPaths(value: unknown, keys: ReadonlySet<string> = PRIVATE_KEYS, path = ''): string[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => keyPaths(v, keys, `${path}.${i}`));
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([k, v]) => [...(keys.has(k) ? [`${path}.${k}`] : []), ...keyPaths(v, keys, `${path}.${k}`)]);
}

/**
 * Every private key in what `client` received, except the `session_key` that a session.create
 * reply exists to hand out. Empty for a conforming server.
 */
export function privateKeyLeaks(client: RpcTestClient): string[] {
  return client.messages.flatMap((m) => {
    const id = typeof m === 'object' && m !== null ? (m as { id?: unknown }).id : undefined;
    const allowed = client.methodOf(id) === 'session.create' ? ['.result.session_key'] : [];
    return keyPaths(m)
      .filter((p) => !allowed.includes(p))
      .map((p) => `${p} in ${JSON.stringify(m).slice(0, 200)}`);
  });
}

// ---- predicates ----

/** An event of `type` (optionally about one subagent, by payload.subagent_id). */
export const isEvent =
  (type: string, subagent_id?: string): EventPredicate =>
  (e) =>
    e.type === type && (subagent_id === undefined || e.payload.subagent_id === subagent_id);

// ---- adapters ----

export interface MemoryEndpoint {
  readonly client: RpcTestClient;
  /** The server's side of this connection (its id is the transport id). */
  readonly conn: Connection;
  /** Closes the connection from the client's side (a dropped connection). */
  close(): void;
}

/** Connects a new in-memory transport to `server`. */
export function connectMemory(server: RpcServer): MemoryEndpoint {
  const pair = memoryPair();
  const client = new RpcTestClient((text) => pair.client.send(text));
  pair.client.onmessage = (text) => client.receive(text);
  pair.client.onclose = () => client.handleClosed();
  const conn = server.connect(pair.server);
  return { client, conn, close: () => pair.client.close() };
}

export interface WsEndpoint {
  readonly client: RpcTestClient;
  readonly ws: WebSocket;
  /** Closes the socket from the client's side; resolves once it is closed. */
  close(): Promise<void>;
}

/** Opens a WebSocket to `url` with the token as a Bearer header; resolves once open. */
export function connectWs(url: string, token: string): Promise<WsEndpoint> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { Authorization: `Bearer ${token}` }, perMessageDeflate: false });
    const client = new RpcTestClient((text) => ws.send(text));
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      client.receive(Array.isArray(data) ? Buffer.concat(data).toString('utf8') : Buffer.from(data as Buffer).toString('utf8'));
    });
    ws.on('close', () => client.handleClosed());
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: HTTP ${res.statusCode}`)));
    // Kept for the socket's life: an 'error' with no listener would throw.
    ws.on('error', (err) => reject(err));
    ws.once('open', () =>
      resolve({
        client,
        ws,
        close: () =>
          new Promise<void>((done) => {
            if (ws.readyState === WebSocket.CLOSED) return done();
            ws.once('close', () => done());
            ws.close();
          }),
      }),
    );
  });
}

/** The runtime's in-process events (also those routed to nobody), with an event-driven wait. */
export class BusLog {
  readonly events: EventEnvelope[] = [];
  #waiters: Array<{ pred: (e: EventEnvelope) => boolean; resolve: (e: EventEnvelope) => void }> = [];

  constructor(server: RpcServer) {
    server.runtime.events.subscribe('**', (e) => {
      this.events.push(e);
      this.#waiters = this.#waiters.filter((w) => {
        if (!w.pred(e)) return true;
        w.resolve(e);
        return false;
      });
    });
  }

  wait(pred: (e: EventEnvelope) => boolean): Promise<EventEnvelope> {
    const seen = this.events.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => this.#waiters.push({ pred, resolve }));
  }

  completed(subagent_id: string): Promise<EventEnvelope> {
    return this.wait((e) => e.type === 'subagent.complete' && e.subagent_id === subagent_id);
  }
}
