// One connection = one transport. Parses what arrives, runs calls through the dispatch table
// (no if-chains on method names), and writes every reply and event through one write path, so
// concurrent replies and events never interleave. Exactly one response per request.
import type { Logger } from '../log.ts';
import type { CallContext, MethodDef, ServerState } from './context.ts';
import { RpcCode, RpcError, toRpcError } from './errors.ts';
import { errorResponse, isResponse, parseMessage, resultResponse, type Call, type Response } from './jsonrpc.ts';
import type { Transport } from './transports/transport.ts';

export class Connection {
  readonly id: string;
  readonly #transport: Transport;
  readonly #methods: ReadonlyMap<string, MethodDef>;
  readonly #server: ServerState;
  readonly #logger: Logger;
  #closed = false;
  #onClose: () => void;
  #resolveClosed!: () => void;
  /** Resolves once the connection has closed, from either side. */
  readonly whenClosed: Promise<void> = new Promise((resolve) => (this.#resolveClosed = resolve));

  constructor(id: string, transport: Transport, methods: ReadonlyMap<string, MethodDef>, server: ServerState, logger: Logger, onClose: () => void) {
    this.id = id;
    this.#transport = transport;
    this.#methods = methods;
    this.#server = server;
    this.#logger = logger;
    this.#onClose = onClose;
    transport.onmessage = (text) => {
      this.handle(text).catch((err: unknown) => this.#logger.error({ err }, 'message handling failed'));
    };
    transport.onclose = () => this.#closedByPeer();
  }

  get closed(): boolean {
    return this.#closed;
  }

  start(): void {
    this.#transport.start();
  }

  /** Sends a notification (events). */
  notify(method: string, params: unknown): void {
    this.#write({ jsonrpc: '2.0', method, params });
  }

  close(reason?: string): void {
    if (this.#closed) return;
    this.#transport.close(reason);
    this.#closedByPeer();
  }

  /** Handles one received message; resolves once its reply (if any) was written. */
  async handle(text: string): Promise<void> {
    const parsed = parseMessage(text);
    if (isResponse(parsed)) return this.#write(parsed);
    const replies = await Promise.all(
      parsed.items.map((item): Promise<Response | null> | Response | null => {
        if (item.kind === 'invalid') return item.response;
        if (item.kind === 'dropped') return null;
        return this.#run(item.call);
      }),
    );
    const out = replies.filter((r): r is Response => r !== null);
    if (out.length === 0) return;
    this.#reply(out, parsed.batch);
  }

  /**
   * Writes the replies of one message. A reply that cannot be serialised (a handler returned a
   * BigInt or a cycle) becomes -32603 on its own: it must not take its request's response, or the
   * whole batch's, down with it.
   */
  #reply(out: Response[], batch: boolean): void {
    if (this.#closed) return;
    let text: string;
    try {
      text = JSON.stringify(batch ? out : out[0]);
    } catch {
      const safe = out.map((r) => {
        try {
          JSON.stringify(r);
          return r;
        } catch (err) {
          this.#logger.error({ err }, 'reply not serialisable');
          return errorResponse(r.id, new RpcError(RpcCode.InternalError, 'Internal error'));
        }
      });
      text = JSON.stringify(batch ? safe : safe[0]);
    }
    this.#transport.send(text);
  }

  async #run(call: Call): Promise<Response | null> {
    const ctx: CallContext = { server: this.#server, transport: this.id };
    let result: unknown;
    try {
      const method = this.#methods.get(call.method);
      if (!method) throw new RpcError(RpcCode.MethodNotFound, `Method not found: ${call.method.slice(0, 100)}`);
      const params = method.params.parse(call.params);
      result = await method.handle(params, ctx);
    } catch (err) {
      if (call.id === undefined) return null;
      return errorResponse(call.id, toRpcError(err, (e) => this.#logger.error({ err: e, method: call.method }, 'method failed')));
    }
    // A handler that returns nothing still answers: `result: null`, never a reply with neither key.
    return call.id === undefined ? null : resultResponse(call.id, result === undefined ? null : result);
  }

  #write(message: unknown): void {
    if (this.#closed) return;
    let text: string;
    try {
      text = JSON.stringify(message);
    } catch (err) {
      this.#logger.error({ err }, 'reply not serialisable');
      return;
    }
    this.#transport.send(text);
  }

  #closedByPeer(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#onClose();
    this.#resolveClosed();
  }
}
