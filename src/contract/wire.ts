// Schemas of the objects subrun puts on the wire (protocol sections 4, 5 and 8): snapshots,
// completion entries, tail/steer/interrupt results and events. The in-process API returns the
// same objects; tests hold the runtime's output and the docs' JSON examples to these schemas.
import { z } from 'zod';

/** The wire's version, in gateway.ready and server.info; bumped on any incompatible change. */
export const PROTOCOL_VERSION = 1;

const id = z.string().min(1);
const unixSeconds = z.number().nonnegative();

export const finalStatusSchema = z.enum(['completed', 'interrupted', 'failed', 'error', 'timeout']);
export const childStatusSchema = z.enum(['queued', 'running', 'completed', 'interrupted', 'failed', 'error', 'timeout']);

export const snapshotSchema = z.strictObject({
  subagent_id: id,
  parent_id: id.nullable(),
  depth: z.number().int().nonnegative(),
  goal: z.string(),
  delegation_id: id,
  model: z.string(),
  started_at: unixSeconds.nullable(),
  status: childStatusSchema,
  tool_count: z.number().int().nonnegative(),
  last_tool: z.string(),
  accepting_steer: z.boolean(),
  finished_at: unixSeconds.optional(),
});

export const completionEntrySchema = z.strictObject({
  task_index: z.number().int().nonnegative(),
  subagent_id: id,
  status: finalStatusSchema,
  exit_reason: z.string(),
  summary: z.string(),
  error: z.string().optional(),
  api_calls: z.number().int().nonnegative(),
  duration_seconds: z.number().nonnegative(),
  model: z.string(),
  tokens: z.strictObject({ input: z.number().int().nonnegative(), output: z.number().int().nonnegative() }),
  tool_trace: z.array(z.strictObject({ tool: z.string(), status: z.enum(['ok', 'error', 'running']) })),
  missed_steer: z.string().optional(),
  // With missed_steer, always: each missed steer; maybe_delivered only after a worker loss.
  missed_steer_detail: z.array(z.strictObject({ steer_id: id, text: z.string(), maybe_delivered: z.boolean() })).optional(),
});

export const tailResultSchema = z.strictObject({
  subagent_id: id,
  available: z.boolean(),
  text: z.string(),
  truncated: z.boolean(),
  offset: z.number().int().nonnegative(),
});

export const steerResultSchema = z.union([
  z.strictObject({ status: z.literal('queued'), subagent_id: id, text: z.string(), steer_id: id }),
  z.strictObject({ status: z.literal('rejected'), subagent_id: id, text: z.string() }),
]);

export const interruptResultSchema = z.strictObject({
  found: z.boolean(),
  subagent_id: id,
  interrupted: z.array(id),
});

// ---- the types of these objects, inferred: the schemas above are their single source ----

/** Deeply readonly: what the runtime hands out is never changed by the receiver. */
export type Immutable<T> = T extends readonly (infer U)[] ? readonly Immutable<U>[] : T extends object ? { readonly [K in keyof T]: Immutable<T[K]> } : T;

export type FinalStatus = z.output<typeof finalStatusSchema>;
export type ChildStatus = z.output<typeof childStatusSchema>;
/** The public view of a child (protocol section 5). */
export type Snapshot = Immutable<z.output<typeof snapshotSchema>>;
/** What the parent gets back for each child: exactly one, whatever happened. */
export type CompletionEntry = Immutable<z.output<typeof completionEntrySchema>>;
export type ToolTraceItem = CompletionEntry['tool_trace'][number];
export type Tokens = CompletionEntry['tokens'];
export type TailResult = Immutable<z.output<typeof tailResultSchema>>;
export type WireSteerResult = Immutable<z.output<typeof steerResultSchema>>;
export type InterruptResult = Readonly<z.output<typeof interruptResultSchema>>;

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
  'subagent.steer.delivered': z.strictObject({ ...identity, steer_id: id, text: z.string() }),
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
export const EVENT_TYPES = Object.keys(eventPayloadSchemas).sort() as EventType[];

/** An in-process bus event: `{type, ts, src, ...payload}`. */
export function parseBusEvent(value: unknown): { type: EventType } & Record<string, unknown> {
  const head = z.looseObject({ type: z.enum(EVENT_TYPES as [EventType, ...EventType[]]), ts: unixSeconds, src: z.string() }).parse(value);
  const { type: _t, ts: _ts, src: _src, ...payload } = value as Record<string, unknown>;
  busEventPayloadSchemas[head.type].parse(payload);
  return value as { type: EventType } & Record<string, unknown>;
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
    const schema = (eventPayloadSchemas as Record<string, z.ZodType>)[e.type];
    if (!schema) return ctx.addIssue({ code: 'custom', message: `unknown event type ${e.type}`, path: ['type'] });
    const r = schema.safeParse(e.payload);
    if (!r.success) for (const i of r.error.issues) ctx.addIssue({ code: 'custom', message: i.message, path: ['payload', ...i.path.map(String)] });
  });

// ---- method params (validated once, at the boundary; unknown params are ignored) ----

const loose = z.looseObject;
/** Checked by the handler in the protocol's order (4000, 4002/4003, 4001), so typed loosely here. */
const anyField = z.unknown().optional();
/** 1 to 255 visible ASCII characters (section 5 of the HTTP API). */
const idempotencyKey = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[\x21-\x7e]+$/, 'expected 1 to 255 visible ASCII characters')
  .optional();

export const paramsSchemas = {
  'server.info': loose({}),
  'ping': loose({}),
  'gateway.ping': loose({}),
  'client.capabilities': loose({}),
  // hermes' create params (cols, source, cwd, model, ...) are accepted; title and
  // close_on_disconnect mean something here, the rest is ignored.
  'session.create': loose({ title: z.string().max(512).nullable().optional(), close_on_disconnect: z.boolean().optional() }),
  'session.resume': loose({ session_id: anyField, session_key: anyField, close_on_disconnect: z.boolean().optional() }),
  'session.activate': loose({ session_id: anyField, session_key: anyField }),
  'session.attach': loose({ session_id: anyField, session_key: anyField }),
  'session.detach': loose({ session_id: anyField }),
  'session.reset': loose({ session_id: anyField, idempotency_key: idempotencyKey }),
  'session.close': loose({ session_id: anyField }),
  'session.events.since': loose({ session_id: anyField, session_key: anyField, last_seen: z.number().int().nonnegative().nullable().optional() }),
  'delegation.spawn': loose({
    session_id: anyField,
    tasks: anyField,
    timeout_ms: z.number().int().positive().optional(),
    idempotency_key: idempotencyKey,
  }),
  'delegation.result': loose({ session_id: anyField, delegation_id: anyField }),
  'delegation.status': loose({ session_id: anyField }),
  'delegation.pause': loose({ session_id: anyField, paused: z.boolean().optional() }),
  'subagent.list': loose({ session_id: anyField, include_finished: z.boolean().optional() }),
  'subagent.tail': loose({ session_id: anyField, subagent_id: anyField, since: z.number().int().nonnegative().optional() }),
  'subagent.steer': loose({ session_id: anyField, subagent_id: anyField, text: anyField, idempotency_key: idempotencyKey }),
  'subagent.interrupt': loose({ session_id: anyField, subagent_id: anyField, idempotency_key: idempotencyKey }),
  'prompt.submit': loose({ session_id: anyField, text: anyField }),
  'session.steer': loose({ session_id: anyField, text: anyField }),
  'session.interrupt': loose({ session_id: anyField }),
  'spawn_tree.save': loose({
    session_id: z.string().max(256).nullable().optional(),
    subagents: anyField,
    started_at: unixSeconds.max(1e11).nullable().optional(),
    finished_at: unixSeconds.max(1e11).nullable().optional(),
    label: z.string().max(512).nullable().optional(),
  }),
  'spawn_tree.list': loose({
    session_id: z.string().max(256).nullable().optional(),
    session_key: anyField,
    cross_session: z.boolean().optional(),
    limit: z.number().int().min(1).max(500).nullable().optional(),
  }),
  'spawn_tree.load': loose({ path: anyField, session_id: anyField, session_key: anyField }),
} as const;

/**
 * Cheap checks of the params of the methods hosts poll (bench/cases/rpc-stdio.ts): true only for
 * params the method's schema above accepts as they are. What they refuse goes to the schema.
 */
export const paramsAccept = {
  'subagent.list': (p: Record<string, unknown>) => p.include_finished === undefined || typeof p.include_finished === 'boolean',
} as const satisfies Partial<Record<keyof typeof paramsSchemas, (p: Record<string, unknown>) => boolean>>;

export type MethodName = keyof typeof paramsSchemas;
/** A method's params as its handler gets them (for hosts: what to send). */
export type ParamsOf<M extends MethodName> = z.output<(typeof paramsSchemas)[M]>;

// ---- method results (tests hold every reply to these) ----

/** Present (and true) only on the kept answer of a repeated idempotency key. */
const replayFlag = z.literal(true).optional();

/** One row of the parent conversation, as hermes' `TranscriptMessage` (tool calls are not rows). */
export const transcriptRowSchema = z.strictObject({ role: z.enum(['user', 'assistant', 'tool']), text: z.string() });

/** What session.create, resume and activate say about the session (hermes' `SessionLiveInfo`). */
export const sessionInfoSchema = z.strictObject({
  pong: z.literal(true),
  model: z.string(),
  running: z.boolean(),
  title: z.string(),
  cwd: z.string(),
  stored_session_id: id,
});

const sessionView = {
  session_id: id,
  /** The id a host stores to resume by: the session id itself (subrun keeps no other). */
  stored_session_id: id,
  generation: z.number().int().positive(),
  message_count: z.number().int().nonnegative(),
  messages: z.array(transcriptRowSchema),
  info: sessionInfoSchema,
};

/** A saved spawn tree file, as spawn_tree.save writes it and spawn_tree.load returns it. */
export const spawnTreeFileSchema = z.strictObject({
  session_id: z.string(),
  started_at: unixSeconds.nullable(),
  finished_at: unixSeconds,
  label: z.string(),
  subagents: z.array(z.record(z.string(), z.unknown())).min(1),
});

export const spawnTreeEntrySchema = z.strictObject({
  path: z.string().min(1),
  session_id: z.string(),
  started_at: unixSeconds.nullable(),
  finished_at: unixSeconds,
  label: z.string(),
  count: z.number().int().positive(),
});


export const resultSchemas = {
  'server.info': z.strictObject({
    name: z.string(),
    version: z.string(),
    protocol_version: z.literal(PROTOCOL_VERSION),
    methods: z.array(z.string()),
    events: z.array(z.string()),
    limits: z.record(z.string(), z.number()),
  }),
  'ping': z.strictObject({ pong: z.literal(true) }),
  'gateway.ping': z.strictObject({ pong: z.literal(true), ok: z.literal(true) }),
  'client.capabilities': z.strictObject({ server_requests: z.array(z.never()) }),
  'session.create': z.strictObject({ ...sessionView, session_key: z.string().min(16) }),
  'session.resume': z.strictObject({ ...sessionView, live_subagents: z.number().int().nonnegative(), open_requests: z.array(z.never()) }),
  'session.activate': z.strictObject({ ...sessionView, live_subagents: z.number().int().nonnegative(), open_requests: z.array(z.never()) }),
  'session.attach': z.strictObject({ session_id: id, generation: z.number().int().positive(), live_subagents: z.number().int().nonnegative() }),
  'session.detach': z.strictObject({ detached: z.literal(true) }),
  'session.reset': z.strictObject({ session_id: id, generation: z.number().int().positive(), idempotent_replay: replayFlag }),
  'session.close': z.strictObject({ closed: z.literal(true), interrupted: z.number().int().nonnegative() }),
  'session.events.since': z.strictObject({
    events: z.array(wireEventSchema),
    latest_seq: z.number().int().nonnegative(),
    truncated: z.boolean(),
    count: z.number().int().nonnegative(),
    epoch: z.string().min(1),
    open_requests: z.array(z.unknown()),
  }),
  'delegation.spawn': z.strictObject({ status: z.literal('dispatched'), delegation_id: id, subagent_ids: z.array(id), count: z.number().int().positive(), idempotent_replay: replayFlag }),
  'delegation.result': z.strictObject({ delegation_id: id, done: z.boolean(), results: z.array(completionEntrySchema) }),
  'delegation.status': z.strictObject({
    active: z.array(snapshotSchema),
    paused: z.boolean(),
    max_spawn_depth: z.number().int().positive(),
    max_concurrent_children: z.number().int().positive(),
  }),
  'delegation.pause': z.strictObject({ paused: z.boolean() }),
  'subagent.list': z.strictObject({ subagents: z.array(snapshotSchema), delegations: z.array(z.never()) }),
  'subagent.tail': tailResultSchema,
  'subagent.steer': z.union([
    z.strictObject({ status: z.literal('queued'), subagent_id: id, text: z.string(), steer_id: id, idempotent_replay: replayFlag }),
    z.strictObject({ status: z.literal('rejected'), subagent_id: id, text: z.string(), idempotent_replay: replayFlag }),
  ]),
  'subagent.interrupt': interruptResultSchema.extend({ idempotent_replay: replayFlag }),
  'prompt.submit': z.strictObject({ status: z.literal('streaming'), turn_id: id }),
  'session.steer': z.union([
    z.strictObject({ session_id: id, status: z.literal('queued'), text: z.string(), steer_id: id }),
    z.strictObject({ session_id: id, status: z.literal('rejected'), text: z.string() }),
  ]),
  'session.interrupt': z.strictObject({
    session_id: id,
    status: z.enum(['interrupted', 'not_interrupted']),
    interrupted: z.boolean(),
    turn_interrupted: z.boolean(),
    stopped: z.array(id),
  }),
  'spawn_tree.save': z.strictObject({ path: z.string().min(1), session_id: z.string() }),
  'spawn_tree.list': z.strictObject({ entries: z.array(spawnTreeEntrySchema) }),
  'spawn_tree.load': spawnTreeFileSchema,
} as const satisfies Record<MethodName, z.ZodType>;

// ---- the wire's types, inferred from the schemas above (for hosts: subrun/protocol) ----

/** A method's result as the server sends it. */
export type ResultOf<M extends keyof typeof resultSchemas> = z.output<(typeof resultSchemas)[M]>;
/** An event's payload by its type. */
export type EventPayloadOf<T extends EventType> = z.output<(typeof eventPayloadSchemas)[T]>;
/** The envelope of every `event` notification. */
export type WireEvent = z.output<typeof wireEventSchema>;
export type GatewayReadyPayload = z.output<typeof gatewayReadyPayloadSchema>;
