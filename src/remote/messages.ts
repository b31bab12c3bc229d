// The boundary of the NATS wire: every message either side receives is parsed here with a zod
// schema before anything acts on it, and every subscription callback runs inside `guarded`, so a
// malformed or hostile message is dropped and logged (pino, stderr) and no exception can reach
// the NATS client's reader loop (which would stop reading the connection and print to stdout).
import { z } from 'zod';
import type { Msg, MsgCallback } from '@nats-io/transport-node';
import type { Logger } from '../log.ts';
import { completionEntrySchema } from '../contract/wire.ts';
import type { Assign, AssignReply, ControlRequest, Drop, Heartbeat, SpawnReply, SpawnRequest, WorkerEvent } from './protocol.ts';
import type { CompletionEntry, RunOutcome, Steer } from '../types.ts';

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
export const assignReplySchema = z.union([z.object({ ok: z.literal(true) }), z.object({ ok: z.literal(false), reason: z.enum(['full', 'draining', 'invalid']) })]);
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
  tasks: z.array(z.object({ goal: z.string(), context: z.string().optional(), agent: agent.optional() })).min(1).max(10_000),
  timeout_ms: z.number().int().positive().optional(),
});
export const spawnReplySchema = z.union([z.object({ ok: z.literal(true) }), z.object({ ok: z.literal(false), error: z.string() })]);
export const inboundSchema = z.object({ type: z.literal('results'), delegation_id: id, entries: z.array(completionEntrySchema) });

// The schemas agree with the protocol's types (a drift is a compile error here).
type Agrees<S extends z.ZodType, T> = z.output<S> extends T ? true : never;
const agree: [
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
  Agrees<typeof inboundSchema, { type: 'results'; delegation_id: string; entries: CompletionEntry[] }>,
] = [true, true, true, true, true, true, true, true, true, true, true];
void agree;

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

/** A subscription callback that never throws into the NATS client: an exception is logged. */
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
