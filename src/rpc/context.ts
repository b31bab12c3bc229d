// What a method handler gets: the runtime, the authority model, the delegation ledger, the
// server's limits, and the transport the request arrived on (the only source of authority).
import type { z } from 'zod';
import type { Clock } from '../clock.ts';
import type { Logger } from '../log.ts';
import type { Runtime } from '../delegation/runtime.ts';
import type { DelegationLedger } from './delegation-ledger.ts';
import type { IdempotencyStore } from './idempotency.ts';
import type { ParentAgent } from '../agent/parent-agent.ts';
import type { SessionStore } from './sessions.ts';
import type { SpawnTreeStore } from './spawn-trees.ts';

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

export interface ServerState {
  readonly runtime: Runtime;
  readonly sessions: SessionStore;
  readonly ledger: DelegationLedger;
  /** The kept answers of keyed calls (idempotency keys), per session and method. */
  readonly idempotency: IdempotencyStore;
  readonly limits: ServerLimits;
  readonly info: { readonly name: string; readonly version: string };
  /** Names this server process in gateway.ready and replays (new on every start). */
  readonly replay_epoch: string;
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
  /** Set once shutdown began: no new work is accepted. */
  readonly draining: boolean;
  /** The session's parent agent (made on first use). */
  parentOf(session_id: string): ParentAgent;
  /** The session's parent agent if it has one (never makes one). */
  peekParent(session_id: string): ParentAgent | undefined;
  /** Drops a session's parent agent (its turn is stopped first). */
  forgetParent(session_id: string): void;
  methodNames(): string[];
  eventTypes(): string[];
}

export interface CallContext {
  readonly server: ServerState;
  /** The id of the connection the request arrived on. */
  readonly transport: string;
}

export interface MethodDef<S extends z.ZodType = z.ZodType> {
  readonly params: S;
  /**
   * Optional cheap check of the params object: true only when the schema would accept it and
   * give the handler the same fields, so the schema can be skipped. Anything it does not accept
   * goes through the schema, which gives the error (or the parsed params).
   */
  readonly accepts?: (params: Record<string, unknown>) => boolean;
  handle(params: z.output<S>, ctx: CallContext): unknown;
}

export function defineMethod<S extends z.ZodType>(
  params: S,
  handle: (params: z.output<S>, ctx: CallContext) => unknown,
  accepts?: (params: Record<string, unknown>) => boolean,
): MethodDef {
  return accepts === undefined ? { params, handle: handle as MethodDef['handle'] } : { params, accepts, handle: handle as MethodDef['handle'] };
}
