// The completion entry a wire `subagent.complete` carries, in the entry's own shape (the one
// delegation.result and the in-process bus use): the inverse of the table in
// src/rpc/wire-events.ts. Tests that compare the two views, or read an entry's fields, use it.
export interface WireEntry {
  task_index: number;
  subagent_id: string;
  status: string;
  exit_reason: string;
  summary: string;
  error?: string;
  api_calls: number;
  duration_seconds: number;
  model: string;
  tokens: { input: number; output: number };
  tool_trace: unknown[];
  missed_steer?: string;
  missed_steer_detail?: unknown[];
}

export function wireEntry(payload: Record<string, unknown>): WireEntry {
  if ('entry' in payload) throw new Error('a wire subagent.complete carries no nested entry');
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- read field by field, typed by WireEntry
  const p = payload as Record<string, any>;
  const entry: WireEntry = {
    task_index: p.task_index,
    subagent_id: p.subagent_id,
    status: p.status,
    exit_reason: p.exit_reason,
    summary: p.summary,
    api_calls: p.api_calls,
    duration_seconds: p.duration_seconds,
    model: p.model,
    tokens: { input: p.input_tokens, output: p.output_tokens },
    tool_trace: p.tool_trace,
  };
  if (payload.error !== undefined) entry.error = p.error;
  if (payload.missed_steer !== undefined) entry.missed_steer = p.missed_steer;
  if (payload.missed_steer_detail !== undefined) entry.missed_steer_detail = p.missed_steer_detail;
  return entry;
}
