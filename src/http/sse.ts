// The event stream of one session over Server-Sent Events. Each stream is an event sink in the
// session's slot, so it gets exactly what an attached WebSocket gets: every envelope, as the same
// text, in seq order. What comes first is decided in the same synchronous step as the attach, so
// nothing can fall between it and the live events:
// - no cursor: `snapshot` {seq, subagents} of that instant, then every event with a higher seq;
// - a cursor the replay ring still covers: every event after it, then live (no gap, no duplicate);
// - a cursor older than the ring (or from the future: another server's): `reset` with the snapshot.
// A consumer that stops reading is dropped by the WebSocket's rule (server/backlog.ts): over the
// outbound bound and draining nothing for a check interval, or past the ceiling. One keep-alive
// timer serves every stream (a comment line), so an idle stream costs no timer of its own.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Backlog } from '../server/backlog.ts';
import type { EventSink, ServerHub } from '../server/hub.ts';
import type { Logger } from '../log.ts';
import type { ListenerContext } from '../server/listener.ts';
import type { Query } from './route-table.ts';

export interface SseOptions {
  /** A comment line this often keeps proxies from closing an idle stream. Default 15 s. */
  readonly keepalive_ms?: number;
  /** Unsent bytes past which a stream that drains nothing is dropped (server/backlog.ts). Default 8 MiB. */
  readonly max_outbound_bytes?: number;
  /** How long a stream over the bound may drain nothing. Default 2 s. */
  readonly stall_ms?: number;
  /** The reconnection delay sent to browsers (`retry:`). Default 2000 ms. */
  readonly retry_ms?: number;
}

const frame = (seq: number, type: string, data: string) => `id: ${seq}\nevent: ${type}\ndata: ${data}\n\n`;

// The server hands every stream of a session the same envelope text, one stream after another: the
// frame is built once for all of them (bench/cases/http.ts).
let lastText: string | undefined;
let lastFrame = '';
function sharedFrame(seq: number, type: string, text: string): string {
  if (text !== lastText) {
    lastText = text;
    lastFrame = frame(seq, type, text);
  }
  return lastFrame;
}

/**
 * The last frame of a stream the server ended (the session closed, the server shut down): a
 * comment, which EventSource ignores. A close-delimited body cannot say it is complete, so a raw
 * client tells a clean end from a cut (a dropped consumer, a crash) by it (docs/http.md).
 */
const END_FRAME = ': end\n\n';

class Stream implements FrameSink {
  readonly #res: ServerResponse;
  readonly #backlog: Backlog;
  #corked = false;
  #ended = false;
  readonly #uncork = () => {
    this.#corked = false;
    this.#res.uncork();
  };

  constructor(res: ServerResponse, maxOut: number, stallMs: number | undefined, logger: Logger) {
    this.#res = res;
    this.#backlog = new Backlog({
      max_bytes: maxOut,
      check_ms: stallMs,
      buffered: () => res.writableLength,
      drop: (reason, buffered) => {
        logger.warn(
          { buffered, max_outbound_bytes: maxOut },
          reason === 'stalled' ? 'dropping an event stream consumer that stopped reading' : 'dropping an event stream consumer too far behind',
        );
        this.#ended = true;
        res.destroy();
      },
    });
    res.once('close', () => this.#backlog.close());
  }

  event(seq: number, type: string, text: string): void {
    this.write(sharedFrame(seq, type, text));
  }

  write(chunk: string): void {
    if (this.#ended || this.#res.destroyed) return;
    this.#backlog.send(() => {
      // Every frame of one turn leaves in one socket write, as on the WebSocket.
      if (!this.#corked) {
        this.#corked = true;
        this.#res.cork();
        process.nextTick(this.#uncork);
      }
      this.#res.write(chunk);
    });
  }

  close(): void {
    if (this.#ended) return;
    this.#ended = true;
    if (!this.#res.destroyed) this.#res.write(END_FRAME);
    if (this.#corked) this.#uncork();
    this.#res.end();
  }
}

/** The cursor of a resuming consumer: `Last-Event-ID`, else `?last_event_id=`; NaN if malformed. */
export function cursorOf(req: IncomingMessage, query: Query): number | undefined {
  const raw = req.headers['last-event-id'] ?? query.get('last_event_id') ?? undefined;
  if (raw === undefined) return undefined;
  const text = String(raw).trim();
  return /^\d{1,15}$/.test(text) ? Number(text) : Number.NaN;
}

export class SseHub {
  readonly #server: ServerHub;
  readonly #logger: Logger;
  readonly #keepalive: number;
  readonly #maxOut: number;
  readonly #stallMs: number | undefined;
  readonly #retry: number;
  readonly #streams = new Set<Stream>();
  #timer: NodeJS.Timeout | undefined;

  constructor(server: ServerHub, logger: Logger, opts: SseOptions = {}) {
    this.#server = server;
    this.#logger = logger;
    this.#keepalive = opts.keepalive_ms ?? 15_000;
    this.#maxOut = opts.max_outbound_bytes ?? 8 * 1024 * 1024;
    this.#stallMs = opts.stall_ms;
    this.#retry = opts.retry_ms ?? 2000;
  }

  get size(): number {
    return this.#streams.size;
  }

  /**
   * Opens the stream if `session_key` is the session's; returns false (nothing written) if not.
   * `cursor` must be a non-negative integer or undefined (the caller answers 400 otherwise).
   */
  open(res: ServerResponse, ctx: ListenerContext, session_id: string, session_key: unknown, cursor: number | undefined): boolean {
    const stream = new Stream(res, this.#maxOut, this.#stallMs, this.#logger);
    const opened = subscribe(this.#server, session_id, session_key, cursor, stream, () => {
      ctx.owe();
      // The stream is the connection's last response: its body ends with the connection (no
      // chunk framing), so each frame is one chunk of the socket's write queue instead of four
      // (bench: http.sse). A clean end says so in its last frame (END_FRAME).
      res.useChunkedEncodingByDefault = false;
      res.writeHead(200, {
        'Content-Type': 'text/event-stream; charset=utf-8',
        'Cache-Control': 'no-store',
        'X-Accel-Buffering': 'no',
        'X-Content-Type-Options': 'nosniff',
      });
      res.socket?.setNoDelay(true);
      stream.write(`retry: ${this.#retry}\n\n`);
    });
    if (opened === undefined) return false;
    this.#streams.add(stream);
    this.#tick();
    res.once('close', () => {
      this.#streams.delete(stream);
      this.#server.detachSink(opened);
      this.#tick();
    });
    return true;
  }

  #tick(): void {
    if (this.#streams.size > 0 && this.#timer === undefined) {
      this.#timer = setInterval(() => {
        for (const s of this.#streams) s.write(': keep-alive\n\n');
      }, this.#keepalive);
      this.#timer.unref();
    } else if (this.#streams.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }
}

/** Where a subscription writes its frames (a response; a string in tests). */
export interface FrameSink extends EventSink {
  write(chunk: string): void;
}

/**
 * The synchronous core of a stream: puts `sink` in the session's slot, calls `start` (headers),
 * then writes what comes first (snapshot, replay or reset). Returns the sink's id, or undefined if
 * the key is wrong (nothing written). Nothing in here yields, so no event can fall between what it
 * writes and the live events that follow.
 */
export function subscribe(
  server: ServerHub,
  session_id: string,
  session_key: unknown,
  cursor: number | undefined,
  sink: FrameSink,
  start: () => void = () => undefined,
): string | undefined {
  let attached;
  try {
    attached = server.attachSink(session_id, session_key, sink);
  } catch {
    return undefined;
  }
  const { id, session } = attached;
  start();
  const snapshot = () => {
    const subagents = server.runtime.scoped.list(server.sessions.scopeOf(session), { include_finished: true });
    return JSON.stringify({ seq: session.committed, subagents });
  };
  if (cursor === undefined) {
    sink.write(frame(session.committed, 'snapshot', snapshot()));
  } else {
    // A durable server hands out only what is written; the sink gets the rest as it is (hub.ts).
    const r = session.replay.since(cursor, session.committed);
    if (r.truncated || cursor > r.latest_seq) sink.write(frame(session.committed, 'reset', snapshot()));
    else for (const e of r.events) sink.write(frame(e.seq, eventType(e.text), e.text));
  }
  return id;
}

/** The `type` of a kept envelope, which always begins `{"type":"…"`. */
function eventType(text: string): string {
  const end = text.indexOf('"', 9);
  return text.slice(9, end);
}
