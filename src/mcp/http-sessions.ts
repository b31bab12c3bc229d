// The HTTP MCP sessions: one SDK StreamableHTTPServerTransport and one surface (one subrun
// session) per `initialize`, named by a random Mcp-Session-Id of 192 bits that is never logged and
// continued by any connection that sends it. A request without one (other than initialize) is
// 400, with an unknown or ended one 404. A session ends on DELETE /mcp, or once it had no request
// in flight and no stream open for --park-ttl-ms; its subrun session then closes (live children
// interrupted) and its id is 404. Each session's event store is bounded by --replay-events and
// --replay-bytes. The SDK reads the body (over 4 MiB: 413) and answers the protocol.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Logger } from '../log.ts';
import type { ListenerContext } from '../server/listener.ts';
import type { Transport } from '../rpc/transports/transport.ts';
import { BoundedEventStore } from './event-store.ts';
import { refuse } from './refuse.ts';
import { within } from './within.ts';
import { createSurface, type McpSurface } from './surface.ts';

export interface SessionsOptions {
  readonly server: { connect(transport: Transport): unknown };
  readonly logger: Logger;
  readonly max_message_bytes: number;
  readonly park_ttl_ms: number;
  readonly replay_events: number;
  readonly replay_bytes: number;
}

interface Entry {
  readonly transport: StreamableHTTPServerTransport;
  readonly surface: McpSurface;
  /** Requests in flight and streams open. */
  busy: number;
  timer: NodeJS.Timeout | undefined;
}

const newSessionId = (): string => randomBytes(24).toString('base64url');

export class McpSessions {
  readonly #opts: SessionsOptions;
  readonly #sessions = new Map<string, Entry>();
  #settled = false;

  constructor(opts: SessionsOptions) {
    this.#opts = opts;
  }

  count(): number {
    return this.#sessions.size;
  }

  async handle(req: IncomingMessage, res: ServerResponse, ctx: ListenerContext): Promise<void> {
    // A stream may stay open as long as the session: shutdown gives it the grace, as a WebSocket.
    ctx.owe();
    const header = req.headers['mcp-session-id'];
    const sid = typeof header === 'string' ? header : undefined;
    if (sid !== undefined) {
      const entry = this.#sessions.get(sid);
      if (!entry) {
        req.resume();
        refuse(res, 404, 'Session not found');
        return;
      }
      this.#hold(sid, entry, res);
      return entry.transport.handleRequest(req, res);
    }
    if (req.method !== 'POST') {
      req.resume();
      refuse(res, 400, 'Bad Request: Mcp-Session-Id header is required');
      return;
    }
    // Maybe an initialize: a transport and a surface that become a session only if it is one.
    const surface = createSurface(this.#opts);
    if (this.#settled) surface.shutdown();
    let entry: Entry | undefined;
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: newSessionId,
      eventStore: new BoundedEventStore({ max_events: this.#opts.replay_events, max_bytes: this.#opts.replay_bytes }),
      onsessioninitialized: (id) => {
        entry = { transport, surface, busy: 0, timer: undefined };
        this.#sessions.set(id, entry);
        this.#hold(id, entry, res);
      },
      onsessionclosed: (id) => void this.#end(id),
    });
    // The SDK's errors may quote a request; never a session id or a token into the log.
    transport.onerror = (err) => this.#opts.logger.debug({ error: err.message }, 'mcp http transport error');
    await surface.connect(transport);
    await transport.handleRequest(req, res);
    // Not an initialize (the SDK answered 400): nothing was opened, nothing is kept.
    if (!entry) await surface.close();
  }

  settle(): void {
    this.#settled = true;
    for (const e of this.#sessions.values()) e.surface.shutdown();
  }

  /** After the server's shutdown (every link closed, every wait ended): the answers out, the streams closed. */
  async finish(grace_ms: number): Promise<void> {
    const all = [...this.#sessions.values()];
    this.#sessions.clear();
    for (const e of all) clearTimeout(e.timer);
    await within(Promise.all(all.map((e) => e.surface.answered())), grace_ms);
    await within(Promise.all(all.map((e) => e.surface.close())), grace_ms);
  }

  /** Counts `res` as holding the session until it closes; the park timer starts when none does. */
  #hold(id: string, entry: Entry, res: ServerResponse): void {
    entry.busy++;
    clearTimeout(entry.timer);
    entry.timer = undefined;
    res.once('close', () => {
      entry.busy--;
      if (entry.busy > 0 || this.#sessions.get(id) !== entry) return;
      entry.timer = setTimeout(() => void this.#end(id), this.#opts.park_ttl_ms);
      entry.timer.unref();
    });
  }

  async #end(id: string): Promise<void> {
    const entry = this.#sessions.get(id);
    if (!entry) return;
    this.#sessions.delete(id);
    clearTimeout(entry.timer);
    await entry.surface.close();
  }
}
