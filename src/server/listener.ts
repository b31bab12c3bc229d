// The one node:http listener of a server: plain HTTP requests go to the surfaces' handler (the
// HTTP API, the dashboard), upgrades to the WebSocket transport (src/rpc/transports/ws.ts).
//
// Shutdown (close()): the port closes, sockets that never upgraded are dropped (no session lives
// on them and nothing is owed to them), and every socket owed a long answer (an upgraded one, an
// event stream) gets `shutdown_grace_ms` to end; whatever is still open then is destroyed, so no
// peer, authenticated or not, can hold the process.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from '../log.ts';

/** What a plain HTTP request handler on the listener is told about it. */
export interface ListenerContext {
  /** True for the server's own origins and the allowed ones. */
  isAllowedOrigin(origin: string): boolean;
  /** False once shutdown began: the handler should answer with `Connection: close`. */
  readonly accepting: boolean;
  /**
   * Marks the request's socket as owed a long answer (an event stream): shutdown then treats it
   * like a WebSocket (kept until the server closes it, within the grace) instead of dropping it.
   */
  owe(): void;
}

export type RequestHandler = (req: IncomingMessage, res: ServerResponse, ctx: ListenerContext) => void;

/** What the upgrade handler is told: whether it may still accept, and the origin rule. */
export interface UpgradeContext {
  readonly accepting: boolean;
  isAllowedOrigin(origin: string): boolean;
  /** The socket now carries a long-lived protocol: shutdown gives it the grace. */
  owe(socket: Duplex): void;
}

export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer, ctx: UpgradeContext) => void;

export interface ListenerOptions {
  readonly host: string;
  readonly port: number;
  /** Origins allowed besides the server's own. */
  readonly allow_origins: readonly string[];
  /** How long close() lets owed sockets finish. Default 0: cut at once. */
  readonly shutdown_grace_ms?: number;
  readonly logger: Logger;
  /** Plain HTTP requests. Without one, every plain request is 426 Upgrade Required. */
  readonly onRequest?: RequestHandler;
  readonly onUpgrade: UpgradeHandler;
  /** Runs first in close(), once the port is closed: the upgrade side's goodbyes (close frames). */
  readonly onClosing?: () => void;
  /** Runs once every socket is gone. */
  readonly onClosed?: () => void;
}

export interface Listener {
  readonly host: string;
  readonly port: number;
  /** Takes no more connections: the port closes and sockets that never upgraded are destroyed. Idempotent. */
  stopAccepting(): void;
  /** Stops accepting, waits up to the grace for every socket to end, then destroys (and logs) the rest. Idempotent. */
  close(): Promise<void>;
}

/** True for addresses only this machine can reach (the whole 127.0.0.0/8, ::1, localhost). */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** Logged (with `peers` and `grace_ms`) when a shutdown deadline cuts peers still reading. */
export const CUT_MESSAGE = 'shutdown deadline passed: cutting peers that did not finish reading';

export async function listen(opts: ListenerOptions): Promise<Listener> {
  const grace = opts.shutdown_grace_ms ?? 0;
  let allowed = new Set<string>();
  const isAllowedOrigin = (origin: string) => allowed.has(origin.toLowerCase());
  // Every accepted TCP socket, upgraded or not: shutdown must be able to reach each one (the HTTP
  // server's own close() waits for them, however long a peer keeps one open).
  const sockets = new Set<Duplex>();
  const owed = new WeakSet<Duplex>();
  const busy = new Set<Duplex>();
  let emptied: (() => void) | undefined;
  let accepting = true;

  const http = createServer((req, res) => {
    if (!opts.onRequest) {
      res.writeHead(426, { 'Content-Type': 'text/plain', Upgrade: 'websocket' });
      res.end('Upgrade Required');
      return;
    }
    // A request in flight is owed its answer: shutdown drops only idle sockets. Once shutdown
    // began, a socket whose answer is out is ended (no keep-alive holds the process).
    const socket = req.socket;
    busy.add(socket);
    res.on('close', responseClosed);
    opts.onRequest(req, res, contextOf(socket));
  });
  /** A response is done with (its 'close', once): one function for every response, not a closure each. */
  function responseClosed(this: ServerResponse): void {
    const socket = this.req.socket;
    busy.delete(socket);
    if (!accepting) socket.end();
  }
  // One context per connection, made on its first request: an object literal with a getter is
  // defined at run time, and making one per request was measurable (bench: http.steer).
  const contexts = new WeakMap<Duplex, ListenerContext>();
  const contextOf = (socket: Duplex): ListenerContext => {
    let ctx = contexts.get(socket);
    if (ctx === undefined) {
      ctx = {
        isAllowedOrigin,
        get accepting() {
          return accepting;
        },
        owe: () => owed.add(socket),
      };
      contexts.set(socket, ctx);
    }
    return ctx;
  };
  // An idle keep-alive socket is closed by the client first (undici after 4 s, browsers later):
  // a server that closes first races a request the client is already sending on it.
  http.keepAliveTimeout = 65_000;
  http.headersTimeout = 66_000;
  http.on('connection', (socket: Duplex) => {
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      if (sockets.size === 0) emptied?.();
    });
  });
  const upgradeCtx: UpgradeContext = {
    get accepting() {
      return accepting;
    },
    isAllowedOrigin,
    owe: (socket) => owed.add(socket),
  };
  http.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => opts.onUpgrade(req, socket, head, upgradeCtx));

  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(opts.port, opts.host, () => {
      http.off('error', reject);
      resolve();
    });
  });
  // A TCP listener's address is an AddressInfo (a string only for pipes).
  const address = http.address();
  const port = typeof address === 'object' && address !== null ? address.port : opts.port;
  const hostForUrl = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  const own = [`http://${hostForUrl}:${port}`];
  if (isLoopback(opts.host)) own.push(`http://localhost:${port}`, `http://127.0.0.1:${port}`, `http://[::1]:${port}`);
  allowed = new Set([...own, ...opts.allow_origins].map((o) => o.toLowerCase().replace(/\/$/, '')));

  let portClosed: Promise<void> | undefined;
  const stopAccepting = () => {
    if (!accepting) return;
    accepting = false;
    portClosed = new Promise<void>((resolve) => http.close(() => resolve()));
    for (const socket of sockets) if (!owed.has(socket) && !busy.has(socket)) socket.destroy();
  };

  let closing: Promise<void> | undefined;
  const close = async (): Promise<void> => {
    stopAccepting();
    opts.onClosing?.();
    const allEnded = new Promise<void>((resolve) => {
      if (sockets.size === 0) resolve();
      else emptied = resolve;
    });
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'cut'>((resolve) => {
      timer = setTimeout(() => resolve('cut'), grace);
    });
    const outcome = await Promise.race([allEnded, deadline]);
    clearTimeout(timer);
    if (outcome === 'cut' && sockets.size > 0) {
      opts.logger.warn({ peers: sockets.size, grace_ms: grace }, CUT_MESSAGE);
      for (const socket of sockets) socket.destroy();
    }
    await allEnded;
    opts.onClosed?.();
    await portClosed;
  };

  return { host: hostForUrl, port, stopAccepting, close: () => (closing ??= close()) };
}
