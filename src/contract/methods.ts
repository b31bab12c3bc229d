// The methods of the wire: each one's params schema (validated once, at the boundary, answering
// subrun's own codes) and result schema; hosts and the server share them (subrun/protocol).
import { z } from 'zod';
import {
  completionEntrySchema,
  id,
  interruptResultSchema,
  PROTOCOL_VERSION,
  recoveredSchema,
  snapshotSchema,
  steerRefusalSchema,
  tailResultSchema,
  timelineSchema,
  unixSeconds,
} from './entities.ts';
import { wireEventSchema } from './events.ts';

// ---- method params (validated once, at the boundary; unknown params are ignored) ----

/** Largest steer accepted, in UTF-8 bytes of the trimmed text. */
export const MAX_STEER_BYTES = 32768;

/** UTF-8 bytes of `text` without allocating (a steer's bound is checked on every steer). */
export function utf8Length(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/** Why steer text is refused before any child is looked at, or undefined when it is fine. */
export function steerTextProblem(text: string): 'empty' | 'too_long' | undefined {
  if (text === '') return 'empty';
  // At most 3 bytes per UTF-16 unit: most steers need no count.
  return text.length * 3 > MAX_STEER_BYTES && utf8Length(text) > MAX_STEER_BYTES ? 'too_long' : undefined;
}

/**
 * The wire code a param check answers with, and its place in the protocol's order: shape errors
 * (-32602) first, then a missing id or list (4000), then steer text (4002/4003); session authority
 * (4001) is the handler's, after the schema. The dispatcher answers the first by rank.
 */
export interface CodedIssue {
  readonly rpc_code: number;
  readonly rank: number;
}

export const ParamCode = { IdRequired: 4000, TextRequired: 4002, TextTooLong: 4003 } as const;

function coded(ctx: z.RefinementCtx, rpc_code: number, rank: number, message: string): never {
  ctx.addIssue({ code: 'custom', message, params: { rpc_code, rank } satisfies CodedIssue });
  return z.NEVER;
}

/** A non-empty string id, or 4000 `{name} required`. */
const requiredId = (name: string) =>
  z.unknown().transform((v, ctx): string => (typeof v === 'string' && v.trim() !== '' ? v : coded(ctx, ParamCode.IdRequired, 1, `${name} required`)));

/** Array.isArray, its items left unknown (not any). */
const isList = (v: unknown): v is unknown[] => Array.isArray(v);

/**
 * A non-empty list; missing (or null, or empty) is 4000 `{name} required`, a value of another type
 * a shape error (-32602 naming the field, protocol.md). Its items are the runtime's to check.
 */
const requiredList = (name: string) =>
  z.unknown().transform((v, ctx): unknown[] => {
    if (isList(v) && v.length > 0) return v;
    if (v === undefined || v === null || isList(v)) return coded(ctx, ParamCode.IdRequired, 1, `${name} required`);
    ctx.addIssue({ code: 'custom', message: `${name} must be a list, got ${typeof v}` });
    return z.NEVER;
  });

/** A non-empty list of JSON objects, or 4000 `{name} required`. */
const requiredObjects = (name: string) =>
  z
    .unknown()
    .transform((v, ctx): Record<string, unknown>[] =>
      Array.isArray(v) && v.length > 0 && v.every(isRecord) ? v : coded(ctx, ParamCode.IdRequired, 1, `${name} required`),
    );

/** The contract imports only zod: the same check as guards.ts, on the contract's own floor. */
function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * A text field, trimmed; '' when missing or null (the field's own "required" code follows). One
 * that is there but not a string (a number, an object, an array nested 20,000 deep) is a shape
 * error, -32602, ranked before every coded check: undefined. Nothing of it is read but its type.
 */
function trimmedText(v: unknown, ctx: z.RefinementCtx): string | undefined {
  if (typeof v === 'string') return v.trim();
  if (v === undefined || v === null) return '';
  ctx.addIssue({ code: 'custom', message: 'expected a string' });
  return undefined;
}

/** Steer text, trimmed: -32602 when not a string, 4002 when empty (or missing), 4003 past MAX_STEER_BYTES. */
const steerText = z.unknown().transform((v, ctx): string => {
  const text = trimmedText(v, ctx);
  if (text === undefined) return z.NEVER;
  const problem = steerTextProblem(text);
  if (problem === 'empty') return coded(ctx, ParamCode.TextRequired, 2, 'text is required');
  if (problem === 'too_long') return coded(ctx, ParamCode.TextTooLong, 2, 'text too long');
  return text;
});

/** Prompt text, trimmed: -32602 when not a string, 4002 when empty (a prompt has no steer bound). */
const promptText = z.unknown().transform((v, ctx): string => {
  const text = trimmedText(v, ctx);
  if (text === undefined) return z.NEVER;
  return text === '' ? coded(ctx, ParamCode.TextRequired, 2, 'text is required') : text;
});

/** Authority is the handler's (4001, after every param check): any value reaches it. */
const sessionRef = z.unknown().optional();
/** A secret compared by the session store; any value reaches it. */
const sessionKey = z.unknown().optional();

const loose = z.looseObject;
/** 1 to 255 visible ASCII characters (section 5 of the HTTP API). */
const idempotencyKey = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[\x21-\x7e]+$/, 'expected 1 to 255 visible ASCII characters')
  .optional();

export const paramsSchemas = {
  'server.info': loose({}),
  ping: loose({}),
  'gateway.ping': loose({}),
  'client.capabilities': loose({}),
  'gateway.capabilities': loose({}),
  // hermes' list params (profile, title, include_hidden) are ignored; `limit` caps the rows.
  'session.list': loose({ limit: z.number().int().positive().optional() }),
  'session.events.stats': loose({}),
  // hermes' create params (cols, source, cwd, model, ...) are accepted; title and
  // close_on_disconnect mean something here, the rest is ignored.
  'session.create': loose({ title: z.string().max(512).nullable().optional(), close_on_disconnect: z.boolean().optional() }),
  'session.resume': loose({ session_id: sessionRef, session_key: sessionKey, close_on_disconnect: z.boolean().optional() }),
  'session.activate': loose({ session_id: sessionRef, session_key: sessionKey, close_on_disconnect: z.boolean().optional() }),
  'session.attach': loose({ session_id: sessionRef, session_key: sessionKey }),
  'session.detach': loose({ session_id: sessionRef }),
  'session.reset': loose({ session_id: sessionRef, idempotency_key: idempotencyKey }),
  'session.close': loose({ session_id: sessionRef }),
  'session.events.since': loose({ session_id: sessionRef, session_key: sessionKey, last_seen: z.number().int().nonnegative().nullable().optional() }),
  'session.timeline': loose({ session_id: sessionRef }),
  'delegation.spawn': loose({
    session_id: sessionRef,
    tasks: requiredList('tasks'),
    timeout_ms: z.number().int().positive().optional(),
    idempotency_key: idempotencyKey,
  }),
  'delegation.result': loose({ session_id: sessionRef, delegation_id: requiredId('delegation_id') }),
  'delegation.status': loose({ session_id: sessionRef }),
  'delegation.pause': loose({ session_id: sessionRef, paused: z.boolean().optional() }),
  'subagent.list': loose({ session_id: sessionRef, include_finished: z.boolean().optional() }),
  'subagent.tail': loose({ session_id: sessionRef, subagent_id: requiredId('subagent_id'), since: z.number().int().nonnegative().optional() }),
  'subagent.steer': loose({ session_id: sessionRef, subagent_id: requiredId('subagent_id'), text: steerText, idempotency_key: idempotencyKey }),
  'subagent.interrupt': loose({ session_id: sessionRef, subagent_id: requiredId('subagent_id'), idempotency_key: idempotencyKey }),
  'subagent.revive': loose({
    session_id: sessionRef,
    subagent_id: requiredId('subagent_id'),
    text: z.string({ error: 'text must be a string' }).max(MAX_STEER_BYTES, { error: 'text too long' }).optional(),
    requeue_missed: z.boolean({ error: 'requeue_missed must be a boolean' }).optional(),
    idempotency_key: idempotencyKey,
  }),
  'prompt.submit': loose({ session_id: sessionRef, text: promptText }),
  'session.steer': loose({ session_id: sessionRef, text: steerText }),
  'session.interrupt': loose({ session_id: sessionRef }),
  'spawn_tree.save': loose({
    session_id: z.string().max(256).nullable().optional(),
    subagents: requiredObjects('subagents list'),
    started_at: unixSeconds.max(1e11).nullable().optional(),
    finished_at: unixSeconds.max(1e11).nullable().optional(),
    label: z.string().max(512).nullable().optional(),
  }),
  'spawn_tree.list': loose({
    session_id: z.string().max(256).nullable().optional(),
    session_key: sessionKey,
    cross_session: z.boolean().optional(),
    limit: z.number().int().min(1).max(500).nullable().optional(),
  }),
  'spawn_tree.load': loose({ path: requiredId('path'), session_id: sessionRef, session_key: sessionKey }),
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
    recovered: recoveredSchema,
    /** Whether this server keeps its state across restarts (a state directory). */
    durable: z.boolean(),
  }),
  ping: z.strictObject({ pong: z.literal(true) }),
  'gateway.ping': z.strictObject({ pong: z.literal(true), ok: z.literal(true) }),
  'client.capabilities': z.strictObject({ server_requests: z.array(z.never()) }),
  /** hermes' build probe: what this server enforces, and (ours) the methods it answers. */
  'gateway.capabilities': z.strictObject({
    /** One parent turn at a time per session (prompt.submit answers 4013 while one runs). */
    per_session_exclusive_submit: z.literal(true),
    /** subrun serves no `subagent.snapshot`. */
    worker_snapshot_v1: z.literal(false),
    methods: z.array(z.string()),
  }),
  /** The caller's sessions (those its transport is attached to; every live one with --single-user), newest first. */
  'session.list': z.strictObject({
    sessions: z.array(
      z.strictObject({
        id,
        title: z.string(),
        preview: z.string(),
        started_at: unixSeconds,
        message_count: z.number().int().nonnegative(),
        source: z.string(),
      }),
    ),
  }),
  /** The replay rings of the caller's sessions (the ones session.list lists): their counts and bounds. */
  'session.events.stats': z.strictObject({
    sessions: z.number().int().nonnegative(),
    events: z.number().int().nonnegative(),
    bytes: z.number().int().nonnegative(),
    max_per_session: z.number().int().nonnegative(),
    max_bytes_per_session: z.number().int().nonnegative(),
    /** subrun has no process-wide bound: the bound of the rings counted (sessions × max_bytes_per_session). */
    max_bytes_process: z.number().int().nonnegative(),
  }),
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
  'session.timeline': timelineSchema,
  'delegation.spawn': z.strictObject({
    status: z.literal('dispatched'),
    delegation_id: id,
    subagent_ids: z.array(id),
    count: z.number().int().positive(),
    idempotent_replay: replayFlag,
  }),
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
    z.strictObject({
      status: z.literal('queued'),
      subagent_id: id,
      text: z.string(),
      steer_id: id,
      uncertain: z.literal(true).optional(),
      idempotent_replay: replayFlag,
    }),
    z.strictObject({ status: z.literal('rejected'), subagent_id: id, text: z.string(), reason: steerRefusalSchema, idempotent_replay: replayFlag }),
  ]),
  'subagent.interrupt': interruptResultSchema.extend({ idempotent_replay: replayFlag }),
  'subagent.revive': z.strictObject({
    subagent_id: id,
    revived_from: id,
    delegation_id: id,
    requeued: z.array(z.strictObject({ steer_id: id, requeued_from: id })),
    idempotent_replay: replayFlag,
  }),
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

// ---- the methods' types, inferred from the schemas above (for hosts: subrun/protocol) ----

/** A method's result as the server sends it. */
export type ResultOf<M extends MethodName> = z.output<(typeof resultSchemas)[M]>;

/** Whether `value` is a result `method` answers, by the method's result schema (a type guard). */
export function isResultOf<M extends MethodName>(method: M, value: unknown): value is ResultOf<M> {
  return resultSchemas[method].safeParse(value).success;
}

/** A method's result, checked by its result schema; throws the schema's ZodError otherwise. */
export function parseResult<M extends MethodName>(method: M, value: unknown): ResultOf<M> {
  if (isResultOf(method, value)) return value;
  resultSchemas[method].parse(value); // throws, naming the field
  throw new TypeError(`not a ${method} result`);
}
