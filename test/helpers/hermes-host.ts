// A host that behaves like hermes-agent's shared TypeScript client (its JsonRpcGatewayClient over
// a WebSocket, its JsonRpcRequestChannel over stdio), written from the facts of hermes' published
// contract, not from its code:
// - dials `ws://HOST:PORT/api/ws?token=<url-encoded T>` (no header), or speaks NDJSON over stdio;
// - the first frame must be the `gateway.ready` event, or the connection is refused;
// - on ready it sends `client.capabilities {server_requests: true}` and ignores any error;
// - request ids are strings `r1, r2, …`; heartbeats are `gateway.ping` with ids `heartbeat-N`
//   (sent here on demand: tests use no timers);
// - it keeps a watermark per session (the highest `seq` seen) and the server's `replay_epoch`;
//   after a reconnect it holds each watermarked session's live events, asks
//   `session.events.since {session_id, last_seen}` for each, dispatches the replayed events newer
//   than the watermark, then the held ones newer than that; a replay error is swallowed (hermes:
//   "replay is an optimisation"); a new epoch clears every watermark;
// - a frame that is not a JSON object is ignored; a server-to-client request is a violation here
//   (subrun must never send one).
// Every inbound frame also goes to `onFrame`, so a test can hold it to hermes' shapes.
import type { Readable, Writable } from 'node:stream';
import WebSocket from 'ws';
import { Inbox, WAIT_MS } from './process.ts';

export interface HermesEvent {
  readonly type: string;
  readonly session_id?: string;
  readonly seq?: number;
  readonly payload?: Record<string, unknown>;
  /** Set by the client on events it got through a replay (hermes tags them the same way). */
  readonly replayed?: boolean;
}

export interface Frame {
  readonly jsonrpc?: unknown;
  readonly id?: unknown;
  readonly method?: unknown;
  readonly params?: unknown;
  readonly result?: unknown;
  readonly error?: { code?: unknown; message?: unknown; data?: unknown };
}

/** An error reply, as hermes' client raises it: the message and the code passed through. */
export class GatewayError extends Error {
  readonly code: number | undefined;
  constructor(method: string, error: Frame['error']) {
    super(`${method}: ${String(error?.message ?? 'Hermes RPC failed')}`);
    this.code = typeof error?.code === 'number' ? error.code : undefined;
  }
}

/** One connection's wire: text out, text in, and its end. */
export interface HermesWire {
  send(text: string): void;
  /** Starts delivering: what arrived before (a frame right after the upgrade) comes first. */
  listen(onText: (text: string) => void, onEnd: () => void): void;
  /** Drops the connection at once (a dead socket, not a clean close). */
  drop(): void;
}

/** A wire's inbound side that keeps what arrives until someone listens. */
function buffered(): { text(t: string): void; end(): void; listen: HermesWire['listen'] } {
  let texts: string[] | undefined = [];
  let ended = false;
  let onText: ((t: string) => void) | undefined;
  let onEnd: (() => void) | undefined;
  return {
    text: (t) => (onText ? onText(t) : texts?.push(t)),
    end: () => (onEnd ? onEnd() : (ended = true)),
    listen(t, e) {
      onText = t;
      onEnd = e;
      for (const x of texts ?? []) t(x);
      texts = undefined;
      if (ended) e();
    },
  };
}

/** Dials hermes' URL (`/api/ws`, the token in the query, URL-encoded) like a browser would. */
export function hermesWsUrl(port: number, token: string, extra: Record<string, string> = {}): string {
  const qs = new URLSearchParams(extra);
  qs.set('token', token);
  return `ws://127.0.0.1:${port}/api/ws?${qs.toString()}`;
}

/** `origin`: what a browser or an Electron renderer sends (`null` from a file:// page). */
export function wsWire(url: string, origin?: string): Promise<HermesWire> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, origin === undefined ? {} : { headers: { Origin: origin } });
    const inbound = buffered();
    const wire: HermesWire = {
      send: (text) => ws.send(text),
      listen: inbound.listen,
      drop: () => ws.terminate(),
    };
    ws.on('message', (data, binary) => {
      if (!binary) inbound.text(String(data));
    });
    ws.once('close', () => inbound.end());
    ws.once('unexpected-response', (_req, res) => {
      res.resume();
      reject(new Error(`HTTP ${res.statusCode}`));
    });
    ws.once('error', reject);
    ws.once('open', () => {
      ws.on('error', () => undefined);
      resolve(wire);
    });
  });
}

/** NDJSON over a child's stdin/stdout (what hermes' TUI does with its gateway process). */
export function stdioWire(input: Writable, output: Readable): HermesWire {
  const inbound = buffered();
  const wire: HermesWire = {
    send: (text) => input.write(`${text}\n`),
    listen: inbound.listen,
    drop: () => input.end(),
  };
  // Bytes, not strings: another reader of the same stream (the process helper) wants Buffers.
  let buf = Buffer.alloc(0);
  output.on('data', (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    for (let nl = buf.indexOf(0x0a); nl >= 0; nl = buf.indexOf(0x0a)) {
      const line = buf.subarray(0, nl).toString('utf8');
      buf = buf.subarray(nl + 1);
      if (line.trim() !== '') inbound.text(line);
    }
  });
  output.once('end', () => inbound.end());
  return wire;
}

interface Pending {
  readonly method: string;
  readonly resolve: (result: unknown) => void;
  readonly reject: (err: Error) => void;
}

export class HermesHost {
  /** Every event dispatched to the host's handlers, in dispatch order (live, replayed, released). */
  readonly events = new Inbox<HermesEvent>('hermes host events');
  /** The highest seq dispatched per session. */
  readonly lastSeenSeq = new Map<string, number>();
  /** Things hermes' client would not survive or that subrun must never do. */
  readonly violations: string[] = [];
  /** Replay errors the client swallowed, as hermes' does (method, code). */
  readonly swallowed: { session_id: string; code: number | undefined }[] = [];
  /** The last replay answer per session (a host of the newer generation reads `truncated`). */
  readonly replays = new Map<string, Record<string, unknown>>();
  replayEpoch: string | undefined;
  ready: HermesEvent | undefined;
  /** Called with every inbound frame and the method it answers (for a response). */
  onFrame: (frame: Frame, answers: string | undefined) => void = () => undefined;

  #wire: HermesWire | undefined;
  #pending = new Map<string, Pending>();
  #next = 0;
  #pings = 0;
  /** Sessions whose live events are parked while their replay runs. */
  #holds = new Map<string, HermesEvent[]>();

  /** Connects over `wire` and resolves once `gateway.ready` was the first frame (and replays ran). */
  async connect(wire: HermesWire, opts: { replay?: boolean } = {}): Promise<void> {
    this.#wire = wire;
    let first = true;
    const ready = new Promise<void>((resolve, reject) => {
      const onEnd = () => {
        // A dropped wire may report its end after the next one connected: not that one's calls.
        if (this.#wire !== undefined && this.#wire !== wire) return;
        for (const p of this.#pending.values()) p.reject(new Error('WebSocket closed'));
        this.#pending.clear();
        reject(new Error('closed before gateway.ready'));
      };
      const onText = (text: string) => {
        let frame: unknown;
        try {
          frame = JSON.parse(text);
        } catch {
          return;
        }
        // hermes' client ignores anything but one JSON object (a batch array included).
        if (typeof frame !== 'object' || frame === null || Array.isArray(frame)) return;
        const f = frame as Frame;
        const answers = typeof f.id === 'string' ? this.#pending.get(f.id)?.method : undefined;
        this.onFrame(f, answers);
        if (first) {
          first = false;
          const ev = f.method === 'event' ? (f.params as HermesEvent | undefined) : undefined;
          if (ev?.type !== 'gateway.ready') {
            this.violations.push(`first frame was not gateway.ready: ${text.slice(0, 200)}`);
            wire.drop();
            reject(new Error('first frame was not gateway.ready'));
            return;
          }
          this.#onReady(ev);
          resolve();
          return;
        }
        this.#handle(f);
      };
      wire.listen(onText, onEnd);
    });
    await withTimeout(ready, WAIT_MS, 'gateway.ready');
    // What the channel does on every ready frame; an error is ignored (an older backend).
    void this.request('client.capabilities', { server_requests: true }).catch(() => undefined);
    if (opts.replay ?? true) await Promise.all([...this.lastSeenSeq.keys()].map((sid) => this.replay(sid)));
  }

  /** Sends a request; resolves with its result, rejects with a GatewayError. */
  request<T = Record<string, unknown>>(method: string, params: Record<string, unknown> = {}, id = `r${++this.#next}`): Promise<T> {
    const wire = this.#wire;
    if (!wire) return Promise.reject(new Error('gateway not connected'));
    const p = new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { method, resolve: resolve as (r: unknown) => void, reject });
    });
    wire.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    return withTimeout(p, WAIT_MS, `the reply to ${method}`);
  }

  /** One heartbeat, as the channel sends it every 15 s once ready says `heartbeat: true`. */
  heartbeat(): Promise<unknown> {
    if (this.ready?.payload?.heartbeat !== true) return Promise.reject(new Error('the server did not advertise a heartbeat'));
    return this.request('gateway.ping', {}, `heartbeat-${++this.#pings}`);
  }

  /**
   * Fills one session's gap: holds its live events, asks for everything after the watermark,
   * dispatches what is newer, then what was held. `before` runs inside the hold (a host that
   * re-binds first, e.g. session.resume, so nothing arriving meanwhile is dispatched out of order).
   */
  async replay(session_id: string, before?: () => Promise<unknown>, extra: Record<string, unknown> = {}): Promise<void> {
    const held: HermesEvent[] = [];
    this.#holds.set(session_id, held);
    try {
      await before?.();
      let r: Record<string, unknown>;
      try {
        r = await this.request('session.events.since', { session_id, last_seen: this.lastSeenSeq.get(session_id) ?? 0, ...extra });
      } catch (err) {
        this.swallowed.push({ session_id, code: err instanceof GatewayError ? err.code : undefined });
        return;
      }
      this.replays.set(session_id, r);
      const epoch = r.epoch;
      if (typeof epoch === 'string' && epoch !== '' && this.replayEpoch !== undefined && epoch !== this.replayEpoch) {
        this.#adoptEpoch(epoch);
        return;
      }
      if (Array.isArray(r.events)) for (const e of r.events as HermesEvent[]) if (e?.type) this.#dispatchIfNewer({ ...e, replayed: true });
    } finally {
      this.#holds.delete(session_id);
      for (const e of held) this.#dispatchIfNewer(e);
    }
  }

  /** Drops the connection as a dead network would (no close handshake). */
  drop(): void {
    this.#wire?.drop();
    this.#wire = undefined;
  }

  #onReady(ev: HermesEvent): void {
    this.ready = ev;
    const epoch = ev.payload?.replay_epoch;
    if (typeof epoch === 'string' && epoch !== '') this.#adoptEpoch(epoch);
  }

  #adoptEpoch(epoch: string): void {
    // Another epoch: the server restarted and every watermark is void.
    if (this.replayEpoch !== undefined && this.replayEpoch !== epoch) this.lastSeenSeq.clear();
    this.replayEpoch = epoch;
  }

  #handle(f: Frame): void {
    if (f.method === 'event') {
      const ev = f.params as HermesEvent;
      if (ev?.session_id && typeof ev.seq === 'number') {
        const held = this.#holds.get(ev.session_id);
        if (held) return void held.push(ev);
      }
      this.#dispatchIfNewer(ev);
      return;
    }
    if (typeof f.id === 'string' && typeof f.method === 'string') {
      this.violations.push(`server-to-client request ${f.method}`);
      return;
    }
    const p = typeof f.id === 'string' ? this.#pending.get(f.id) : undefined;
    if (!p) return;
    this.#pending.delete(f.id as string);
    if (f.error) p.reject(new GatewayError(p.method, f.error));
    else p.resolve(f.result);
  }

  #dispatchIfNewer(ev: HermesEvent): void {
    const sid = ev.session_id;
    if (sid && typeof ev.seq === 'number') {
      if (ev.seq <= (this.lastSeenSeq.get(sid) ?? 0)) return;
      this.lastSeenSeq.set(sid, ev.seq);
    }
    this.events.push(ev);
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<never>((_r, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
    }),
  ]);
}
