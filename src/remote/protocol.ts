// The wire between the control plane and its workers over NATS: subject names, the steer stream,
// and the messages each side sends. Everything is JSON, checked on receipt by messages.ts; every
// message about a child carries the epoch of its assignment, so a worker that was declared lost
// and comes back is fenced.
import type { RunOutcome, Steer } from '../types.ts';

/** The JetStream stream holding every child's steer mailbox (one subject per child). */
export const STEER_STREAM = 'SUBRUN_STEER';

export const subjects = {
  /** Worker heartbeats: `sr.hb.<worker>`. */
  heartbeat: (worker: string) => `sr.hb.${worker}`,
  heartbeats: 'sr.hb.*',
  /** Control plane -> worker request: take this child. */
  assign: (worker: string) => `sr.w.${worker}.assign`,
  /** Control plane -> worker: drop these children (fenced epochs). */
  drop: (worker: string) => `sr.w.${worker}.drop`,
  /** A child's steer mailbox in STEER_STREAM. */
  steer: (child: string) => `sr.steer.${child}`,
  steers: 'sr.steer.>',
  /** Control plane -> worker request about one child (interrupt). */
  control: (child: string) => `sr.ctl.${child}`,
  /** Worker -> control plane: a child's events, transcript and outcome, in order. */
  events: (child: string) => `sr.ev.${child}`,
  /** Worker -> control plane request: a child spawns. */
  spawn: (child: string) => `sr.cp.${child}.spawn`,
  /** Control plane -> worker: a child's delegation finished (its entries). */
  inbound: (child: string) => `sr.in.${child}`,
} as const;

/** The durable pull consumer of one child's mailbox. */
export const consumerName = (child: string): string => `c_${child}`;

/**
 * A mailbox consumer no one has pulled from for this long is deleted by the server: the backstop
 * for one whose cleanup never ran (NATS down then, the control plane gone). One hour, so a child
 * waiting `queued` for a worker loses nothing: its worker makes the consumer again (same config).
 */
export const CONSUMER_INACTIVE_NS = 3_600_000_000_000;
/** A mailbox message older than this is dropped by the server (orphans of a lost cleanup): 7 days. */
export const STEER_MAX_AGE_NS = 7 * 24 * 3_600_000_000_000;

export interface Heartbeat {
  readonly worker: string;
  readonly capacity: number;
  /** Children it holds a slot for, with their epochs (a returning worker is fenced by these). */
  readonly children: ReadonlyArray<{ readonly child: string; readonly epoch: number }>;
}

export interface TaskLimits {
  readonly parent_id: string | null;
  readonly depth: number;
  readonly can_delegate: boolean;
  readonly max_batch: number;
}

export interface Assign {
  readonly child: string;
  readonly epoch: number;
  readonly goal: string;
  readonly context?: string;
  /** The agent spec the worker resolves through its runner kinds (`{kind, ...}`). */
  readonly agent: Record<string, unknown>;
  readonly limits: TaskLimits;
}

export type AssignReply = { readonly ok: true } | { readonly ok: false; readonly reason: 'full' | 'draining' | 'invalid' };

export interface Drop {
  readonly children: ReadonlyArray<{ readonly child: string; readonly epoch: number }>;
}

/** A steer as it sits in the mailbox. */
export type MailboxSteer = Steer;

/** What a worker sends about a running child, on `sr.ev.<child>`. */
export type WorkerEvent = { readonly epoch: number; readonly worker: string } & (
  | { readonly type: 'write'; readonly line: string }
  | { readonly type: 'thinking'; readonly text: string }
  | { readonly type: 'text'; readonly text: string }
  | { readonly type: 'text_delta'; readonly text: string }
  | { readonly type: 'thinking_delta'; readonly text: string }
  | { readonly type: 'tool'; readonly i: number; readonly name: string; readonly args?: unknown }
  | { readonly type: 'tool_end'; readonly i: number; readonly result?: string; readonly ok: boolean }
  | { readonly type: 'delivered'; readonly steer_ids: readonly string[] }
  | { readonly type: 'finish'; readonly outcome: RunOutcome }
);

export interface SpawnRequest {
  readonly epoch: number;
  readonly worker: string;
  /** Ids the worker made (its delegate() answers them synchronously); the control plane uses them. */
  readonly delegation_id: string;
  readonly subagent_ids: readonly string[];
  readonly tasks: ReadonlyArray<{ readonly goal: string; readonly context?: string; readonly agent?: Record<string, unknown> }>;
  readonly timeout_ms?: number;
}

export type SpawnReply = { readonly ok: true } | { readonly ok: false; readonly error: string };

export interface ControlRequest {
  readonly op: 'interrupt';
  readonly epoch: number;
}

const encoder = new TextEncoder();
export function encode(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}
