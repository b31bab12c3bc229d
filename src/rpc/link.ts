// A surface's own connection to the RPC server (ACP's, MCP's), over an in-memory transport: every
// call a surface makes for its client goes through the same dispatch, authority checks (the
// session's slot and generation), limits and error codes as a host's call, and the sessions'
// events reach it as they reach any host. The surface translates; the server decides.
import type { z } from 'zod';
import { resultSchemas, type MethodName, type ParamsOf, type ResultOf } from '../contract/methods.ts';
import { RpcCode, RpcError } from '../server/errors.ts';
import { memoryPair, type MemoryClient } from './transports/memory.ts';
import type { Transport } from './transports/transport.ts';

/** One `event` notification's params, as the server sends them. */
export interface RpcEvent {
  readonly type: string;
  readonly session_id: string | null;
  readonly seq: number;
  readonly payload: Record<string, unknown>;
}

interface Pending {
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: RpcError) => void;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The result schemas as a mapped type, so that the one for a generic M parses to ResultOf<M>. */
const results: { readonly [M in MethodName]: z.ZodType<ResultOf<M>> } = resultSchemas;

export class RpcLink {
  readonly #client: MemoryClient;
  readonly #pending = new Map<number, Pending>();
  readonly #onEvent: (event: RpcEvent) => void;
  readonly #onClose: (() => void) | undefined;
  #next = 0;
  #closed = false;

  /**
   * `server` is the RpcServer, or anything that serves a transport as one does; `onEvent` runs
   * synchronously as the server sends each event, in the server's order; `onClose` once, when the
   * link is gone (closed here or by the server's shutdown), after every pending call was rejected.
   */
  constructor(server: { connect(transport: Transport): unknown }, onEvent: (event: RpcEvent) => void, onClose?: () => void) {
    this.#onEvent = onEvent;
    this.#onClose = onClose;
    const { server: transport, client } = memoryPair();
    client.onmessage = (text) => this.#receive(text);
    client.onclose = () => this.#closedByServer();
    this.#client = client;
    server.connect(transport);
  }

  /**
   * One call, its answer checked against the method's result schema; rejects with the server's
   * error (its code, message and data) as an RpcError, or InternalError for an answer off it.
   */
  call<M extends MethodName>(method: M, params: ParamsOf<M>): Promise<ResultOf<M>> {
    return this.#request(method, params, (result) => {
      const parsed = results[method].safeParse(result);
      if (!parsed.success) throw new RpcError(RpcCode.InternalError, `${method}: the server's answer does not match its result schema`);
      return parsed.data;
    });
  }

  /**
   * The untyped path, for what the adapter relays and does not read (the IDE's extension calls):
   * params as they came, for the server to check; its answer as it came, for the IDE.
   */
  relay(method: MethodName, params: Record<string, unknown>): Promise<unknown> {
    return this.#request(method, params, (result) => result);
  }

  /**
   * `read` runs as the answer arrives (no extra tick): what it returns resolves, what it throws
   * rejects. The call is registered only once its text is sent: params that cannot be written
   * (nested past the stack, a cycle, a BigInt: the IDE's values, relayed) are the caller's
   * -32602, and leave no pending entry for the shutdown to reject with nobody listening.
   */
  #request<T>(method: MethodName, params: Record<string, unknown>, read: (result: unknown) => T): Promise<T> {
    if (this.#closed) return Promise.reject(new RpcError(RpcCode.ShuttingDown, 'server is shutting down'));
    const id = ++this.#next;
    let text: string;
    try {
      text = JSON.stringify({ jsonrpc: '2.0', id, method, params });
    } catch {
      return Promise.reject(new RpcError(RpcCode.InvalidParams, 'invalid params: they cannot be written as JSON (nested too deep?)'));
    }
    this.#client.send(text);
    return new Promise<T>((resolve, reject) => {
      const settle = (result: unknown) => {
        try {
          resolve(read(result));
        } catch (err) {
          reject(err);
        }
      };
      // The memory transport delivers in a later microtask: no answer can come before this.
      this.#pending.set(id, { resolve: settle, reject });
    });
  }

  close(): void {
    this.#client.close();
  }

  #receive(text: string): void {
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    if (!isRecord(msg)) return;
    if (msg.method === 'event' && isRecord(msg.params)) {
      const p = msg.params;
      if (typeof p.type === 'string' && isRecord(p.payload)) {
        this.#onEvent({ type: p.type, session_id: typeof p.session_id === 'string' ? p.session_id : null, seq: Number(p.seq), payload: p.payload });
      }
      return;
    }
    if (typeof msg.id !== 'number') return;
    const waiter = this.#pending.get(msg.id);
    if (!waiter) return;
    this.#pending.delete(msg.id);
    if (isRecord(msg.error)) {
      const e = msg.error;
      waiter.reject(
        new RpcError(typeof e.code === 'number' ? e.code : RpcCode.InternalError, typeof e.message === 'string' ? e.message : 'Internal error', e.data),
      );
    } else {
      waiter.resolve(msg.result);
    }
  }

  #closedByServer(): void {
    this.#closed = true;
    for (const w of this.#pending.values()) w.reject(new RpcError(RpcCode.ShuttingDown, 'server is shutting down'));
    this.#pending.clear();
    this.#onClose?.();
  }

  get closed(): boolean {
    return this.#closed;
  }
}
