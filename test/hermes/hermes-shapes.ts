// hermes-agent's wire, as its published contract types it (RpcMethods, GatewayEventMap), written
// here from the facts as zod schemas: every field hermes requires, with hermes' type; every field
// hermes knows, when present, with hermes' type; fields hermes does not know are allowed (a hermes
// client ignores them). Plus what a hermes host reads on this path (a completion's status, summary
// and duration; a tool call's preview), which its types leave optional.
import { z } from 'zod';
import type { Frame } from '../helpers/hermes-host.ts';

const int = z.number().int();
const opt = <T extends z.ZodType>(t: T) => t.nullable().optional();
const record = z.record(z.string(), z.unknown());

const subagentStatus = z.enum(['queued', 'running', 'completed', 'failed', 'error', 'timeout', 'interrupted']);

const subagentEvent = z.looseObject({
  goal: z.string(),
  task_count: int,
  task_index: int,
  subagent_id: opt(z.string()),
  parent_id: opt(z.string()),
  child_session_id: opt(z.string()),
  delegation_id: opt(z.string()),
  depth: opt(int),
  model: opt(z.string()),
  tool_count: opt(int),
  toolsets: opt(z.array(z.string())),
  input_tokens: opt(int),
  output_tokens: opt(int),
  reasoning_tokens: opt(int),
  api_calls: opt(int),
  tool_name: opt(z.string()),
  text: opt(z.string()),
  status: opt(subagentStatus),
  summary: opt(z.string()),
  duration_seconds: opt(z.number()),
  tool_preview: opt(z.string()),
});

const usage = z.looseObject({ input: int, output: int, total: int, calls: int });

/** Event payloads by type; a type hermes does not map is ignored by its clients (allowed). */
export const HERMES_EVENTS: Record<string, z.ZodType> = {
  'gateway.ready': z.looseObject({
    skin: z.looseObject({}),
    change_events: z.boolean(),
    replay_epoch: z.string(),
    heartbeat: opt(z.boolean()),
  }),
  'message.start': z.strictObject({}),
  'message.delta': z.looseObject({ text: z.string(), rendered: opt(z.string()), verbose: opt(z.boolean()) }),
  'message.complete': z.looseObject({
    text: z.string().optional(),
    usage: opt(usage),
    status: opt(z.enum(['complete', 'error', 'interrupted'])),
    error: opt(z.string()),
    reasoning: opt(z.string()),
    partial: opt(z.boolean()),
  }),
  'tool.start': z.looseObject({
    tool_id: z.string(),
    name: z.string(),
    context: opt(z.string()),
    args: opt(record),
    args_text: opt(z.string()),
    preview: opt(z.string()),
  }),
  'tool.complete': z.looseObject({
    tool_id: z.string(),
    name: z.string(),
    args: opt(record),
    duration_s: opt(z.number()),
    summary: opt(z.string()),
    result_text: opt(z.string()),
  }),
  'subagent.spawn_requested': subagentEvent,
  'subagent.start': subagentEvent,
  'subagent.thinking': subagentEvent,
  'subagent.progress': subagentEvent,
  // What a host renders: the tool's name and its preview.
  'subagent.tool': subagentEvent.extend({ tool_name: z.string(), tool_preview: z.string() }),
  // What a host shows for a finished child: its status, summary and duration, flat.
  'subagent.complete': subagentEvent
    .extend({ status: subagentStatus, summary: z.string(), duration_seconds: z.number() })
    .refine((p) => !('entry' in p), 'no nested entry'),
  error: z.looseObject({ message: z.string() }),
};

/** hermes' `GatewayEvent` envelope: `session_id` a string or absent (never null), `seq` an integer. */
const envelope = z.looseObject({ type: z.string().min(1), session_id: z.string().optional(), seq: int.optional(), payload: record.optional() });

const transcriptMessage = z.looseObject({ role: z.string(), text: opt(z.string()), timestamp: opt(z.number()), name: opt(z.string()) });
const liveInfo = z.looseObject({
  model: z.string().optional(),
  provider: z.string().optional(),
  cwd: z.string().optional(),
  running: z.boolean().optional(),
  title: z.string().optional(),
  stored_session_id: z.string().optional(),
  tools: z.record(z.string(), z.array(z.string())).optional(),
  version: z.string().optional(),
});
const openRequest = z.looseObject({ id: z.string(), method: z.string(), params: record });
const sessionResult = z.looseObject({
  session_id: z.string(),
  message_count: int,
  messages: z.array(transcriptMessage),
  info: liveInfo,
  stored_session_id: opt(z.string()),
  running: opt(z.boolean()),
  open_requests: opt(z.array(openRequest)),
});
const snapshot = z.looseObject({
  subagent_id: z.string(),
  parent_id: opt(z.string()),
  depth: opt(int),
  goal: opt(z.string()),
  delegation_id: opt(z.string()),
  model: opt(z.string()),
  started_at: opt(z.number()),
  status: opt(subagentStatus),
  tool_count: opt(int),
  last_tool: opt(z.string()),
  accepting_steer: opt(z.boolean()),
});
const spawnTreeEntry = z.looseObject({
  path: z.string(),
  session_id: opt(z.string()),
  started_at: opt(z.number()),
  finished_at: opt(z.number()),
  label: z.string().optional(),
  count: int.optional(),
});

/** Results by method (RpcMethods); the methods of hermes' contract a host calls on this path. */
export const HERMES_RESULTS: Record<string, z.ZodType> = {
  ping: z.looseObject({ pong: z.boolean() }),
  'client.capabilities': z.looseObject({ server_requests: z.array(z.string()) }),
  // The three a hermes host calls at boot (contracts/liveness.py, contracts/sessions.py).
  'gateway.capabilities': z.looseObject({ per_session_exclusive_submit: z.boolean(), worker_snapshot_v1: z.boolean().optional() }),
  'session.list': z.looseObject({
    sessions: z.array(
      z.looseObject({
        id: z.string(),
        resolved_id: opt(z.string()),
        title: z.string().optional(),
        preview: z.string().optional(),
        started_at: z.number().optional(),
        message_count: int.optional(),
        source: z.string().optional(),
      }),
    ),
  }),
  'session.events.stats': z.looseObject({
    sessions: int,
    events: int,
    bytes: int,
    max_per_session: int,
    max_bytes_per_session: int,
    max_bytes_process: int,
  }),
  'session.create': z.looseObject({
    session_id: z.string(),
    stored_session_id: z.string(),
    message_count: int,
    messages: z.array(transcriptMessage),
    info: liveInfo,
  }),
  'session.resume': sessionResult,
  'session.activate': sessionResult,
  'session.events.since': z.looseObject({
    events: z.array(record),
    latest_seq: int,
    truncated: z.boolean(),
    count: int,
    epoch: z.string(),
    open_requests: z.array(openRequest),
  }),
  'session.interrupt': z.looseObject({ status: z.enum(['interrupted', 'not_interrupted']), interrupted: opt(z.boolean()) }),
  'session.steer': z.looseObject({ status: z.enum(['queued', 'redirected', 'rejected']), text: z.string() }),
  'session.close': z.looseObject({ closed: z.boolean() }),
  'prompt.submit': z.looseObject({ status: opt(z.enum(['streaming', 'queued', 'steered', 'redirected'])) }),
  'delegation.status': z.looseObject({
    active: z.array(snapshot),
    paused: z.boolean(),
    max_spawn_depth: int,
    max_concurrent_children: int,
  }),
  'delegation.pause': z.looseObject({ paused: z.boolean() }),
  'subagent.list': z.looseObject({ subagents: z.array(snapshot).optional(), delegations: z.array(record).optional() }),
  'subagent.tail': z.looseObject({
    subagent_id: z.string(),
    available: z.boolean().optional(),
    text: z.string().optional(),
    truncated: z.boolean().optional(),
  }),
  'subagent.steer': z.looseObject({ status: z.enum(['queued', 'rejected']), subagent_id: z.string(), text: z.string() }),
  'subagent.interrupt': z.looseObject({ found: z.boolean(), subagent_id: z.string() }),
  'spawn_tree.save': z.looseObject({ path: z.string(), session_id: z.string() }),
  'spawn_tree.list': z.looseObject({ entries: z.array(spawnTreeEntry) }),
  'spawn_tree.load': z.looseObject({
    session_id: opt(z.string()),
    started_at: opt(z.number()),
    finished_at: opt(z.number()),
    label: opt(z.string()),
    subagents: z.array(record).optional(),
  }),
};

const issues = (e: z.ZodError) => e.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');

/**
 * Every problem a hermes client would have with one inbound frame: a missing required field, a
 * wrong type, a missing method (-32601 on a method of hermes' contract). `answers` is the method
 * of the request a response answers.
 */
export function hermesProblems(frame: Frame, answers: string | undefined): string[] {
  const out: string[] = [];
  if (frame.jsonrpc !== '2.0') out.push(`jsonrpc is ${String(frame.jsonrpc)}`);
  if (frame.method === 'event') {
    if ('id' in frame) out.push('an event carries an id');
    const env = envelope.safeParse(frame.params);
    if (!env.success) return [...out, `event envelope: ${issues(env.error)}`];
    const ev = env.data;
    if (ev.session_id === '') out.push(`${ev.type}: empty session_id`);
    const schema = HERMES_EVENTS[ev.type];
    if (schema) {
      const r = schema.safeParse(ev.payload ?? {});
      if (!r.success) out.push(`${ev.type} seq ${String(ev.seq)}: ${issues(r.error)}`);
    }
    return out;
  }
  if (answers === undefined) return out;
  if (frame.error) {
    if (typeof frame.error.code !== 'number' || typeof frame.error.message !== 'string') out.push(`${answers}: malformed error ${JSON.stringify(frame.error)}`);
    if (frame.error.code === -32601) out.push(`${answers}: method not found`);
    return out;
  }
  if (!('result' in frame)) return [...out, `${answers}: neither result nor error`];
  const schema = HERMES_RESULTS[answers];
  if (schema) {
    const r = schema.safeParse(frame.result);
    if (!r.success) out.push(`${answers} result: ${issues(r.error)}`);
  }
  if (answers === 'session.events.since') {
    for (const e of ((frame.result as { events?: unknown[] }).events ?? []) as Frame[]) {
      // A replayed item is the event itself (`{type, session_id, seq, payload}`), never a JSON-RPC envelope.
      if ('jsonrpc' in e || 'method' in e) out.push('session.events.since: an envelope-shaped replay element');
      out.push(...hermesProblems({ jsonrpc: '2.0', method: 'event', params: e }, undefined).map((p) => `replayed ${p}`));
    }
  }
  return out;
}
