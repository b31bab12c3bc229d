// The six tools, each the JSON-RPC method of the same meaning on the session's link:
//   delegate            delegation.spawn (and, with `wait`, its children's completions)
//   delegation_result   delegation.result (and, with `wait_seconds`, the rest of its completions)
//   list_subagents      subagent.list
//   tail_subagent       subagent.tail
//   steer_subagent      subagent.steer
//   interrupt_subagent  subagent.interrupt (the child and its subtree, reported descendants first)
// The SDK checks the arguments against the input schema first (its `isError` names the field);
// then one call's arguments are bounded like a stdio line (-32600 `arguments too large`, nothing
// done or echoed); then the server decides, and its refusals come back as the error form.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import type { z } from 'zod';
import type { Logger } from '../log.ts';
import { argumentsBytes, refusalOf, shuttingDown, success, tooLarge } from './results.ts';
import { childUri } from './uris.ts';
import { outputSchemas, toolInputs, type ToolInput, type ToolName, type ToolSuccess } from './schemas.ts';
import type { McpSession } from './session.ts';
import { DelegationWatch, type WaitOptions } from './waits.ts';

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

export interface ToolContext {
  /** This MCP session's subrun session (opened at initialize). */
  readonly session: () => Promise<McpSession>;
  /** True once the server is shutting down: `delegate` answers -32000. */
  readonly closing: () => boolean;
  readonly max_message_bytes: number;
  readonly logger: Logger;
  /** Counts a call in flight until it is answered (the shutdown waits for every answer). */
  readonly track: <T>(p: Promise<T>) => Promise<T>;
}

const DESCRIPTIONS: Readonly<Record<ToolName, string>> = {
  delegate:
    'Start subrun children, one per task, running concurrently. Answers at once with their ids (done: false), or with wait: true once all completed or after wait_seconds with what there is; then delegation_result.',
  delegation_result: "A delegation's completion entries so far (by task_index) and whether all are in; wait_seconds waits for the rest.",
  list_subagents: "This session's children as snapshots: status, tools, whether each still takes steers.",
  tail_subagent: "The last 16 KiB of a child's transcript; since (an earlier offset) gives only what came after it.",
  steer_subagent:
    'Guidance a running child takes at its next safe point. queued is accepted, not delivered: the delivery is a log message, and a steer the child could not take comes back in its entry as missed_steer.',
  interrupt_subagent: 'Stop a child and its whole subtree (descendants first); reports what it stopped.',
};

const ANNOTATIONS: Readonly<Record<ToolName, { readOnlyHint?: boolean; destructiveHint?: boolean }>> = {
  delegate: { readOnlyHint: false, destructiveHint: false },
  delegation_result: { readOnlyHint: true },
  list_subagents: { readOnlyHint: true },
  tail_subagent: { readOnlyHint: true },
  steer_subagent: { readOnlyHint: false, destructiveHint: false },
  interrupt_subagent: { readOnlyHint: false, destructiveHint: true },
};

/** The progress sender of a request that carries a progressToken. */
function progressOf(extra: Extra): WaitOptions['progress'] {
  const token = extra._meta?.progressToken;
  if (token === undefined) return undefined;
  return (params) => extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, ...params } });
}

type Handler<T extends ToolName> = (s: McpSession, args: ToolInput<T>, extra: Extra) => Promise<CallToolResult>;

const answer = <T extends ToolName>(_tool: T, value: ToolSuccess<T>, more?: Parameters<typeof success>[1]) => success(value, more);

const handlers: { readonly [T in ToolName]: Handler<T> } = {
  async delegate(s, args, extra) {
    const watch = new DelegationWatch(s);
    try {
      const r = await s.link.call('delegation.spawn', {
        session_id: s.id,
        tasks: args.tasks,
        ...(args.timeout_ms !== undefined ? { timeout_ms: args.timeout_ms } : {}),
      });
      watch.bind(r.delegation_id, r.count);
      const waited = args.wait
        ? await watch.wait({ seconds: args.wait_seconds, signal: extra.signal, progress: progressOf(extra) })
        : { done: false, results: [] };
      const links = r.subagent_ids.map((id) => ({ type: 'resource_link' as const, uri: childUri(s.id, id), name: id, mimeType: 'application/json' }));
      return answer('delegate', { delegation_id: r.delegation_id, subagent_ids: r.subagent_ids, count: r.count, ...waited }, links);
    } finally {
      watch.stop();
    }
  },

  async delegation_result(s, args, extra) {
    const watch = new DelegationWatch(s);
    try {
      const r = await s.link.call('delegation.result', { session_id: s.id, delegation_id: args.delegation_id });
      if (r.done || args.wait_seconds === 0) return answer('delegation_result', r);
      watch.bind(r.delegation_id, undefined, r.results);
      const waited = await watch.wait({ seconds: args.wait_seconds, signal: extra.signal, progress: progressOf(extra) });
      return answer('delegation_result', { delegation_id: r.delegation_id, ...waited });
    } finally {
      watch.stop();
    }
  },

  async list_subagents(s, args) {
    const r = await s.link.call('subagent.list', {
      session_id: s.id,
      ...(args.include_finished !== undefined ? { include_finished: args.include_finished } : {}),
    });
    return answer('list_subagents', { subagents: r.subagents });
  },

  async tail_subagent(s, args) {
    const r = await s.link.call('subagent.tail', {
      session_id: s.id,
      subagent_id: args.subagent_id,
      ...(args.since !== undefined ? { since: args.since } : {}),
    });
    return answer('tail_subagent', r);
  },

  async steer_subagent(s, args) {
    const r = await s.link.call('subagent.steer', { session_id: s.id, subagent_id: args.subagent_id, text: args.text });
    if (r.status === 'queued') return answer('steer_subagent', { status: 'queued', subagent_id: r.subagent_id, text: r.text, steer_id: r.steer_id });
    // The wire's reason, as every surface says it (`finished`, `not_found`, `vetoed`).
    return answer('steer_subagent', { status: 'rejected', subagent_id: r.subagent_id, text: r.text, reason: r.reason });
  },

  async interrupt_subagent(s, args) {
    const r = await s.link.call('subagent.interrupt', { session_id: s.id, subagent_id: args.subagent_id });
    if (r.interrupted.length < 2) return answer('interrupt_subagent', { found: r.found, subagent_id: r.subagent_id, interrupted: r.interrupted });
    // The server lists the target first; the children end descendants first, and so does this list.
    const own = await s.link.call('subagent.list', { session_id: s.id, include_finished: true });
    const parents = new Map(own.subagents.map((c) => [c.subagent_id, c.parent_id]));
    return answer('interrupt_subagent', { found: r.found, subagent_id: r.subagent_id, interrupted: postOrder(r.interrupted, parents) });
  },
};

/**
 * `preorder` (a target, then its descendants, each parent before its children) in post-order,
 * each child before its parent; an id whose parent is unknown stays under the target.
 */
export function postOrder(preorder: readonly string[], parents: ReadonlyMap<string, string | null>): string[] {
  const [root] = preorder;
  if (root === undefined) return [];
  const kids = new Map<string, string[]>();
  for (const id of preorder.slice(1)) {
    const p = parents.get(id);
    const at = p !== null && p !== undefined && preorder.includes(p) ? p : root;
    kids.set(at, [...(kids.get(at) ?? []), id]);
  }
  const out: string[] = [];
  const visit = (id: string): void => {
    for (const k of kids.get(id) ?? []) visit(k);
    out.push(id);
  };
  visit(root);
  return out;
}

// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- T ties the tool's input, handler and result types together in the body
function register<T extends ToolName>(mcp: McpServer, ctx: ToolContext, tool: T): void {
  const input = toolInputs[tool];
  const run: Handler<T> = handlers[tool];
  mcp.registerTool<(typeof outputSchemas)[T], z.ZodType<ToolInput<T>>>(
    tool,
    { description: DESCRIPTIONS[tool], inputSchema: input, outputSchema: outputSchemas[tool], annotations: ANNOTATIONS[tool] },
    (args: ToolInput<T>, extra: Extra) =>
      ctx.track(
        (async () => {
          if (argumentsBytes(args) > ctx.max_message_bytes) return tooLarge(ctx.max_message_bytes);
          if (ctx.closing() && tool === 'delegate') return shuttingDown();
          try {
            return await run(await ctx.session(), args, extra);
          } catch (err) {
            return refusalOf(err, ctx.logger);
          }
        })(),
      ),
  );
}

export function registerTools(mcp: McpServer, ctx: ToolContext): void {
  for (const tool of ['delegate', 'delegation_result', 'list_subagents', 'tail_subagent', 'steer_subagent', 'interrupt_subagent'] as const)
    register(mcp, ctx, tool);
}
