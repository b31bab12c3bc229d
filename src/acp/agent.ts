// `subrun serve --acp`: the Agent Client Protocol side of one IDE connection. The SDK's agent app
// answers initialize, session/new, session/prompt, session/cancel and subrun's extensions; every
// one of them becomes a JSON-RPC call on the adapter's link to the RPC server, and every event of
// the link's sessions becomes session/update notifications (session.ts, updates.ts). Ordering of
// prompt and cancel comes from the wire tap (stdio-wire.ts), never from the SDK's handler schedule.
import { realpath, stat } from 'node:fs/promises';
import { isAbsolute, relative, sep } from 'node:path';
import * as acp from '@agentclientprotocol/sdk/unstable';
import type { AgentConnection, AnyMessage, SessionUpdate } from '@agentclientprotocol/sdk/unstable';
import type { Logger } from '../log.ts';
import type { RpcServer } from '../rpc/server.ts';
import { SERVER_NAME, VERSION } from '../version.ts';
import { toRequestError } from './errors.ts';
import { EXTENSION_METHODS, objectParams, runExtension } from './extensions.ts';
import { RpcLink, type RpcEvent } from '../rpc/link.ts';
import { AcpSession } from './session.ts';
import type { StdioWire } from './stdio-wire.ts';

export interface AcpAgentOptions {
  readonly server: RpcServer;
  /** Directories a session's cwd must lie in (real paths). */
  readonly roots: readonly string[];
  /** Tell the server each session's directory, so its parent agent's tools are rooted there. */
  readonly workspaces?: boolean;
  readonly logger: Logger;
}

const inside = (root: string, path: string) => {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

const stringField = (m: AnyMessage, key: string): string | undefined => {
  const p = 'params' in m ? m.params : undefined;
  if (!isObject(p)) return undefined;
  const v = p[key];
  return typeof v === 'string' ? v : undefined;
};

export class AcpAgent {
  readonly #opts: AcpAgentOptions;
  readonly #link: RpcLink;
  readonly #sessions = new Map<string, AcpSession>();
  /** The prompts the tap registered a turn for, by request id, until each is answered. */
  readonly #prompts = new Map<string | number, AcpSession>();
  readonly #unwatch: () => void;
  #visible = false;
  #conn: AgentConnection | undefined;
  /** The last notification handed to the SDK: the shutdown waits for it to be written. */
  #lastWrite: Promise<void> = Promise.resolve();

  constructor(opts: AcpAgentOptions) {
    this.#opts = opts;
    this.#link = new RpcLink(opts.server, (e) => this.#onEvent(e));
    // Nothing of a session outlives it here: once its subrun session closed, its id is unknown.
    this.#unwatch = opts.server.onSessionClose((id) => this.#forget(id));
  }

  /** Connects the SDK's agent app to the wire; resolves when the ACP connection has closed. */
  connect(wire: StdioWire): AgentConnection {
    this.#conn = this.#app().connect(wire.stream);
    return this.#conn;
  }

  /** Sees each inbound message in wire order, before the SDK dispatches it (stdio-wire.ts). */
  tap(m: AnyMessage): void {
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- a peer's message, typed by the SDK but read off the wire
    if (m.jsonrpc !== '2.0') return;
    const sid = stringField(m, 'sessionId');
    if (sid === undefined) return;
    const method = 'method' in m ? m.method : undefined;
    if (method === 'session/prompt' && 'id' in m && (typeof m.id === 'string' || typeof m.id === 'number')) {
      const session = this.#sessions.get(sid);
      if (!session) return;
      // Registered before the SDK checks the params (a cancel right behind must find it); a prompt
      // the SDK then refuses loses its turn, and any cancel that marked it, with its answer.
      session.registerTurn(m.id);
      this.#prompts.set(m.id, session);
    } else if (method === 'session/cancel' && !('id' in m)) {
      const own = this.#sessions.get(sid);
      if (own) return own.cancel();
      for (const s of this.#sessions.values()) if (s.ownsChild(sid)) return s.cancelChild(sid);
      this.#opts.logger.info({ session_id: sid }, 'acp cancel for an unknown session ignored');
    }
  }

  /** A request was answered (result or error): the turn the tap registered for it, if any, goes. */
  answered(id: string | number | null): void {
    if (id === null) return;
    const session = this.#prompts.get(id);
    if (!session) return;
    this.#prompts.delete(id);
    session.dropTurn(id);
  }

  /**
   * The shutdown's first step: every session's turn and children interrupted, as a cancel would
   * do; the pending prompts then answer `cancelled` after their children's terminal updates.
   */
  cancelAll(): void {
    for (const s of this.#sessions.values()) s.cancel();
  }

  /** After the server shut down: nothing more will come; waiting prompts answer `cancelled`. */
  close(): void {
    this.#unwatch();
    for (const s of this.#sessions.values()) s.close();
    this.#link.close();
  }

  /** How much state the adapter holds now, summed over its sessions (it must stay bounded). */
  held(): { sessions: number; children: number; turns: number; prompts: number } {
    let children = 0;
    let turns = 0;
    for (const s of this.#sessions.values()) {
      const h = s.held();
      children += h.children;
      turns += h.turns;
    }
    return { sessions: this.#sessions.size, children, turns, prompts: this.#prompts.size };
  }

  /** Resolves once every notification handed to the SDK so far was written. */
  written(): Promise<void> {
    return this.#lastWrite;
  }

  #send(sessionId: string, update: SessionUpdate): void {
    const conn = this.#conn;
    if (!conn) return;
    this.#lastWrite = conn.client.notify(acp.methods.client.session.update, { sessionId, update }).catch((err: unknown) => {
      this.#opts.logger.warn({ err }, 'acp update not sent');
    });
  }

  /** Its subrun session closed: a prompt still waiting answers `cancelled`, and the id is forgotten. */
  #forget(session_id: string): void {
    const session = this.#sessions.get(session_id);
    if (!session) return;
    session.close();
    this.#sessions.delete(session_id);
    for (const [id, s] of this.#prompts) if (s === session) this.#prompts.delete(id);
    this.#opts.logger.info({ session_id }, 'acp session gone with its subrun session');
  }

  #onEvent(e: RpcEvent): void {
    if (e.session_id === null) return;
    this.#sessions.get(e.session_id)?.onEvent(e);
  }

  async #checkedCwd(cwd: string): Promise<string> {
    const roots = this.#opts.roots;
    const refuse = (why: string) => acp.RequestError.invalidParams({ cwd, allowedRoots: roots }, `${why}; allowed roots: ${roots.join(', ')}`);
    if (!isAbsolute(cwd)) throw refuse('cwd must be an absolute path');
    let real: string;
    try {
      real = await realpath(cwd);
    } catch {
      throw refuse('cwd does not exist');
    }
    if (!roots.some((r) => inside(r, real))) throw refuse('cwd is outside the allowed roots');
    // A session's tools are rooted at its cwd: a regular file (or a device, a socket) is no root.
    const kind = await stat(real).catch(() => undefined);
    if (!kind?.isDirectory()) throw refuse('cwd is not a directory');
    return real;
  }

  #app() {
    const log = this.#opts.logger;
    const guard = async <T>(run: () => Promise<T> | T): Promise<T> => {
      try {
        return await run();
      } catch (err) {
        throw toRequestError(err, log);
      }
    };
    let app = acp
      .agent({ name: SERVER_NAME })
      .onRequest(acp.methods.agent.initialize, ({ params }) => {
        this.#visible = params.clientCapabilities?.subagents != null;
        return {
          protocolVersion: acp.PROTOCOL_VERSION,
          agentCapabilities: { loadSession: false, promptCapabilities: { image: false, audio: false, embeddedContext: false } },
          agentInfo: { name: SERVER_NAME, version: VERSION },
          authMethods: [],
        };
      })
      .onRequest(acp.methods.agent.session.new, ({ params }) =>
        guard(async () => {
          const cwd = await this.#checkedCwd(params.cwd);
          const { session_id } = await this.#link.call('session.create', {});
          if (this.#opts.workspaces === true) this.#opts.server.setSessionWorkspace(session_id, cwd);
          this.#sessions.set(session_id, new AcpSession(session_id, this.#visible, this.#link, (id, up) => this.#send(id, up), log));
          log.info({ session_id }, 'acp session created');
          return { sessionId: session_id };
        }),
      )
      .onRequest(acp.methods.agent.session.prompt, ({ params, requestId, signal }) =>
        guard(() => {
          const session = this.#sessions.get(params.sessionId);
          if (!session) {
            const child = [...this.#sessions.values()].some((s) => s.ownsChild(params.sessionId));
            throw child
              ? acp.RequestError.invalidParams({ sessionId: params.sessionId }, 'a subagent session cannot be prompted; steer it with _subrun/steer')
              : acp.RequestError.sessionNotFound(params.sessionId);
          }
          // $/cancel_request for this prompt (or the connection closing) cancels it like session/cancel.
          const onAbort = () => session.cancel();
          if (signal.aborted) onAbort();
          else signal.addEventListener('abort', onAbort, { once: true });
          const text = params.prompt.map((b) => (b.type === 'text' ? b.text : '')).join('');
          // The prompt's W3C trace context (`_meta.traceparent`, ...) parents its turn's span.
          return session.prompt(requestId, text, params._meta).finally(() => signal.removeEventListener('abort', onAbort));
        }),
      )
      .onNotification(acp.methods.agent.session.cancel, () => {
        // Applied in the wire tap, in arrival order; by the time this runs it is done.
      });
    for (const method of EXTENSION_METHODS) {
      app = app.onRequest(method, objectParams, ({ params }) => guard(() => runExtension(this.#link, method, params)));
    }
    return app;
  }
}
