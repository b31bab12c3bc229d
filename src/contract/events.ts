// Schemas of the events subrun sends (protocol section 8): the wire's payloads by type, the bus's
// in-process view of them, gateway.ready and the envelope every event notification carries.
import { z } from 'zod';
import { completionEntrySchema, finalStatusSchema, id, PROTOCOL_VERSION, recoveredSchema, unixSeconds } from './entities.ts';

const identity = {
  subagent_id: id,
  parent_id: id.nullable(),
  depth: z.number().int().nonnegative(),
  delegation_id: id,
  task_index: z.number().int().nonnegative(),
  task_count: z.number().int().positive(),
  goal: z.string(),
  model: z.string(),
  tool_count: z.number().int().nonnegative(),
};

const tokenCount = z.number().int().nonnegative();

/**
 * `subagent.complete` on the wire: the completion entry flat beside the identity, with hermes'
 * names (`input_tokens`, `output_tokens` for `tokens.input`, `tokens.output`). The in-process bus
 * and `delegation.result` keep the entry's own shape (`busEventPayloadSchemas`).
 */
export const wireCompletionSchema = z.strictObject({
  ...identity,
  status: finalStatusSchema,
  exit_reason: z.string(),
  summary: z.string(),
  error: z.string().optional(),
  api_calls: tokenCount,
  duration_seconds: z.number().nonnegative(),
  input_tokens: tokenCount,
  output_tokens: tokenCount,
  tool_trace: completionEntrySchema.shape.tool_trace,
  missed_steer: z.string().optional(),
  missed_steer_detail: completionEntrySchema.shape.missed_steer_detail,
  revivable: completionEntrySchema.shape.revivable,
  revived_from: completionEntrySchema.shape.revived_from,
});

/** hermes' `TurnStatus`: how a parent turn ended. */
export const turnStatusSchema = z.enum(['complete', 'error', 'interrupted']);

/** Wire event payloads by type (protocol section 8). */
export const eventPayloadSchemas = {
  'delegation.dispatched': z.strictObject({ delegation_id: id, subagent_ids: z.array(id), count: z.number().int().positive() }),
  'delegation.complete': z.strictObject({ delegation_id: id, results: z.array(completionEntrySchema) }),
  'subagent.spawn_requested': z.strictObject(identity),
  'subagent.start': z.strictObject(identity),
  'subagent.thinking': z.strictObject({ ...identity, text: z.string() }),
  'subagent.text': z.strictObject({ ...identity, text: z.string() }),
  'subagent.tool': z.strictObject({ ...identity, tool_name: z.string(), tool_preview: z.string(), text: z.string(), tool_count: z.number().int().positive() }),
  'subagent.steer.delivered': z.strictObject({ ...identity, steer_id: id, text: z.string(), requeued_from: id.optional() }),
  'subagent.complete': wireCompletionSchema,
  'message.start': z.strictObject({}),
  'message.delta': z.strictObject({ turn_id: id, text: z.string() }),
  'message.thinking': z.strictObject({ turn_id: id, text: z.string() }),
  'message.complete': z.strictObject({
    turn_id: id,
    status: turnStatusSchema,
    text: z.string(),
    exit_reason: z.string().optional(),
    error: z.string().optional(),
    api_calls: tokenCount,
    tokens: z.strictObject({ input: tokenCount, output: tokenCount }),
    usage: z.strictObject({ input: tokenCount, output: tokenCount, total: tokenCount, calls: tokenCount }),
    missed_steer: z.string().optional(),
  }),
  'tool.start': z.strictObject({ turn_id: id, tool_id: id, name: z.string(), args: z.record(z.string(), z.unknown()).optional(), preview: z.string() }),
  'tool.complete': z.strictObject({
    turn_id: id,
    tool_id: id,
    name: z.string(),
    args: z.record(z.string(), z.unknown()).optional(),
    ok: z.boolean(),
    duration_s: z.number().nonnegative(),
    preview: z.string(),
  }),
  'session.steer.delivered': z.strictObject({ turn_id: id, steer_id: id, text: z.string() }),
  /** The session had live children and has none left, every completion sent: the tree is quiet. */
  'session.idle': z.strictObject({ session_id: id, generation: z.number().int().positive() }),
} as const;

/**
 * The in-process bus's view of the children's events (`runtime.events`): the same payloads, except
 * `subagent.tool` (`preview`) and `subagent.complete` (the completion entry under `entry`).
 */
export const busEventPayloadSchemas = {
  ...eventPayloadSchemas,
  'subagent.tool': z.strictObject({ ...identity, tool_name: z.string(), preview: z.string(), tool_count: z.number().int().positive() }),
  'subagent.complete': z.strictObject({ ...identity, entry: completionEntrySchema }),
} as const;

export type EventType = keyof typeof eventPayloadSchemas;
/** The event types' schema; its options are the types, sorted (the catalog's order). */
export const eventTypeSchema = z.enum(eventTypesOf(eventPayloadSchemas));
export const EVENT_TYPES: readonly EventType[] = eventTypeSchema.options;

/** The keys of the payload table as a non-empty sorted tuple (what z.enum takes). */
function eventTypesOf<T extends Record<string, unknown>>(table: T): [keyof T & string, ...(keyof T & string)[]] {
  const keys = Object.keys(table)
    .filter((k): k is keyof T & string => Object.hasOwn(table, k))
    .sort();
  const [first, ...rest] = keys;
  if (first === undefined) throw new Error('no event types');
  return [first, ...rest];
}

/** The payload schema of a wire event type, or undefined for a type the wire does not have. */
export function eventPayloadSchema(type: string): z.ZodType | undefined {
  const known = eventTypeSchema.safeParse(type);
  return known.success ? eventPayloadSchemas[known.data] : undefined;
}

/** An in-process bus event: `{type, ts, src, ...payload}`. */
export function parseBusEvent(value: unknown): { type: EventType } & Record<string, unknown> {
  const event = z.looseObject({ type: eventTypeSchema, ts: unixSeconds, src: z.string() }).parse(value);
  const { type, ts: _ts, src: _src, ...payload } = event;
  busEventPayloadSchemas[type].parse(payload);
  return event;
}

/** The first frame on every connection (hermes' required fields beside ours). */
export const gatewayReadyPayloadSchema = z.strictObject({
  protocol_version: z.literal(PROTOCOL_VERSION),
  /** Names this server process: a seq watermark from another epoch is void (the server restarted). */
  replay_epoch: z.string().min(1),
  server: z.strictObject({ name: z.string(), version: z.string() }),
  /** hermes' theme object: subrun has none. */
  skin: z.strictObject({}),
  /** subrun sends no `*.changed` broadcasts. */
  change_events: z.literal(false),
  /** `gateway.ping` is answered at once on every transport. */
  heartbeat: z.literal(true),
  /** What this server's start recovered from its state directory. */
  recovered: recoveredSchema,
});

/**
 * A wire event notification's params: `{type, session_id, seq, ts, payload}`. `session_id` is
 * absent (never null) on the frames of no session (`gateway.ready`).
 */
export const wireEventSchema = z
  .strictObject({
    type: z.string(),
    session_id: id.optional(),
    seq: z.number().int().nonnegative(),
    ts: unixSeconds,
    payload: z.record(z.string(), z.unknown()),
  })
  .superRefine((e, ctx) => {
    if (e.type === 'gateway.ready') {
      const r = gatewayReadyPayloadSchema.safeParse(e.payload);
      if (!r.success) for (const i of r.error.issues) ctx.addIssue({ code: 'custom', message: i.message, path: ['payload', ...i.path.map(String)] });
      return;
    }
    if (e.session_id === undefined) return ctx.addIssue({ code: 'custom', message: 'a session event needs its session_id', path: ['session_id'] });
    const schema = eventPayloadSchema(e.type);
    if (!schema) return ctx.addIssue({ code: 'custom', message: `unknown event type ${e.type}`, path: ['type'] });
    const r = schema.safeParse(e.payload);
    if (!r.success) for (const i of r.error.issues) ctx.addIssue({ code: 'custom', message: i.message, path: ['payload', ...i.path.map(String)] });
  });

/** An event's payload by its type. */
export type EventPayloadOf<T extends EventType> = z.output<(typeof eventPayloadSchemas)[T]>;
/** The envelope of every `event` notification. */
export type WireEvent = z.output<typeof wireEventSchema>;
export type GatewayReadyPayload = z.output<typeof gatewayReadyPayloadSchema>;

/**
 * A session's event notification of one type: the envelope with its payload typed by the type
 * (`delegation.complete`: `results`; `subagent.complete`: the flat entry; ...).
 */
export interface SessionEventOf<T extends EventType> {
  readonly type: T;
  readonly session_id: string;
  readonly seq: number;
  readonly ts: number;
  readonly payload: EventPayloadOf<T>;
}
/** The first frame on every connection: no session. */
export interface GatewayReadyEvent {
  readonly type: 'gateway.ready';
  readonly session_id?: undefined;
  readonly seq: number;
  readonly ts: number;
  readonly payload: GatewayReadyPayload;
}
/**
 * Every event notification's params, discriminated by `type`: `if (e.type === 'subagent.complete')`
 * narrows `e.payload` to that event's payload. `parseWireEvent` checks a frame and answers this.
 */
export type TypedWireEvent = GatewayReadyEvent | { [T in EventType]: SessionEventOf<T> }[EventType];

/** Whether `value` is an event notification's params the wire's schema accepts (payload included). */
export function isWireEvent(value: unknown): value is TypedWireEvent {
  return wireEventSchema.safeParse(value).success;
}

/** An event notification's params, checked by the wire's schema; throws its ZodError otherwise. */
export function parseWireEvent(value: unknown): TypedWireEvent {
  if (isWireEvent(value)) return value;
  wireEventSchema.parse(value); // throws the schema's error, naming the field
  throw new TypeError('not a wire event');
}

/** The in-process payload of one event type (`runtime.events`). */
export type BusPayloadOf<T extends EventType> = z.output<(typeof busEventPayloadSchemas)[T]>;
/**
 * An in-process event of one type: `{type, ts, src, ...payload}`, other fields `unknown` (so a
 * subscriber to many types may still read `e.subagent_id` without narrowing).
 */
export type BusEventOf<T extends EventType> = { readonly type: T; readonly ts: number; readonly src: string } & Readonly<BusPayloadOf<T>> & {
    readonly [field: string]: unknown;
  };
/** Every in-process event, discriminated by `type`: after `e.type === 'subagent.complete'`, `e.entry` is the completion entry. */
export type BusEvent = { [T in EventType]: BusEventOf<T> }[EventType];
