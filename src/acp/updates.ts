// The translation of subrun's objects into ACP `session/update` payloads, as pure builders. The
// SDK does not check what an agent sends, and its client silently drops what its schema does not
// know (a bare-string state, `cancel: true`, an error without a code), so every shape here is the
// exact object form of @agentclientprotocol/sdk 2.4.0's /unstable schema.
import type { ContentBlock, SessionUpdate, StopReason, ToolCallStatus } from '@agentclientprotocol/sdk/unstable';
import type { CompletionEntry } from '../types.ts';

/** JSON-RPC's internal error: the code a failed child's idle state carries (the schema needs one). */
const CHILD_FAILED_CODE = -32603;

export const textBlock = (text: string): ContentBlock => ({ type: 'text', text });

const toolText = (text: string) => [{ type: 'content' as const, content: textBlock(text) }];

/** A child's identity, from any of its events. */
export interface ChildInfo {
  readonly subagent_id: string;
  readonly parent_id: string | null;
  readonly goal: string;
  readonly depth: number;
}

// ---- the parent's own turn ----

export const messageChunk = (text: string): SessionUpdate => ({ sessionUpdate: 'agent_message_chunk', content: textBlock(text) });
export const thoughtChunk = (text: string): SessionUpdate => ({ sessionUpdate: 'agent_thought_chunk', content: textBlock(text) });
export const userChunk = (text: string): SessionUpdate => ({ sessionUpdate: 'user_message_chunk', content: textBlock(text) });

export function toolStart(toolCallId: string, name: string, preview: string): SessionUpdate {
  return { sessionUpdate: 'tool_call', toolCallId, title: name, kind: kindOf(name), status: 'in_progress', rawInput: { preview } };
}

export function toolDone(toolCallId: string, ok: boolean, preview: string): SessionUpdate {
  return { sessionUpdate: 'tool_call_update', toolCallId, status: ok ? 'completed' : 'failed', content: toolText(preview), rawOutput: { preview } };
}

/** The ACP tool kind of subrun's built-in tools (an IDE picks an icon by it). */
function kindOf(name: string): 'read' | 'search' | 'think' | 'other' {
  if (name === 'read_file' || name === 'list_dir') return 'read';
  if (name === 'search_text') return 'search';
  if (name === 'delegate_task') return 'think';
  return 'other';
}

/** The prompt's stop reason for the turn's `message.complete`; a failed turn is an error instead. */
export function turnStopReason(payload: Record<string, unknown>): StopReason | { error: string } {
  switch (payload.status) {
    case 'complete':
      return payload.exit_reason === 'max_iterations' ? 'max_turn_requests' : 'end_turn';
    case 'interrupted':
      return 'cancelled';
    default:
      return { error: typeof payload.error === 'string' && payload.error !== '' ? payload.error : `the parent agent's turn ended ${String(payload.status)}` };
  }
}

// ---- children, for a client that advertised `subagents` ----

/** The first update naming the child: sent on its immediate parent's session, before its traffic. */
export function announce(c: ChildInfo): SessionUpdate {
  return {
    sessionUpdate: 'subagent_update',
    sessionId: c.subagent_id,
    title: c.goal,
    description: c.parent_id === null ? 'a subagent of this session' : `a subagent of ${c.parent_id}`,
    capabilities: { cancel: {} },
  };
}

export function running(subagent_id: string): SessionUpdate {
  return { sessionUpdate: 'subagent_update', sessionId: subagent_id, state: { state: 'running' } };
}

/** The child's terminal state, the whole completion entry (missed_steer included) under _meta.subrun. */
export function terminal(entry: CompletionEntry): SessionUpdate {
  return { sessionUpdate: 'subagent_update', sessionId: entry.subagent_id, state: idleState(entry), _meta: { subrun: entry } };
}

function idleState(entry: CompletionEntry) {
  switch (entry.status) {
    case 'completed':
      return { state: 'idle' as const, stopReason: entry.exit_reason === 'max_iterations' ? ('max_turn_requests' as const) : ('end_turn' as const) };
    case 'interrupted':
      return { state: 'idle' as const, stopReason: 'cancelled' as const };
    default:
      return {
        state: 'idle' as const,
        stopReason: 'error' as const,
        error: { code: CHILD_FAILED_CODE, message: entry.error !== undefined && entry.error !== '' ? entry.error : `subagent ${entry.status}` },
      };
  }
}

/** A child's tool call on its own session; `n` is its tool_count. */
export const childToolId = (subagent_id: string, n: number) => `${subagent_id}:tool:${n}`;

export function childTool(subagent_id: string, n: number, name: string, preview: string): SessionUpdate {
  return { sessionUpdate: 'tool_call', toolCallId: childToolId(subagent_id, n), title: name, kind: kindOf(name), status: 'in_progress', rawInput: { preview } };
}

/** Children report a tool's outcome only in their entry's tool_trace: each call is closed from it. */
export function childToolsClosed(entry: CompletionEntry): SessionUpdate[] {
  return entry.tool_trace.map((t, i) => ({
    sessionUpdate: 'tool_call_update',
    toolCallId: childToolId(entry.subagent_id, i + 1),
    status: (t.status === 'ok' ? 'completed' : 'failed') satisfies ToolCallStatus,
  }));
}

// ---- children, for a client without `subagents`: one tool call each on the session ----

export function childCall(c: ChildInfo): SessionUpdate {
  return {
    sessionUpdate: 'tool_call',
    toolCallId: c.subagent_id,
    title: c.goal,
    kind: 'think',
    status: 'pending',
    rawInput: { goal: c.goal, parent_id: c.parent_id },
  };
}

export function childCallProgress(subagent_id: string, text: string, status?: ToolCallStatus): SessionUpdate {
  return { sessionUpdate: 'tool_call_update', toolCallId: subagent_id, ...(status ? { status } : {}), content: toolText(text) };
}

export function childCallDone(entry: CompletionEntry): SessionUpdate {
  const ok = entry.status === 'completed';
  return {
    sessionUpdate: 'tool_call_update',
    toolCallId: entry.subagent_id,
    status: ok ? 'completed' : 'failed',
    content: toolText(ok ? entry.summary : `${entry.status}${entry.error ? `: ${entry.error}` : ''}`),
    rawOutput: entry,
  };
}
