// WebSocket transport (at `/` and `/api/ws` of the server's listener, src/server/listener.ts):
// one JSON-RPC message or batch per text frame. Every upgrade carries the server token
// (Authorization: Bearer, or ?token=), compared in constant time; an Origin header, when present,
// must be allowed. Compression is off, frames over the limit close the socket (1009), heartbeat
// pings drop silent peers, and a peer that stops reading (over the outbound bound and draining
// nothing for a check interval, or past the ceiling: server/backlog.ts) is dropped before its
// unsent frames can grow the server's memory without bound; a burst from a peer that reads is not. At shutdown every WebSocket gets its close frame behind
// what it was already sent; the listener's grace bounds how long it may take to read it.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type ServerOptions, type WebSocket } from 'ws';
import { errorCode } from '../../guards.ts';
import type { Logger } from '../../log.ts';
import { targetOf, TokenCheck } from '../../server/auth.ts';
import { Backlog } from '../../server/backlog.ts';
import { listen, type RequestHandler } from '../../server/listener.ts';
import type { Transport } from './transport.ts';

export { CUT_MESSAGE, isLoopback } from '../../server/listener.ts';
export type { ListenerContext, RequestHandler } from '../../server/listener.ts';

export interface WsOptions {
  readonly host: string;
  readonly port: number;
  readonly token: string;
  /** Origins allowed besides the server's own. */
  readonly allow_origins: readonly string[];
  readonly max_message_bytes: number;
  /** Ping interval; a peer that has not answered the previous ping is dropped. Default 30 s. */
  readonly heartbeat_ms?: number;
  /** Unsent bytes past which a peer that drains nothing is dropped (server/backlog.ts). Default 8 MiB. */
  readonly max_outbound_bytes?: number;
  /** How long a peer over the bound may drain nothing. Default 2 s. */
  readonly stall_ms?: number;
  /** How long close() lets peers read what they were sent and answer the close. Default 0: cut at once. */
  readonly shutdown_grace_ms?: number;
  readonly logger: Logger;
  /**
   * Plain HTTP requests on the same host:port (the HTTP API, the dashboard). Without one, every
   * plain request is 426 Upgrade Required.
   */
  readonly onRequest?: RequestHandler;
}

export interface WsListener {
  readonly url: string;
  readonly port: number;
  /**
   * Takes no more connections: the port closes, an upgrade completed from now on is refused 503,
   * sockets that never upgraded are destroyed, and the heartbeat stops. Idempotent.
   */
  stopAccepting(): void;
  /**
   * Stops accepting, sends every WebSocket still open its close frame (1001), waits up to
   * `shutdown_grace_ms` for every socket to end, then destroys (and logs) the rest. Resolves
   * once every socket is gone. Idempotent.
   */
  close(): Promise<void>;
}

/** Where the socket is served: `/`, and `/api/ws`, where hermes hosts dial it. */
export const WS_PATHS: ReadonlySet<string> = new Set(['/', '/api/ws']);

export function tokenOf(req: IncomingMessage): string | undefined {
  const auth = req.headers.authorization;
  if (typeof auth === 'string' && /^bearer\s+/i.test(auth)) return auth.replace(/^bearer\s+/i, '').trim();
  return targetOf(req)?.searchParams.get('token') ?? undefined;
}

function refuse(socket: Duplex, status: number, reason: string): void {
  socket.end(`HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: ${reason.length}\r\n\r\n${reason}`);
}

/** Starts listening; `connect` adopts each accepted socket as a transport. */
export async function listenWs(opts: WsOptions, connect: (t: Transport) => void): Promise<WsListener> {
  const check = new TokenCheck(opts.token);
  const heartbeat = opts.heartbeat_ms ?? 30_000;
  const maxOut = opts.max_outbound_bytes ?? 8 * 1024 * 1024;
  const grace = opts.shutdown_grace_ms ?? 0;
  // ws destroys a socket whose peer has not answered a close frame after closeTimeout (30 s by
  // default): never before the shutdown deadline, which is ours to keep. ws has the option; its
  // type declarations do not list it yet.
  const options: ServerOptions & { closeTimeout: number } = {
    noServer: true,
    maxPayload: opts.max_message_bytes,
    perMessageDeflate: false,
    closeTimeout: Math.max(30_000, grace + 1_000),
  };
  const wss = new WebSocketServer(options);

  const alive = new WeakMap<WebSocket, boolean>();
  wss.on('connection', (ws) => {
    alive.set(ws, true);
    ws.on('pong', () => alive.set(ws, true));
  });
  const listener = await listen({
    host: opts.host,
    port: opts.port,
    allow_origins: opts.allow_origins,
    shutdown_grace_ms: grace,
    logger: opts.logger,
    onRequest: opts.onRequest,
    onUpgrade: (req, socket, head, ctx) => {
      socket.on('error', () => socket.destroy());
      if (!ctx.accepting) return refuse(socket, 503, 'Service Unavailable');
      // An unparsable request target (any client can send one, before the token check) is a 400,
      // not an exception thrown out of this listener, which would take the whole server down.
      const target = targetOf(req);
      if (!target) return refuse(socket, 400, 'Bad Request');
      if (!WS_PATHS.has(target.pathname)) return refuse(socket, 404, 'Not Found');
      const auth = check.of(req, true);
      if (auth === undefined) return refuse(socket, 401, 'Unauthorized');
      // A browser's cookie rides along on any page's request: an upgrade it authenticates must come
      // from an allowed page. With the token itself, an Origin header, when present, must be allowed.
      const origin = req.headers.origin;
      if (auth === 'cookie' && origin === undefined) return refuse(socket, 403, 'Forbidden');
      if (origin !== undefined && !ctx.isAllowedOrigin(origin)) return refuse(socket, 403, 'Forbidden');
      wss.handleUpgrade(req, socket, head, (ws) => {
        ctx.owe(socket);
        // noServer mode: ws does not emit 'connection' itself, and the heartbeat listens for it.
        wss.emit('connection', ws, req);
        connect(wsTransport(ws, socket, { max_bytes: maxOut, stall_ms: opts.stall_ms }, opts.logger));
      });
    },
    // A connection the server closed already has its close frame queued; ws ignores a second one.
    onClosing: () => {
      clearInterval(pinger);
      for (const ws of wss.clients) if (ws.readyState === ws.OPEN) ws.close(1001, 'closing');
    },
    onClosed: () => wss.close(),
  });

  const pinger = setInterval(() => {
    for (const ws of wss.clients) {
      if (alive.get(ws) === false) {
        opts.logger.warn('dropping a WebSocket peer that stopped answering pings');
        ws.terminate();
        continue;
      }
      alive.set(ws, false);
      ws.ping();
    }
  }, heartbeat);
  pinger.unref();

  return {
    url: `ws://${listener.host}:${listener.port}/`,
    port: listener.port,
    stopAccepting: () => {
      clearInterval(pinger);
      listener.stopAccepting();
    },
    close: () => listener.close(),
  };
}

function wsTransport(ws: WebSocket, socket: Duplex, bound: { max_bytes: number; stall_ms: number | undefined }, logger: Logger): Transport {
  let closed = false;
  let corked = false;
  const uncork = () => {
    corked = false;
    socket.uncork();
  };
  const backlog = new Backlog({
    max_bytes: bound.max_bytes,
    check_ms: bound.stall_ms,
    buffered: () => ws.bufferedAmount,
    drop: (reason, buffered) => {
      // Rather than buffer without bound.
      logger.warn(
        { buffered, max_outbound_bytes: bound.max_bytes },
        reason === 'stalled' ? 'dropping a WebSocket peer that stopped reading' : 'dropping a WebSocket peer too far behind',
      );
      ws.terminate();
    },
  });
  const write = (text: string) => {
    // Every frame of one turn leaves in one socket write (bench/cases/steer-load.ts); the uncork
    // runs before any I/O, so no frame waits.
    if (!corked) {
      corked = true;
      socket.cork();
      process.nextTick(uncork);
    }
    ws.send(text);
  };
  const t: Transport = {
    kind: 'ws',
    send(text) {
      if (closed || ws.readyState !== ws.OPEN) return;
      backlog.send(() => write(text));
    },
    close() {
      if (closed) return;
      // Flush what this turn sent (e.g. the completion events of a shutdown) before closing:
      // a socket terminated while corked would drop it.
      if (corked) uncork();
      ws.close(1001, 'closing');
      finish();
    },
    start() {
      ws.on('message', (data, isBinary) => {
        if (isBinary) {
          ws.close(1003, 'text frames only');
          return;
        }
        t.onmessage?.((Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data)).toString('utf8'));
      });
      ws.on('close', finish);
      ws.on('error', (err) => {
        // A peer's bad frame, not a bug here: its message and code, never a stack, reach the log.
        logger.debug({ error: err.message, code: errorCode(err) }, 'WebSocket error');
        finish();
      });
    },
  };
  function finish() {
    if (closed) return;
    closed = true;
    backlog.close();
    t.onclose?.();
  }
  return t;
}
