// A waiting call (`delegate` with `wait`, `delegation_result` with `wait_seconds`): it collects the
// completions of one delegation from the session's events and answers once all completed, at its
// deadline, when its request is cancelled, or when the link is gone (shutdown, session end).
// A cancel ends the wait alone: the children run on, and their entries wait in delegation_result
// (hosts cancel on every timeout, so a cancel that stopped children would stop them on every slow wait).
//
// With a progressToken, each event of the delegation's children (start, tool, steer delivered,
// completion) is one `notifications/progress`, numbered 1, 2, 3, ... with no total, and a heartbeat
// follows 10 s without one (Claude Code restarts its idle timer on each). Every notification is
// written before the answer and none after it.
import type { CompletionEntry } from '../contract/entities.ts';
import type { RpcEvent } from '../rpc/link.ts';
import { entryFromWire } from '../server/wire-events.ts';
import type { McpSession } from './session.ts';

export const HEARTBEAT_MS = 10_000;

export interface ProgressParams {
  readonly progressToken: string | number;
  readonly progress: number;
  readonly message: string;
  readonly _meta: { readonly subrun: { readonly event: string; readonly subagent_id?: string; readonly done: number; readonly count: number | null } };
}

export interface WaitOptions {
  readonly seconds: number;
  readonly signal: AbortSignal;
  /** Sends one progress notification; absent when the request carries no progressToken. */
  readonly progress?: (params: Omit<ProgressParams, 'progressToken'>) => Promise<void>;
  readonly heartbeat_ms?: number;
}

export interface WaitOutcome {
  readonly done: boolean;
  readonly results: CompletionEntry[];
}

const PROGRESS_EVENTS: Readonly<Record<string, string>> = {
  'subagent.start': 'started',
  'subagent.tool': 'tool',
  'subagent.steer.delivered': 'steer delivered',
  'subagent.complete': 'completed',
};

/**
 * Watches one session's events for a delegation whose id is not known yet: made before the call
 * that names it (so no completion slips between the answer and the listener), bound after it.
 */
export class DelegationWatch {
  readonly #session: McpSession;
  readonly #buffered: RpcEvent[] = [];
  readonly #entries = new Map<string, CompletionEntry>();
  /** The delegation's events before wait() began: each still owes its progress notification. */
  readonly #backlog: RpcEvent[] = [];
  readonly #stop: () => void;
  #delegation: string | undefined;
  #count: number | undefined;
  #wake: (() => void) | undefined;
  #onEvent: ((e: RpcEvent) => void) | undefined;

  constructor(session: McpSession) {
    this.#session = session;
    this.#stop = session.listen((e) => {
      if (this.#delegation === undefined) this.#buffered.push(e);
      else this.#take(e);
    });
  }

  /** Names the delegation (and its size, when known); `known` are entries read already. */
  bind(delegation_id: string, count: number | undefined, known: readonly CompletionEntry[] = []): void {
    this.#delegation = delegation_id;
    this.#count = count;
    for (const e of known) this.#entries.set(e.subagent_id, e);
    for (const e of this.#buffered.splice(0)) this.#take(e);
  }

  get done(): boolean {
    return this.#count !== undefined && this.#entries.size >= this.#count;
  }

  results(): CompletionEntry[] {
    return [...this.#entries.values()].sort((a, b) => a.task_index - b.task_index);
  }

  async wait(opts: WaitOptions): Promise<WaitOutcome> {
    let progress = 0;
    let chain = Promise.resolve();
    let lastSent = 0;
    const send = (event: string, subagent_id: string | undefined) => {
      const p = opts.progress;
      if (!p) return;
      const done = this.#entries.size;
      const count = this.#count ?? null;
      const what = subagent_id === undefined ? 'waiting' : `${subagent_id} ${event}`;
      const params = {
        progress: ++progress,
        message: `${done}/${count ?? '?'} done · ${what}`,
        _meta: { subrun: { event, ...(subagent_id !== undefined ? { subagent_id } : {}), done, count } },
      };
      lastSent = Date.now();
      chain = chain.then(() => p(params)).catch(() => undefined);
    };
    let finished = false;
    const ended = new Promise<void>((resolve) => {
      this.#wake = resolve;
      this.#onEvent = (e) => {
        const verb = PROGRESS_EVENTS[e.type];
        if (verb !== undefined) send(e.type === 'subagent.complete' ? String(e.payload.status) : verb, String(e.payload.subagent_id));
        if (this.done) resolve();
      };
    });
    const heartbeatMs = opts.heartbeat_ms ?? HEARTBEAT_MS;
    lastSent = Date.now();
    const beat = setInterval(
      () => {
        if (!finished && Date.now() - lastSent >= heartbeatMs) send('heartbeat', undefined);
      },
      Math.max(10, Math.floor(heartbeatMs / 4)),
    );
    const deadline = setTimeout(() => this.#wake?.(), opts.seconds * 1000);
    const onAbort = () => this.#wake?.();
    opts.signal.addEventListener('abort', onAbort, { once: true });
    const unClosed = this.#session.onClosed(() => this.#wake?.());
    for (const e of this.#backlog.splice(0)) this.#onEvent?.(e);
    if (this.done || opts.signal.aborted) this.#wake?.();
    try {
      await ended;
    } finally {
      finished = true;
      clearInterval(beat);
      clearTimeout(deadline);
      opts.signal.removeEventListener('abort', onAbort);
      unClosed();
      this.#onEvent = undefined;
    }
    // Every completion's notification is written before the answer; nothing is sent after it.
    await chain;
    return { done: this.done, results: this.results() };
  }

  stop(): void {
    this.#stop();
  }

  #take(e: RpcEvent): void {
    if (e.payload.delegation_id !== this.#delegation) return;
    if (e.type === 'subagent.complete') {
      const entry = entryFromWire(e.payload);
      this.#entries.set(entry.subagent_id, entry);
      if (this.#count === undefined && typeof e.payload.task_count === 'number') this.#count = e.payload.task_count;
    }
    if (this.#onEvent) this.#onEvent(e);
    else this.#backlog.push(e);
  }
}
