// The NATS wire between the control plane and its workers: subjects, the steer stream, each message
// (JSON, with the epoch of its assignment) as a type and a zod schema, and the guarded parse on receipt.
import { z } from 'zod';
import type { Msg, MsgCallback } from '@nats-io/transport-node';
import type { Logger } from '../log.ts';
import { completionEntrySchema } from '../contract/wire.ts';
import type { CompletionEntry, RunOutcome, Steer } from '../types.ts';

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
  allEvents: 'sr.ev.*',
  /** Worker -> control plane request: a child spawns. */
  spawn: (child: string) => `sr.cp.${child}.spawn`,
  /** Worker -> control plane request: the taken receipt for steers about to reach a delivery point. */
  taken: (child: string) => `sr.cp.${child}.taken`,
  /** Every worker -> control plane request (`sr.cp.<child>.<kind>`): one subscription for all children. */
  requests: 'sr.cp.*.*',
  /** Control plane -> worker, about one child: its delegation's entries, or word that steers wait. */
  inbound: (child: string) => `sr.in.${child}`,
} as const;

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
  /** `agent` as the child's task gave it; the control plane checks it is an agent spec. */
  readonly tasks: ReadonlyArray<{ readonly goal: string; readonly context?: string; readonly agent?: unknown }>;
  readonly timeout_ms?: number;
}

export type SpawnReply = { readonly ok: true } | { readonly ok: false; readonly error: string };

/** Control plane -> worker, about one child: its delegation's entries, or word that steers wait. */
export type Inbound =
  { readonly type: 'results'; readonly delegation_id: string; readonly entries: CompletionEntry[] } | { readonly type: 'steer'; readonly epoch: number };

/**
 * A worker asks for the taken receipt of the steers it fetched, right before a delivery point: no
 * steer reaches a model request without one (docs/scale-out.md, "Exact accounting").
 */
export interface TakenRequest {
  readonly epoch: number;
  readonly worker: string;
}

/**
 * The receipt: every undelivered steer of the child whose publish has settled, in acceptance
 * order, with its text (FIFO: none is handed over while an earlier one waits).
 */
export type TakenReply = { readonly ok: true; readonly steers: readonly Steer[] } | { readonly ok: false; readonly error: string };

export interface ControlRequest {
  readonly op: 'interrupt';
  readonly epoch: number;
}

/** An agent spec as the wire carries it is a JSON object (`{kind, ...}`). */
export { isRecord } from '../guards.ts';

const encoder = new TextEncoder();
export function encode(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}

// Every message either side receives is parsed with its schema before anything acts on it.
const id = z.string().min(1).max(256);
const epoch = z.number().int().nonnegative();
const held = z.array(z.strictObject({ child: id, epoch })).max(100_000);
const agent = z.record(z.string(), z.unknown());

export const heartbeatSchema = z.object({ worker: id, capacity: z.number().int().min(1), children: held });
export const dropSchema = z.object({ children: held });
export const assignSchema = z.object({
  child: id,
  epoch,
  goal: z.string(),
  context: z.string().optional(),
  agent,
  limits: z.object({ parent_id: id.nullable(), depth: z.number().int().nonnegative(), can_delegate: z.boolean(), max_batch: z.number().int().min(1) }),
});
export const assignReplySchema = z.union([
  z.object({ ok: z.literal(true) }),
  z.object({ ok: z.literal(false), reason: z.enum(['full', 'draining', 'invalid']) }),
]);
export const controlRequestSchema = z.object({ op: z.literal('interrupt'), epoch });
export const steerSchema = z.object({ steer_id: id, text: z.string(), seq: z.number().int().nonnegative() });

const tokens = z.object({ input: z.number().nonnegative(), output: z.number().nonnegative() });
const outcome = z.object({
  status: z.enum(['completed', 'failed', 'interrupted']),
  summary: z.string().optional(),
  error: z.string().optional(),
  exit_reason: z.string().optional(),
  api_calls: z.number().int().nonnegative().optional(),
  tokens: tokens.optional(),
  pending_steer: z.array(steerSchema).optional(),
});
const from = { epoch, worker: id };
export const workerEventSchema = z.discriminatedUnion('type', [
  z.object({ ...from, type: z.literal('write'), line: z.string() }),
  z.object({ ...from, type: z.literal('thinking'), text: z.string() }),
  z.object({ ...from, type: z.literal('text'), text: z.string() }),
  z.object({ ...from, type: z.literal('text_delta'), text: z.string() }),
  z.object({ ...from, type: z.literal('thinking_delta'), text: z.string() }),
  z.object({ ...from, type: z.literal('tool'), i: z.number().int().nonnegative(), name: z.string(), args: z.unknown().optional() }),
  z.object({ ...from, type: z.literal('tool_end'), i: z.number().int().nonnegative(), result: z.string().optional(), ok: z.boolean() }),
  z.object({ ...from, type: z.literal('delivered'), steer_ids: z.array(id) }),
  z.object({ ...from, type: z.literal('finish'), outcome }),
]);
/** Enough of an event to fence its sender when it is not the live assignment. */
export const eventSenderSchema = z.object(from);

export const spawnRequestSchema = z.object({
  ...from,
  delegation_id: id,
  subagent_ids: z.array(id).min(1).max(10_000),
  tasks: z
    .array(z.object({ goal: z.string(), context: z.string().optional(), agent: agent.optional() }))
    .min(1)
    .max(10_000),
  timeout_ms: z.number().int().positive().optional(),
});
export const spawnReplySchema = z.union([z.object({ ok: z.literal(true) }), z.object({ ok: z.literal(false), error: z.string() })]);
export const takenRequestSchema = z.object(from);
export const takenReplySchema = z.union([
  z.object({ ok: z.literal(true), steers: z.array(steerSchema).max(10_000) }),
  z.object({ ok: z.literal(false), error: z.string() }),
]);
export const inboundSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('results'), delegation_id: id, entries: z.array(completionEntrySchema) }),
  // Steers wait for the child at this epoch: ask for their receipt at the next delivery point.
  z.object({ type: z.literal('steer'), epoch }),
]);

// The schemas agree with the protocol's types (a drift is a compile error here).
type Agrees<S extends z.ZodType, T> = z.output<S> extends T ? true : never;
const _agree: [
  Agrees<typeof heartbeatSchema, Heartbeat>,
  Agrees<typeof dropSchema, Drop>,
  Agrees<typeof assignSchema, Assign>,
  Agrees<typeof assignReplySchema, AssignReply>,
  Agrees<typeof controlRequestSchema, ControlRequest>,
  Agrees<typeof steerSchema, Steer>,
  Agrees<typeof outcome, RunOutcome>,
  Agrees<typeof workerEventSchema, WorkerEvent>,
  Agrees<typeof spawnRequestSchema, SpawnRequest>,
  Agrees<typeof spawnReplySchema, SpawnReply>,
  Agrees<typeof takenRequestSchema, TakenRequest>,
  Agrees<typeof takenReplySchema, TakenReply>,
  Agrees<typeof inboundSchema, Inbound>,
] = [true, true, true, true, true, true, true, true, true, true, true, true, true];

const decoder = new TextDecoder();

/** Parses a message body with `schema`; undefined (and one warn line) for anything else. */
export function parse<S extends z.ZodType>(schema: S, data: Uint8Array, logger: Logger, subject: string): z.output<S> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(decoder.decode(data));
  } catch {
    logger.warn({ subject, bytes: data.length }, 'dropped a malformed NATS message (not JSON)');
    return undefined;
  }
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  logger.warn({ subject, bytes: data.length, issue: r.error.issues[0]?.message }, 'dropped a malformed NATS message');
  return undefined;
}

/** Parses without logging (a reply we are only curious about). */
export function tryParse<S extends z.ZodType>(schema: S, data: Uint8Array): z.output<S> | undefined {
  try {
    const r = schema.safeParse(JSON.parse(decoder.decode(data)));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A subscription callback that never throws into the NATS client (an exception there would stop
 * its reader loop and print to stdout): a malformed message or a failed handler is logged.
 */
export function guarded(logger: Logger, fn: (m: Msg) => void): MsgCallback<Msg> {
  return (err: Error | null, m: Msg) => {
    if (err) {
      logger.warn({ err }, 'NATS subscription error');
      return;
    }
    try {
      fn(m);
    } catch (e) {
      logger.error({ err: e, subject: m.subject }, 'a NATS message handler failed; the message was dropped');
    }
  };
}
