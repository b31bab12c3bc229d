// One connection = one transport. Parses what arrives, runs calls through the dispatch table
// (no if-chains on method names), and writes every reply and event through one write path, so
// concurrent replies and events never interleave. Exactly one response per request.
//
// A message whose handlers all answer synchronously is answered without promises: its reply is
// queued as one microtask, so it still leaves after the turn that read it (bench/cases/rpc-stdio.ts).
// A handler that returns a promise (or any thenable) is awaited.
//
// What one message may cost is bounded here: its batch by max_batch (parsing), its replies by
// max_reply_bytes (reply-budget.ts). Nothing on a reply or event path throws out of this class:
// replies and events go out from microtasks and runtime callbacks, where an exception would end
// the process (and every session) or stop an event from reaching the rest of its slot. A failure
// there is logged (type and message only) and costs that one message on this connection at worst.
import { fromMeta, within } from '../telemetry/context.ts';
import { rpcRequest } from '../telemetry/requests.ts';
import { isThenable } from '../guards.ts';
import type { Logger } from '../log.ts';
import type { CallContext, ServerLimits, Services } from '../server/context.ts';
import { RpcCode, RpcError, toRpcError } from '../server/errors.ts';
import { errorResponse, isResponse, parseMessage, resultResponse, type Call, type Item, type Response } from './jsonrpc.ts';
import { JsonText } from '../server/json-text.ts';
import { DEFAULT_MAX_BATCH, DEFAULT_MAX_REPLY_BYTES, fitsAlone, isStringLimit, ReplyBudget, TOO_LARGE, tooLargeError, tooLargeText } from './reply-budget.ts';
import type { Transport } from './transports/transport.ts';

const DONE: Promise<void> = Promise.resolve();

/** True when every handler of a batch answered synchronously: every reply is there. */
function allThere(replies: readonly Reply[]): replies is readonly (Response | null)[] {
  return !replies.some((r) => r instanceof Promise);
}

/** What one received message may cost (the server passes its own limits). */
export type MessageLimits = Pick<ServerLimits, 'max_batch' | 'max_reply_bytes'>;
const DEFAULT_MESSAGE_LIMITS: MessageLimits = { max_batch: DEFAULT_MAX_BATCH, max_reply_bytes: DEFAULT_MAX_REPLY_BYTES };

type Reply = Response | null | Promise<Response | null>;

/** What the connection needs of a method: run it as JSON-RPC answers it (server/methods/define.ts). */
export interface RpcMethod {
  call(params: Record<string, unknown>, ctx: CallContext): unknown;
}

export class Connection {
  readonly id: string;
  readonly #methods: ReadonlyMap<string, RpcMethod>;
  readonly #transport: Transport;
  readonly #logger: Logger;
  /** The same for every call on this connection: made once, not per request. */
  readonly #ctx: CallContext;
  readonly #maxBatch: number;
  readonly #maxReplyBytes: number;
  #closed = false;
  #onClose: () => void;
  #resolveClosed!: () => void;
  /** Resolves once the connection has closed, from either side. */
  readonly whenClosed: Promise<void> = new Promise((resolve) => (this.#resolveClosed = resolve));

  /** What carries it (ws, stdio), if its transport says. */
  get kind(): Transport['kind'] {
    return this.#transport.kind;
  }

  constructor(
    id: string,
    transport: Transport,
    methods: ReadonlyMap<string, RpcMethod>,
    services: Services,
    logger: Logger,
    onClose: () => void,
    limits: MessageLimits = DEFAULT_MESSAGE_LIMITS,
  ) {
    this.id = id;
    this.#transport = transport;
    this.#methods = methods;
    this.#ctx = { services, transport: id };
    this.#maxBatch = limits.max_batch;
    this.#maxReplyBytes = limits.max_reply_bytes;
    this.#logger = logger;
    this.#onClose = onClose;
    transport.onmessage = (text) => {
      let pending: Promise<void> | undefined;
      try {
        pending = this.#receive(text);
      } catch (err) {
        this.#failedMessage(err);
        return;
      }
      pending?.catch((err: unknown) => this.#failedMessage(err));
    };
    transport.onclose = () => this.#closedByPeer();
  }

  get closed(): boolean {
    return this.#closed;
  }

  start(): void {
    this.#transport.start();
  }

  /** Sends a notification (events). Never throws: a notification it cannot send is logged and lost. */
  notify(method: string, params: unknown): void {
    this.#write({ jsonrpc: '2.0', method, params }, 'event not sent');
  }

  /** Sends an `event` notification whose params the server serialised once for every peer. */
  notifyEvent(paramsText: string): void {
    if (this.#closed) return;
    this.#send(`{"jsonrpc":"2.0","method":"event","params":${paramsText}}`, 'event not sent');
  }

  close(reason?: string): void {
    if (this.#closed) return;
    this.#transport.close(reason);
    this.#closedByPeer();
  }

  /** Handles one received message; resolves once its reply (if any) was written. */
  handle(text: string): Promise<void> {
    try {
      return this.#receive(text) ?? DONE;
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** Answers one message; returns a promise only if some handler answered asynchronously. */
  #receive(text: string): Promise<void> | undefined {
    const parsed = parseMessage(text, this.#maxBatch);
    if (isResponse(parsed)) {
      this.#write(parsed, 'reply not sent');
      return undefined;
    }
    if (!parsed.batch) {
      const reply = this.#answer(parsed.item);
      if (reply === null) return undefined;
      if (reply instanceof Promise) {
        return reply.then((r) => {
          if (r !== null) this.#replyOne(r);
        });
      }
      // Written once this turn's synchronous work is done: a peer that drops right after its request
      // was read (and applied) gets no reply.
      queueMicrotask(() => this.#replyOne(reply));
      return undefined;
    }
    const replies = parsed.items.map((item) => this.#answer(item));
    // A batch mixes answers already there with ones still pending; Promise.all takes both.
    // eslint-disable-next-line @typescript-eslint/await-thenable
    if (!allThere(replies)) return Promise.all(replies).then((out) => this.#replyBatch(out));
    queueMicrotask(() => this.#replyBatch(replies));
    return undefined;
  }

  #answer(item: Item): Reply {
    if (item.kind === 'invalid') return item.response;
    if (item.kind === 'dropped') return null;
    return this.#run(item.call);
  }

  #replyOne(r: Response): void {
    if (this.#closed) return;
    try {
      const text = this.#text(r);
      this.#send(text !== TOO_LARGE && fitsAlone(text, this.#maxReplyBytes) ? text : tooLargeText(r.id, this.#maxReplyBytes), 'reply not sent');
    } catch (err) {
      this.#failedMessage(err);
    }
  }

  /**
   * A batch's replies, in request order; none at all if every item was a notification. Their
   * bytes (the brackets and commas included) are bounded by max_reply_bytes: past it, each
   * remaining reply is -32001, and is never built.
   */
  #replyBatch(replies: readonly (Response | null)[]): void {
    if (this.#closed) return;
    let text = '';
    try {
      const budget = new ReplyBudget(this.#maxReplyBytes, 1);
      for (const r of replies) {
        if (r === null) continue;
        text += text === '' ? '[' : ',';
        text += budget.take(budget.spent ? TOO_LARGE : this.#text(r), r.id, 1);
      }
    } catch (err) {
      // Not expected (the budget keeps the text far under V8's string limit): the message's
      // reply is lost, never the process.
      this.#failedMessage(err);
      return;
    }
    if (text !== '') this.#send(`${text}]`, 'reply not sent');
  }

  /** Replies and events go out from microtasks and callbacks: a transport that throws is logged here. */
  #send(text: string, what: string): void {
    try {
      this.#transport.send(text);
    } catch (err) {
      this.#logger.error({ err, transport: this.id }, what);
    }
  }

  /**
   * One reply's text, as JSON.stringify(r) writes it. A reply that cannot be serialised (a handler
   * returned a BigInt or a cycle) becomes -32603 on its own: it must not take its request's
   * response, or the whole batch's, down with it.
   */
  #text(r: Response): string | typeof TOO_LARGE {
    try {
      // A result the handler serialised itself is spliced in, not serialised again: the same
      // bytes JSON.stringify writes for {jsonrpc, id, result}.
      if ('result' in r && r.result instanceof JsonText) return `{"jsonrpc":"2.0","id":${JSON.stringify(r.id)},"result":${r.result.text}}`;
      return JSON.stringify(r);
    } catch (err) {
      // Longer than V8's longest string: far past any reply bound, so it is a reply too large.
      if (isStringLimit(err)) return TOO_LARGE;
      this.#logger.error({ err }, 'reply not serialisable');
      return JSON.stringify(errorResponse(r.id, new RpcError(RpcCode.InternalError, 'Internal error')));
    }
  }

  #run(call: Call): Reply {
    const method = this.#methods.get(call.method);
    // `_meta` (MCP's and ACP's convention) is accepted on every method and never reaches its
    // schema: it carries the caller's trace context, and anything wrong in it is ignored.
    const meta: unknown = call.params._meta;
    let params = call.params;
    if (meta !== undefined) {
      const { _meta: _dropped, ...rest } = params;
      params = rest;
    }
    if (call.id === undefined) return this.#call(call, method, params);
    const request = rpcRequest(method ? call.method : '_OTHER', this.#transport.kind ?? 'memory', params.session_id, fromMeta(meta));
    const ended = (r: Response | null): Response | null => {
      request.end(r && 'error' in r ? r.error.code : undefined);
      return r;
    };
    const reply = within(request.ctx, () => this.#call(call, method, params));
    return reply instanceof Promise ? reply.then(ended) : ended(reply);
  }

  #call(call: Call, method: RpcMethod | undefined, params: Record<string, unknown>): Reply {
    let result: unknown;
    try {
      if (!method) throw new RpcError(RpcCode.MethodNotFound, `Method not found: ${call.method.slice(0, 100)}`);
      // params is always an object here (jsonrpc.ts); the method's schema checks the rest.
      result = method.call(params, this.#ctx);
      // Anything `await` would wait for is waited for (a Promise or any other thenable).
      if (isThenable(result)) {
        return Promise.resolve(result).then(
          (value) => this.#answered(call, value),
          (err: unknown) => this.#failed(call, err),
        );
      }
    } catch (err) {
      return this.#failed(call, err);
    }
    return this.#answered(call, result);
  }

  #answered(call: Call, result: unknown): Response | null {
    // A handler that returns nothing still answers: `result: null`, never a reply with neither key.
    return call.id === undefined ? null : resultResponse(call.id, result === undefined ? null : result);
  }

  #failed(call: Call, err: unknown): Response | null {
    if (call.id === undefined) return null;
    // A handler that built its own result text (subagent.list) and passed V8's string limit.
    if (isStringLimit(err)) return errorResponse(call.id, tooLargeError(this.#maxReplyBytes));
    return errorResponse(
      call.id,
      toRpcError(err, (e) => this.#logger.error({ err: e, method: call.method }, 'method failed')),
    );
  }

  #failedMessage(err: unknown): void {
    this.#logger.error({ err }, 'message handling failed');
  }

  /** Called from runtime callbacks (events): must not throw, or the rest of the slot misses the event. */
  #write(message: unknown, what: string): void {
    if (this.#closed) return;
    let text: string;
    try {
      text = JSON.stringify(message);
    } catch (err) {
      this.#logger.error({ err, transport: this.id }, `${what}: not serialisable`);
      return;
    }
    this.#send(text, what);
  }

  #closedByPeer(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#onClose();
    this.#resolveClosed();
  }
}
