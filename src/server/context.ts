// What every surface shares and a method handler may use: the services of one server (runtime,
// sessions, ledger, idempotency, limits, ...) and the transport a call arrived on.
import type { Clock } from '../clock.ts';
import type { IdMaker } from '../ids.ts';
import type { Logger } from '../log.ts';
import type { Owner } from '../types.ts';
import type { Runtime } from '../delegation/runtime.ts';
import type { DelegationLedger } from './delegation-ledger.ts';
import type { IdempotencyStore } from './idempotency.ts';
import type { SessionStore } from './sessions.ts';
import type { SpawnTreeStore } from './spawn-trees.ts';
import type { Recovered, ServerStore } from '../store/types.ts';

export interface ServerLimits {
  readonly max_message_bytes: number;
  /** Most elements one batch may have; a longer batch is one -32600 and none of it runs. */
  readonly max_batch: number;
  /** Bytes one message's replies may take; past it each remaining reply is -32001. */
  readonly max_reply_bytes: number;
  readonly park_ttl_ms: number;
  /** Each session's replay ring: events and UTF-8 bytes kept at most. */
  readonly replay_events: number;
  readonly replay_bytes: number;
  readonly max_concurrent_children: number;
  readonly max_spawn_depth: number;
  readonly max_steer_bytes: number;
  readonly tail_window_bytes: number;
}

/** One row of a parent conversation as hosts show it (hermes' `TranscriptMessage`). */
export interface TranscriptRow {
  readonly role: 'user' | 'assistant' | 'tool';
  readonly text: string;
}

/**
 * A session's parent agent as the server drives it. The server never builds one: the composition
 * root injects a ParentFactory (src/server.ts wires the model loop of src/agent in).
 */
export interface SessionParent {
  readonly running: boolean;
  transcript(): TranscriptRow[];
  /** Starts one turn in the background; throws a SubrunError when it cannot. */
  submit(text: string): { status: 'streaming'; turn_id: string };
  steer(text: string): { status: 'queued'; text: string; steer_id: string } | { status: 'rejected'; text: string };
  /** Stops the running turn; false when none runs. */
  interrupt(): boolean;
  /** session.reset: a fresh conversation. */
  reset(): void;
  /** The session closed: stopped for good. */
  close(): void;
}

/** What a parent factory is told about the session it makes a parent agent for. */
export interface ParentContext {
  readonly session_id: string;
  /** The server's runtime, ids, logger and clock: the parent's children run beside the hosts'. */
  readonly runtime: Runtime;
  readonly ids: IdMaker;
  readonly logger: Logger;
  readonly clock: Clock;
  /** The directory a surface opened the session in (ACP's cwd), if one did. */
  readonly workspace: string | undefined;
  /** The owner its children are bound to: the session's live generation, read at each spawn. */
  readonly owner: () => Owner;
  /** A session-level event, numbered and routed like a child's. */
  readonly emit: (type: string, payload: Record<string, unknown>) => void;
}

export type ParentFactory = (ctx: ParentContext) => SessionParent;

/** The sessions' parent agents, made on first use through the injected factory. */
export interface ParentAgents {
  /** The session's parent agent (made on first use); undefined when the server has none to make. */
  of(session_id: string): SessionParent | undefined;
  /** The session's parent agent if it has one (never makes one). */
  peek(session_id: string): SessionParent | undefined;
}

/** Everything below the surfaces, each service by name: a handler picks the few it uses. */
export interface Services {
  readonly runtime: Runtime;
  readonly sessions: SessionStore;
  readonly ledger: DelegationLedger;
  /** The kept answers of keyed calls (idempotency keys), per session and method. */
  readonly idempotency: IdempotencyStore;
  readonly limits: ServerLimits;
  readonly info: { readonly name: string; readonly version: string };
  /** Names the history hosts' seqs belong to, in gateway.ready and replays (the state directory's, or new per process). */
  readonly replay_epoch: string;
  /** Where state outlives the process (the memory store: nowhere). */
  readonly store: ServerStore;
  /** What this start found and settled in the store. */
  readonly recovered: Recovered;
  readonly clock: Clock;
  /** hermes' authority model: the token owns every session (see ServerOptions.single_user). */
  readonly single_user: boolean;
  /** The working directory and model hosts are told about (session info). */
  readonly cwd: string;
  readonly model: string;
  /** Saved spawn trees; undefined when the server keeps no state. */
  readonly spawnTrees: SpawnTreeStore | undefined;
  /** Lifecycle lines at info, with ids; never steer text, keys or tokens. */
  readonly logger: Logger;
  /** True once shutdown began: no new work is accepted. */
  readonly draining: boolean;
  readonly parents: ParentAgents;
  /** Every method the server answers and every event it sends, sorted. */
  readonly catalog: { methods(): string[]; events(): string[] };
}

export interface CallContext {
  readonly services: Services;
  /** The id of the connection the request arrived on. */
  readonly transport: string;
}
