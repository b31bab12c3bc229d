// The wire's view of the runtime's events. The in-process bus keeps its own shapes (a completion
// entry under `entry`, a tool call's `preview`); hosts get hermes' shapes: the entry flat beside
// the child's identity with hermes' names, and the tool preview as `tool_preview` and `text`.
// Every other event goes out as the bus published it.
//
//   bus `subagent.complete` entry field   wire `subagent.complete` field
//   entry.status, summary, exit_reason    status, summary, exit_reason
//   entry.error?, missed_steer?           error?, missed_steer?
//   entry.missed_steer_detail?            missed_steer_detail?
//   entry.revivable?, revived_from?       revivable?, revived_from?
//   entry.api_calls, duration_seconds     api_calls, duration_seconds
//   entry.tokens.input / .output          input_tokens / output_tokens
//   entry.tool_trace                      tool_trace
//   entry.task_index, subagent_id, model  (already in the identity: task_index, subagent_id, model)
import type { CompletionEntry } from '../types.ts';
import { withProps } from '../shapes.ts';

type Payload = Record<string, unknown>;

/** The payload a host receives for a bus event of `type` (the bus payload itself when unchanged). */
export function wirePayload(type: string, payload: Payload): Payload {
  if (type === 'subagent.complete') return flatCompletion(payload);
  if (type === 'subagent.tool') {
    const { preview, ...rest } = payload;
    return withProps(rest, { tool_preview: preview, text: preview });
  }
  return payload;
}

/** The completion entry a wire `subagent.complete` carries, back in the entry's own shape. */
export function entryFromWire(payload: Payload): CompletionEntry {
  const p = payload as Payload & CompletionEntry & { input_tokens: number; output_tokens: number };
  return {
    task_index: p.task_index,
    subagent_id: p.subagent_id,
    status: p.status,
    exit_reason: p.exit_reason,
    summary: p.summary,
    ...(p.error !== undefined ? { error: p.error } : {}),
    api_calls: p.api_calls,
    duration_seconds: p.duration_seconds,
    model: p.model,
    tokens: { input: p.input_tokens, output: p.output_tokens },
    tool_trace: p.tool_trace,
    ...(p.missed_steer !== undefined ? { missed_steer: p.missed_steer } : {}),
    ...(p.missed_steer_detail !== undefined ? { missed_steer_detail: p.missed_steer_detail } : {}),
    ...(p.revivable !== undefined ? { revivable: p.revivable } : {}),
    ...(p.revived_from !== undefined ? { revived_from: p.revived_from } : {}),
  };
}

function flatCompletion(payload: Payload): Payload {
  const { entry, ...identity } = payload as Payload & { entry: CompletionEntry };
  const out: Payload = withProps(identity, {
    status: entry.status,
    exit_reason: entry.exit_reason,
    summary: entry.summary,
    api_calls: entry.api_calls,
    duration_seconds: entry.duration_seconds,
    input_tokens: entry.tokens.input,
    output_tokens: entry.tokens.output,
    tool_trace: entry.tool_trace,
  });
  if (entry.error !== undefined) out.error = entry.error;
  if (entry.missed_steer !== undefined) out.missed_steer = entry.missed_steer;
  if (entry.missed_steer_detail !== undefined) out.missed_steer_detail = entry.missed_steer_detail;
  if (entry.revivable !== undefined) out.revivable = entry.revivable;
  if (entry.revived_from !== undefined) out.revived_from = entry.revived_from;
  return out;
}
