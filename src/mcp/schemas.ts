// The six tools' input and output schemas (zod, which the SDK turns into the JSON Schemas of
// tools/list). Inputs are strict objects, so an unknown or mistyped argument is the SDK's
// `isError` naming the field, before anything is called. Each output schema accepts exactly the
// tool's success shape or subrun's error form `{error: {code, message, data?}}`: the SDK client
// checks `structuredContent` of error results too (typescript-sdk#1943), so an error the host
// must read has to fit. zod cannot say "these fields, or that one" on one object, so the JSON
// Schema gets a root `anyOf` from `.meta()`: each branch lists its required fields and excludes
// the other's, and the zod side (what the server checks) keeps every field optional.
import { z } from 'zod';
import {
  completionEntrySchema,
  id,
  interruptResultSchema,
  snapshotSchema,
  steerRefusalSchema,
  tailResultSchema,
  type Immutable,
} from '../contract/entities.ts';
import { withProps } from '../shapes.ts';

/** Above the 60 s at which hosts stop listening to a silent call: the default stays under it. */
export const DEFAULT_WAIT_SECONDS = 45;
export const MAX_WAIT_SECONDS = 600;

export const taskSchema = z.strictObject({
  goal: z.string().describe('what the child should do'),
  context: z.string().optional().describe('what the child needs to know; it sees nothing else of the conversation'),
  agent: z.record(z.string(), z.unknown()).optional().describe("the runner spec of delegation.spawn (hosts leave it out: the server's default runner)"),
});

export const inputSchemas = {
  delegate: z.strictObject({
    tasks: z.array(taskSchema).describe('one child per task, run concurrently'),
    timeout_ms: z.number().int().positive().optional().describe("each child's deadline"),
    wait: z.boolean().default(false).describe('answer once every child completed, or after wait_seconds with what there is'),
    wait_seconds: z.number().int().min(1).max(MAX_WAIT_SECONDS).default(DEFAULT_WAIT_SECONDS).describe('how long a wait lasts (default 45)'),
  }),
  delegation_result: z.strictObject({
    delegation_id: z.string(),
    wait_seconds: z.number().int().min(0).max(MAX_WAIT_SECONDS).default(0).describe('wait up to this long for the delegation to complete (default 0)'),
  }),
  list_subagents: z.strictObject({ include_finished: z.boolean().optional().describe('also the finished children still retained') }),
  tail_subagent: z.strictObject({
    subagent_id: z.string(),
    since: z.number().int().nonnegative().optional().describe('an offset from an earlier answer: only what came after it'),
  }),
  steer_subagent: z.strictObject({ subagent_id: z.string(), text: z.string().describe('guidance the child takes at its next safe point') }),
  interrupt_subagent: z.strictObject({ subagent_id: z.string() }),
} as const;

export type ToolName = keyof typeof inputSchemas;
export type ToolInput<T extends ToolName> = z.output<(typeof inputSchemas)[T]>;

/** The input schemas as a mapped type, so that the one for a generic T parses to ToolInput<T>. */
export const toolInputs: { readonly [T in ToolName]: z.ZodType<ToolInput<T>> } = inputSchemas;

export const toolErrorSchema = z.strictObject({ code: z.number().int(), message: z.string(), data: z.unknown().optional() });
export type ToolError = z.output<typeof toolErrorSchema>;

const entries = z.array(completionEntrySchema);

/** The success shapes, fields required (what a tool answers when subrun did not refuse). */
export const successSchemas = {
  delegate: z.strictObject({ delegation_id: id, subagent_ids: z.array(id), count: z.number().int().positive(), done: z.boolean(), results: entries }),
  delegation_result: z.strictObject({ delegation_id: id, done: z.boolean(), results: entries }),
  list_subagents: z.strictObject({ subagents: z.array(snapshotSchema) }),
  tail_subagent: tailResultSchema,
  steer_subagent: z.union([
    z.strictObject({ status: z.literal('queued'), subagent_id: id, text: z.string(), steer_id: id }),
    z.strictObject({ status: z.literal('rejected'), subagent_id: id, text: z.string(), reason: steerRefusalSchema }),
  ]),
  interrupt_subagent: interruptResultSchema,
} as const;

/** Read-only, as the runtime hands out its entries and snapshots. */
export type ToolSuccess<T extends ToolName> = Immutable<z.output<(typeof successSchemas)[T]>>;

/** One branch of the root `anyOf`: its required fields, a constant they pin, the fields it excludes. */
interface Branch {
  readonly required: readonly string[];
  readonly consts?: Readonly<Record<string, string>>;
  readonly excludes: readonly string[];
}

function branchSchema(b: Branch): Record<string, unknown> {
  const pinned = Object.entries(b.consts ?? {});
  return {
    required: b.required,
    ...(pinned.length > 0 ? { properties: Object.fromEntries(pinned.map(([k, v]) => [k, { const: v }])) } : {}),
    not: { anyOf: b.excludes.map((k) => ({ required: [k] })) },
  };
}

/** The output schema: the success fields optional beside `error`, and the JSON Schema's `anyOf` of the branches. */
function orError(shape: z.core.$ZodLooseShape, branches: readonly Branch[]) {
  const optional = Object.fromEntries(Object.entries(shape).map(([k, v]) => [k, z.optional(v)]));
  return z.strictObject(withProps(optional, { error: toolErrorSchema.optional() })).meta({
    anyOf: [...branches.map(branchSchema), { required: ['error'], maxProperties: 1 }],
  });
}

const only = (shape: Record<string, unknown>): Branch => ({ required: Object.keys(shape), excludes: ['error'] });

const steerShape = {
  status: z.enum(['queued', 'rejected']),
  subagent_id: id,
  text: z.string(),
  steer_id: id,
  reason: steerRefusalSchema,
};

export const outputSchemas = {
  delegate: orError(successSchemas.delegate.shape, [only(successSchemas.delegate.shape)]),
  delegation_result: orError(successSchemas.delegation_result.shape, [only(successSchemas.delegation_result.shape)]),
  list_subagents: orError(successSchemas.list_subagents.shape, [only(successSchemas.list_subagents.shape)]),
  tail_subagent: orError(tailResultSchema.shape, [only(tailResultSchema.shape)]),
  steer_subagent: orError(steerShape, [
    { required: ['status', 'subagent_id', 'text', 'steer_id'], consts: { status: 'queued' }, excludes: ['error', 'reason'] },
    { required: ['status', 'subagent_id', 'text', 'reason'], consts: { status: 'rejected' }, excludes: ['error', 'steer_id'] },
  ]),
  interrupt_subagent: orError(interruptResultSchema.shape, [only(interruptResultSchema.shape)]),
} as const;
