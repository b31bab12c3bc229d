// One MCP session's server: the SDK's McpServer with subrun's six tools, its resources and its log
// messages, over one McpSession (one link, one subrun session, opened at initialize). The stdio
// entry (stdio.ts) makes one for the process; the HTTP one (http.ts) one per Mcp-Session-Id.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Transport as McpTransport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Logger } from '../log.ts';
import type { RpcEvent } from '../rpc/link.ts';
import type { Transport } from '../rpc/transports/transport.ts';
import { entryFromWire } from '../server/wire-events.ts';
import { SERVER_NAME, VERSION } from '../version.ts';
import { installResources } from './resources.ts';
import { McpSession } from './session.ts';
import { registerTools } from './tools.ts';

export const INSTRUCTIONS = [
  'subrun runs children (subagents) concurrently for you: call delegate, then wait (wait: true, or delegation_result with wait_seconds) or collect later.',
  'Watch them with list_subagents and tail_subagent, steer a running one with steer_subagent, stop one and its subtree with interrupt_subagent.',
  'A steer answered queued is accepted, not delivered: it ends delivered (a log message) or in the entry as missed_steer.',
  "Never report a child's result before its completion entry is in.",
].join(' ');

export interface SurfaceOptions {
  /** The RPC server (anything that serves a transport as RpcServer does). */
  readonly server: { connect(transport: Transport): unknown };
  readonly max_message_bytes: number;
  readonly logger: Logger;
}

export interface McpSurface {
  readonly mcp: McpServer;
  /** The subrun session, opened on first need (at initialize); one for the surface's life. */
  session(): Promise<McpSession>;
  /** The shutdown began: `delegate` answers -32000 from now on. */
  shutdown(): void;
  /** Resolves once every tool call in flight has its answer (those that wait end with the link). */
  answered(): Promise<void>;
  /** Ends the subrun session (live children interrupted) and the MCP connection. Idempotent. */
  close(): Promise<void>;
  connect(transport: McpTransport): Promise<void>;
}

export function createSurface(opts: SurfaceOptions): McpSurface {
  const logger = opts.logger;
  const mcp = new McpServer({ name: SERVER_NAME, version: VERSION }, { capabilities: { logging: {} }, instructions: INSTRUCTIONS });
  let opened: Promise<McpSession> | undefined;
  let closing = false;
  const inflight = new Set<Promise<unknown>>();
  const track = <T>(p: Promise<T>): Promise<T> => {
    inflight.add(p);
    void p.finally(() => inflight.delete(p)).catch(() => undefined);
    return p;
  };
  const session = (): Promise<McpSession> => {
    opened ??= McpSession.open(opts.server, mcp.server.getClientVersion()?.name ?? 'client', logger).then((s) => {
      s.listen((e) => {
        resources.onEvent(e);
        notice(e);
      });
      s.onClosed(() => resources.close());
      return s;
    });
    return opened;
  };
  // Log messages: one per completion, one per steer delivery; logging/setLevel filters (the SDK).
  const notice = (e: RpcEvent) => {
    const p = e.payload;
    const sid = mcp.server.transport?.sessionId;
    if (e.type === 'subagent.complete') {
      const { entry, level } = completionNotice(e);
      void mcp.server
        .sendLoggingMessage({ level, logger: 'subrun', data: { event: 'subagent.complete', subagent_id: entry.subagent_id, entry } }, sid)
        .catch(() => undefined);
    } else if (e.type === 'subagent.steer.delivered') {
      const data = { event: 'subagent.steer.delivered', subagent_id: String(p.subagent_id), steer_id: String(p.steer_id), text: String(p.text) };
      void mcp.server.sendLoggingMessage({ level: 'info', logger: 'subrun', data }, sid).catch(() => undefined);
    }
  };
  const resources = installResources(mcp, session, logger);
  registerTools(mcp, { session, closing: () => closing, max_message_bytes: opts.max_message_bytes, logger, track });
  // The subrun session is made at initialize, before the first tool call needs it.
  mcp.server.oninitialized = () => void session().catch((err: unknown) => logger.warn({ err }, 'mcp session not opened'));
  let closed: Promise<void> | undefined;
  return {
    mcp,
    session,
    shutdown: () => void (closing = true),
    answered: async () => {
      while (inflight.size > 0) await Promise.allSettled([...inflight]);
      // The SDK checks the result and writes it a few promise turns after the handler resolved.
      await new Promise((resolve) => setImmediate(resolve));
    },
    close() {
      closed ??= (async () => {
        closing = true;
        if (opened) await (await opened.catch(() => undefined))?.close();
        await mcp.close().catch(() => undefined);
      })();
      return closed;
    },
    connect: (transport) => mcp.connect(transport),
  };
}

function completionNotice(e: RpcEvent) {
  const entry = entryFromWire(e.payload);
  const level: 'info' | 'warning' = entry.status === 'completed' && entry.missed_steer === undefined ? 'info' : 'warning';
  return { entry, level };
}
