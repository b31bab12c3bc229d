// Schemas of the objects subrun puts on the wire (protocol sections 4 and 5): snapshots, completion
// entries, tail/steer/interrupt results. The in-process API returns the same objects.
import { z } from 'zod';

/** The wire's version, in gateway.ready and server.info; bumped on any incompatible change. */
export const PROTOCOL_VERSION = 1;

export const id = z.string().min(1);
export const unixSeconds = z.number().nonnegative();

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
  /** A revived child (subagent.revive): the lost child it continues. */
  revived_from: id.optional(),
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
  // With missed_steer, always: each missed steer; maybe_delivered only where a runner the runtime
  // no longer hears from (a lost worker, a stopped server, an abandoned runner) had taken it.
  // requeued_from: a steer a revival queued again, and the id it had on the lost child.
  missed_steer_detail: z.array(z.strictObject({ steer_id: id, text: z.string(), maybe_delivered: z.boolean(), requeued_from: id.optional() })).optional(),
  /** Set on a child the server settled after a restart or a worker loss: whether subagent.revive can continue it. */
  revivable: z.boolean().optional(),
  /** A revived child's entry: the lost child it continued. */
  revived_from: id.optional(),
});

/** What the server's last start found and settled (docs/durability.md): zeros without a store. */
export const recoveredSchema = z.strictObject({
  sessions: z.number().int().nonnegative(),
  children_settled: z.number().int().nonnegative(),
  steers_missed: z.number().int().nonnegative(),
});

export const tailResultSchema = z.strictObject({
  subagent_id: id,
  available: z.boolean(),
  text: z.string(),
  truncated: z.boolean(),
  offset: z.number().int().nonnegative(),
});

/**
 * Why a steer was `rejected`, the same word on every surface (in-process, JSON-RPC, HTTP, ACP,
 * MCP): `not_found`, a child the caller cannot see (unknown, no longer retained, another
 * session's or generation's); `finished`, the caller's child that finished or is finishing;
 * `vetoed`, refused by its runner's `onSteer`. Empty or oversized text, a full queue and a store
 * that cannot write are errors on the wire (4002, 4003, 4005, -32002), not `rejected`.
 */
export const steerRefusalSchema = z.enum(['not_found', 'finished', 'vetoed']);
export type SteerRefusal = z.output<typeof steerRefusalSchema>;

export const steerResultSchema = z.union([
  // uncertain: the steer's mailbox publish outcome is unknown (an outage); it is still accounted,
  // delivered or missed, like any queued steer (docs/scale-out.md, "Exact accounting").
  z.strictObject({ status: z.literal('queued'), subagent_id: id, text: z.string(), steer_id: id, uncertain: z.literal(true).optional() }),
  z.strictObject({ status: z.literal('rejected'), subagent_id: id, text: z.string(), reason: steerRefusalSchema }),
]);

export const interruptResultSchema = z.strictObject({
  found: z.boolean(),
  subagent_id: id,
  interrupted: z.array(id),
});

/** A steer's fate as the timeline tells it (observability: the dashboard's timeline). */
export const steerFateSchema = z.enum(['queued', 'delivered', 'missed', 'rejected']);

/**
 * One session's timeline (session.timeline, GET .../timeline): its live and retained children in
 * tree order, each steer once with its current fate, each child an interrupt reached. Unix seconds.
 */
export const timelineSchema = z.strictObject({
  session_id: id,
  now: unixSeconds,
  children: z.array(
    z.strictObject({
      subagent_id: id,
      parent_id: id.nullable(),
      depth: z.number().int().nonnegative(),
      goal: z.string(),
      status: childStatusSchema,
      created_at: unixSeconds,
      started_at: unixSeconds.nullable(),
      finished_at: unixSeconds.nullable(),
    }),
  ),
  // `at`: when it settled (null while queued); a rejected steer has no steer_id and no queued_at.
  steers: z.array(
    z.strictObject({ steer_id: id.nullable(), subagent_id: id, fate: steerFateSchema, queued_at: unixSeconds.nullable(), at: unixSeconds.nullable() }),
  ),
  interrupts: z.array(z.strictObject({ subagent_id: id, target_id: id, at: unixSeconds })),
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
export type Timeline = Immutable<z.output<typeof timelineSchema>>;
export type TimelineFate = z.output<typeof steerFateSchema>;
