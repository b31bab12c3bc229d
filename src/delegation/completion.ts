// The one pure function that builds a completion entry: the status matrix and the missed_steer
// notes of the protocol (section 5). Nothing else in the code assembles an entry.
import type { CompletionEntry, FinalStatus, MissedSteer, Tokens, ToolTraceItem } from '../types.ts';

export interface EntryInput {
  readonly task_index: number;
  readonly subagent_id: string;
  readonly status: FinalStatus;
  readonly exit_reason?: string;
  readonly summary?: string;
  readonly error?: string;
  readonly api_calls?: number;
  readonly duration_seconds: number;
  readonly model: string;
  readonly tokens?: Tokens;
  readonly tool_trace?: readonly ToolTraceItem[];
  /** Undelivered steer texts in acceptance order. */
  readonly missed?: readonly string[];
  /** The same steers with their ids (and whether a lost worker may have delivered them). */
  readonly missed_detail?: readonly MissedSteer[];
  /** Set for a child the runtime could not run to its end (a restart, a lost worker). */
  readonly revivable?: boolean;
  /** A revived child: the lost child it continued. */
  readonly revived_from?: string;
}

/** The default `error` text per non-completed status, when the runner gave none. */
const DEFAULT_ERROR: Record<Exclude<FinalStatus, 'completed'>, string> = {
  interrupted: 'interrupted',
  failed: 'the subagent failed',
  error: 'the runner crashed',
  timeout: 'timed out',
};

export function buildCompletionEntry(input: EntryInput): CompletionEntry {
  const missed = input.missed && input.missed.length > 0 ? input.missed.join('\n') : undefined;
  let summary = input.summary ?? '';
  let error = input.status === 'completed' ? undefined : (input.error ?? DEFAULT_ERROR[input.status]);
  if (missed !== undefined) {
    if (input.status === 'completed') {
      const note = `[steer did not land — the subagent finished before it could be delivered: ${missed}]`;
      summary = summary === '' ? note : `${summary}\n\n${note}`;
    } else {
      const note = `[steer did not land before the subagent stopped: ${missed}]`;
      error = error ? `${error} ${note}` : note;
    }
  }
  const tokens = { input: input.tokens?.input ?? 0, output: input.tokens?.output ?? 0 };
  const tool_trace = input.tool_trace === undefined || input.tool_trace.length === 0 ? [] : input.tool_trace.map((t) => ({ tool: t.tool, status: t.status }));
  if (error === undefined && missed === undefined && input.revivable === undefined && input.revived_from === undefined) {
    // The common entry (completed, nothing missed) as one literal with the same keys in the same
    // order: the conditional spreads below copy an object each (bench: delegation.per_child).
    return {
      task_index: input.task_index,
      subagent_id: input.subagent_id,
      status: input.status,
      exit_reason: input.exit_reason ?? input.status,
      summary,
      api_calls: input.api_calls ?? 0,
      duration_seconds: Math.max(0, input.duration_seconds),
      model: input.model,
      tokens,
      tool_trace,
    };
  }
  return {
    task_index: input.task_index,
    subagent_id: input.subagent_id,
    status: input.status,
    exit_reason: input.exit_reason ?? input.status,
    summary,
    ...(error !== undefined ? { error } : {}),
    api_calls: input.api_calls ?? 0,
    duration_seconds: Math.max(0, input.duration_seconds),
    model: input.model,
    tokens,
    tool_trace,
    ...(missed !== undefined ? { missed_steer: missed, ...(input.missed_detail ? { missed_steer_detail: input.missed_detail } : {}) } : {}),
    ...(input.revivable !== undefined ? { revivable: input.revivable } : {}),
    ...(input.revived_from !== undefined ? { revived_from: input.revived_from } : {}),
  };
}
