// One ACP session = one subrun session, which the adapter's link created and so alone is attached
// to. It keeps what the translation needs and nothing the runtime decides: the children announced
// and not yet terminal (and the session their updates go on), the parent's open tool call, and the
// prompts in flight with whether a cancel reached them. A child is let go once its terminal update
// was sent, so a long session holds only its live children; a finished child's id is then unknown
// here, as ACP has it for a session that is over (a cancel on it goes nowhere). Every control action goes to the server
// as a JSON-RPC call, where authority, generations and limits apply as for any host.
import { RequestError, type PromptResponse, type RequestId, type SessionUpdate, type StopReason } from '@agentclientprotocol/sdk/unstable';
import { entryFromWire } from '../server/wire-events.ts';
import type { MethodName, ParamsOf } from '../contract/methods.ts';
import type { Logger } from '../log.ts';
import type { RpcEvent, RpcLink } from '../rpc/link.ts';
import * as u from './updates.ts';

/** Sends one update; the SDK writes them in call order. */
export type Send = (sessionId: string, update: SessionUpdate) => void;

interface Child {
  readonly info: u.ChildInfo;
  /** The session its lifecycle updates go on: its immediate parent's, fixed when it was announced. */
  readonly on: string;
}

/** A `session/prompt` in flight, registered in wire order (before the SDK dispatches it). */
export interface Turn {
  cancelled: boolean;
}

interface Deferred<T> {
  readonly promise: Promise<T>;
  readonly resolve: (value: T) => void;
}

/** The W3C trace context of an ACP request's `_meta`, passed on to the turn's request (strings only). */
function traceMeta(meta: unknown): { _meta?: Record<string, string> } {
  if (typeof meta !== 'object' || meta === null) return {};
  const out: Record<string, string> = {};
  for (const key of ['traceparent', 'tracestate', 'baggage']) {
    const v: unknown = Reflect.get(meta, key);
    if (typeof v === 'string') out[key] = v;
  }
  return Object.keys(out).length > 0 ? { _meta: out } : {};
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** How a turn ended, as far as the prompt's answer goes. */
export type TurnEnd = StopReason | { error: string };

export class AcpSession {
  readonly sessionId: string;
  readonly #visible: boolean;
  readonly #link: RpcLink;
  readonly #send: Send;
  readonly #logger: Logger;
  /** Children announced and not yet terminal. */
  readonly #children = new Map<string, Child>();
  readonly #turns = new Map<RequestId, Turn>();
  /** Each turn's end (from its message.complete), by turn id, made by whichever side comes first. */
  readonly #ends = new Map<string, Deferred<TurnEnd>>();
  #terminalWaiters: Array<() => void> = [];
  #openTool: string | undefined;
  #tools = 0;
  #closed = false;

  /** `visible`: the client advertised `subagents`, so children get sessions of their own. */
  constructor(sessionId: string, visible: boolean, link: RpcLink, send: Send, logger: Logger) {
    this.sessionId = sessionId;
    this.#visible = visible;
    this.#link = link;
    this.#send = send;
    this.#logger = logger;
  }

  /** Whether `id` is a live child of this session (announced, its terminal update not yet sent). */
  ownsChild(id: string): boolean {
    return this.#children.has(id);
  }

  /** How much per-turn and per-child state the session holds now (it must stay bounded). */
  held(): { children: number; turns: number; ends: number } {
    return { children: this.#children.size, turns: this.#turns.size, ends: this.#ends.size };
  }

  // ---- ordering: called from the wire tap, synchronously, in arrival order ----

  registerTurn(requestId: RequestId): Turn {
    let turn = this.#turns.get(requestId);
    if (!turn) this.#turns.set(requestId, (turn = { cancelled: false }));
    return turn;
  }

  /** The prompt's request was answered (whatever the answer): its turn, cancelled or not, goes. */
  dropTurn(requestId: RequestId): void {
    this.#turns.delete(requestId);
  }

  /** `session/cancel` on this session: every prompt that arrived before it, every child. */
  cancel(): void {
    for (const turn of this.#turns.values()) turn.cancelled = true;
    this.#call('session.interrupt', { session_id: this.sessionId });
  }

  /** `session/cancel` on one child: that child and its subtree; the turn goes on. */
  cancelChild(subagent_id: string): void {
    this.#call('subagent.interrupt', { session_id: this.sessionId, subagent_id });
  }

  // ---- the prompt ----

  async prompt(requestId: RequestId, text: string, meta?: unknown): Promise<PromptResponse> {
    const turn = this.registerTurn(requestId);
    try {
      // Checked and submitted in one synchronous step: a cancel seen by the tap after this point
      // reaches the server after the submit (one link, in order), so it interrupts this turn.
      if (turn.cancelled || this.#closed) return { stopReason: 'cancelled' };
      const started = this.#link.call('prompt.submit', { session_id: this.sessionId, text, ...traceMeta(meta) });
      const { turn_id } = await started;
      const end = await this.#end(turn_id).promise;
      this.#ends.delete(turn_id);
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- a cancel may set it during the awaits above
      if (turn.cancelled || end === 'cancelled') {
        // The RFD's order: every affected child's terminal update before the cancellation answer.
        await this.#allChildrenTerminal();
        return { stopReason: 'cancelled' };
      }
      // A model failure is an error answer with the runtime's message, never a stop reason.
      if (typeof end === 'object') throw RequestError.internalError(undefined, end.error);
      return { stopReason: end };
    } finally {
      this.#turns.delete(requestId);
    }
  }

  // ---- events of this session, in the server's order ----

  onEvent(e: RpcEvent): void {
    const p = e.payload;
    switch (e.type) {
      case 'message.delta':
        return this.#send(this.sessionId, u.messageChunk(String(p.text)));
      case 'message.thinking':
        return this.#send(this.sessionId, u.thoughtChunk(String(p.text)));
      case 'tool.start': {
        this.#openTool = `${String(p.turn_id)}:tool:${++this.#tools}`;
        return this.#send(this.sessionId, u.toolStart(this.#openTool, String(p.name), String(p.preview)));
      }
      case 'tool.complete': {
        if (this.#openTool === undefined) return;
        const id = this.#openTool;
        this.#openTool = undefined;
        return this.#send(this.sessionId, u.toolDone(id, p.ok === true, String(p.preview)));
      }
      case 'message.complete':
        return this.#end(String(p.turn_id)).resolve(u.turnStopReason(p));
      default:
        if (e.type.startsWith('subagent.')) this.#onChildEvent(e.type, p);
    }
  }

  #onChildEvent(type: string, p: Record<string, unknown>): void {
    const id = String(p.subagent_id);
    if (type === 'subagent.spawn_requested') {
      const info: u.ChildInfo = {
        subagent_id: id,
        parent_id: typeof p.parent_id === 'string' ? p.parent_id : null,
        goal: String(p.goal),
        depth: Number(p.depth),
      };
      const child: Child = { info, on: this.#parentOf(info) };
      this.#children.set(id, child);
      // The announcement goes first: nothing of the child's reaches the client before it.
      this.#send(child.on, this.#visible ? u.announce(info) : u.childCall(info));
      return;
    }
    const child = this.#children.get(id);
    if (!child) return;
    if (this.#visible) this.#childVisible(type, child, p);
    else this.#childAsCall(type, child, p);
    if (type === 'subagent.complete') {
      // Its terminal update is out: nothing more of it is sent, so nothing of it is kept.
      this.#children.delete(id);
      this.#checkTerminal();
    }
  }

  #childVisible(type: string, child: Child, p: Record<string, unknown>): void {
    const id = child.info.subagent_id;
    switch (type) {
      case 'subagent.start':
        return this.#send(child.on, u.running(id));
      case 'subagent.thinking':
        return this.#send(id, u.thoughtChunk(String(p.text)));
      case 'subagent.text':
        return this.#send(id, u.messageChunk(String(p.text)));
      case 'subagent.tool':
        return this.#send(id, u.childTool(id, Number(p.tool_count), String(p.tool_name), String(p.tool_preview)));
      case 'subagent.steer.delivered':
        return this.#send(id, u.userChunk(String(p.text)));
      case 'subagent.complete': {
        const entry = entryFromWire(p);
        for (const closed of u.childToolsClosed(entry)) this.#send(id, closed);
        return this.#send(child.on, u.terminal(entry));
      }
      default:
        return;
    }
  }

  #childAsCall(type: string, child: Child, p: Record<string, unknown>): void {
    const id = child.info.subagent_id;
    switch (type) {
      case 'subagent.start':
        return this.#send(this.sessionId, u.childCallProgress(id, 'started', 'in_progress'));
      case 'subagent.tool':
        return this.#send(this.sessionId, u.childCallProgress(id, `${String(p.tool_name)} ${String(p.tool_preview)}`));
      case 'subagent.steer.delivered':
        return this.#send(this.sessionId, u.childCallProgress(id, `steer delivered: ${String(p.text)}`));
      case 'subagent.complete':
        return this.#send(this.sessionId, u.childCallDone(entryFromWire(p)));
      default:
        return;
    }
  }

  /** The session an update about a new child goes on: its immediate parent's (the RFD's rule). */
  #parentOf(info: u.ChildInfo): string {
    return this.#visible && info.parent_id !== null && this.#children.has(info.parent_id) ? info.parent_id : this.sessionId;
  }

  // ---- the end ----

  /** The link is gone (shutdown): a turn still waiting for its end is answered `cancelled`. */
  close(): void {
    this.#closed = true;
    for (const d of this.#ends.values()) d.resolve('cancelled');
    for (const turn of this.#turns.values()) turn.cancelled = true;
    for (const w of this.#terminalWaiters.splice(0)) w();
  }

  #end(turn_id: string): Deferred<TurnEnd> {
    let d = this.#ends.get(turn_id);
    if (!d) {
      d = deferred<TurnEnd>();
      if (this.#closed) d.resolve('cancelled');
      this.#ends.set(turn_id, d);
    }
    return d;
  }

  #allChildrenTerminal(): Promise<void> {
    if (this.#closed || this.#children.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#terminalWaiters.push(resolve));
  }

  #checkTerminal(): void {
    if (this.#terminalWaiters.length === 0 || this.#children.size > 0) return;
    for (const w of this.#terminalWaiters.splice(0)) w();
  }

  /** A control call whose answer the client does not wait for (cancel is a notification). */
  #call<M extends MethodName>(method: M, params: ParamsOf<M>): void {
    if (this.#closed) return;
    this.#link.call(method, params).catch((err: unknown) => this.#logger.warn({ err, method }, 'cancel not applied'));
  }
}
