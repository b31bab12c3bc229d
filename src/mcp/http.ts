// Streamable HTTP MCP at `/mcp` on the listener of `serve --ws`: the gate in front of the SDK's
// transport (http-sessions.ts, loaded on the first request that passes it, so `serve --ws` pays
// nothing for MCP at start). Every request carries `Authorization: Bearer <token>` (compared in
// constant time), else 401 with `WWW-Authenticate: Bearer` and no OAuth metadata anywhere (Claude
// Code drops a configured header once a server advertises OAuth); `?token=` and the dashboard's
// cookie do not count. Against DNS rebinding: an Origin present and not allowed is 403 (none
// passes: hosts are not browsers), and bound to loopback, a Host not naming loopback is 403.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../log.ts';
import { bearerOf, targetOf, TokenCheck } from '../server/auth.ts';
import { isLoopback, type ListenerContext } from '../server/listener.ts';
import type { McpSessions, SessionsOptions } from './http-sessions.ts';
import { refuse } from './refuse.ts';

export const MCP_PATH = '/mcp';

export interface McpHttpOptions extends SessionsOptions {
  readonly token: string;
  /** The listener is bound to a loopback address: Host must name loopback. */
  readonly loopback: boolean;
}

export interface McpHttp {
  /** Whether the request is the MCP endpoint's. */
  owns(req: IncomingMessage): boolean;
  handle(req: IncomingMessage, res: ServerResponse, ctx: ListenerContext): void;
  /** The shutdown began: no more delegations on any session. */
  settle(): void;
  /** After the server's shutdown: every answer written, every session's streams closed. */
  finish(grace_ms: number): Promise<void>;
  /** Live MCP sessions (for tests and the bench). */
  count(): number;
}

/** The host part of a Host header (`[::1]:8787` → `[::1]`), lowercased. */
function hostName(host: string): string {
  const h = host.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(0, h.indexOf(']') + 1);
  const colon = h.lastIndexOf(':');
  return colon >= 0 ? h.slice(0, colon) : h;
}

export function mcpHttp(opts: McpHttpOptions): McpHttp {
  const check = new TokenCheck(opts.token);
  let loaded: McpSessions | undefined;
  let loading: Promise<McpSessions> | undefined;
  let settled = false;
  const sessions = (): Promise<McpSessions> => {
    loading ??= import('./http-sessions.ts').then((m) => {
      loaded = new m.McpSessions(opts);
      if (settled) loaded.settle();
      return loaded;
    });
    return loading;
  };
  const logger: Logger = opts.logger;
  return {
    // Every request on the listener asks: a target without `mcp` in it cannot normalise to /mcp
    // (a URL's path keeps its case and its percent-escapes, and Node's parser refuses the tab and
    // line feed a URL parse would strip), so most skip the parse.
    owns: (req) => req.url?.includes('mcp') === true && targetOf(req)?.pathname === MCP_PATH,
    handle(req, res, ctx) {
      if (!check.token(bearerOf(req))) {
        req.resume();
        refuse(res, 401, 'Unauthorized', { 'WWW-Authenticate': 'Bearer' });
        return;
      }
      const origin = req.headers.origin;
      if (origin !== undefined && !ctx.isAllowedOrigin(origin)) {
        req.resume();
        refuse(res, 403, 'Forbidden: origin not allowed');
        return;
      }
      const host = req.headers.host;
      if (opts.loopback && (host === undefined || !isLoopback(hostName(host)))) {
        req.resume();
        refuse(res, 403, 'Forbidden: host not allowed');
        return;
      }
      if (!ctx.accepting) {
        req.resume();
        refuse(res, 503, 'Service Unavailable: shutting down', { Connection: 'close' });
        return;
      }
      sessions()
        .then((s) => s.handle(req, res, ctx))
        .catch((err: unknown) => {
          logger.error({ err }, 'mcp request failed');
          if (!res.headersSent) refuse(res, 500, 'Internal error');
          else res.end();
        });
    },
    settle() {
      settled = true;
      loaded?.settle();
    },
    async finish(grace_ms) {
      await loaded?.finish(grace_ms);
    },
    count: () => loaded?.count() ?? 0,
  };
}
