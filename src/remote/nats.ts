// The NATS connection of the control plane and of each worker: checked at start (reachable, JetStream,
// the steer stream) so a bad server is one line and exit 2; afterwards it reconnects for ever.
import { connect, errors, RequestError, type Msg, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { systemClock, type Clock } from '../clock.ts';
import { STEER_MAX_AGE_NS, STEER_STREAM, subjects } from './wire.ts';
import { Latch, within } from './wait.ts';
import { NoAnswerError, Requests, type RequestOptions } from './requests.ts';

/** Why NATS could not be used at start: the CLI prints the message as its one line and exits 2. */
export class NatsStartError extends Error {
  override readonly name = 'NatsStartError';
}

export interface NatsLink {
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  /** False while the client is disconnected and reconnecting. */
  readonly connected: boolean;
  /** Milliseconds since the Unix epoch when the current outage began; undefined when connected. */
  readonly downSince: number | undefined;
  /** Resolves at once when connected, or on reconnect; false if the outage passes `bound_ms` first. */
  whenUp(bound_ms: number): Promise<boolean>;
  /** A request on the link's own inbox (requests.ts: no Error made per request); NoAnswerError when none comes. */
  request(subject: string, data: Uint8Array | string, opts: RequestOptions): Promise<Msg>;
  /** A JetStream publish resolved once stored (requests.ts). */
  publishAck(subject: string, data: Uint8Array | string, opts: { readonly msgID: string; readonly timeout: number }): Promise<void>;
  close(): Promise<void>;
}

/** Two minutes: a steer retried within it is deduplicated by its steer_id. */
const DUPLICATE_WINDOW_NS = 120_000_000_000;

export async function openNats(url: string, name: string, clock: Clock = systemClock): Promise<NatsLink> {
  let nc: NatsConnection;
  try {
    // timeout bounds the handshake (a port that accepts TCP but never speaks NATS).
    nc = await connect({
      servers: url,
      name,
      timeout: 2000,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      reconnectJitter: 50,
      pingInterval: 2000,
      maxPingOut: 2,
      // No stack captured per request (every assignment, receipt, publish ack and JetStream call
      // made one): measured as the largest single cost of a remote child on the control plane.
      noAsyncTraces: true,
    });
  } catch (err) {
    throw new NatsStartError(`cannot reach NATS at ${url}: ${describe(err)}`);
  }
  let jsm: JetStreamManager;
  try {
    jsm = await jetstreamManager(nc);
    await ensureSteerStream(jsm);
  } catch (err) {
    await nc.close().catch(() => undefined);
    throw new NatsStartError(`NATS at ${url} has no usable JetStream (start nats-server with -js): ${describe(err)}`);
  }
  const js = jetstream(nc);
  const requests = new Requests(nc);
  let downSince: number | undefined;
  // Opened true on reconnect, false on close; a new one for each outage.
  let up = new Latch<boolean>();
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect' && downSince === undefined) {
        downSince = clock.now();
        up = new Latch<boolean>();
      } else if (s.type === 'reconnect') {
        downSince = undefined;
        up.open(true);
      }
    }
  })().catch(() => undefined);
  return {
    nc,
    js,
    jsm,
    get connected() {
      return downSince === undefined && !nc.isClosed();
    },
    get downSince() {
      return downSince;
    },
    async whenUp(bound_ms) {
      if (downSince === undefined) return !nc.isClosed();
      const left = downSince + bound_ms - clock.now();
      if (left <= 0) return false;
      return (await within(clock, left, up.promise)) ?? false;
    },
    request: (subject, data, opts) => requests.request(subject, data, opts),
    publishAck: (subject, data, opts) => requests.publishAck(subject, data, opts),
    close: async () => {
      up.open(false);
      if (!nc.isClosed()) await nc.drain().catch(() => nc.close());
    },
  };
}

async function ensureSteerStream(jsm: JetStreamManager): Promise<void> {
  const config = {
    name: STEER_STREAM,
    subjects: [subjects.steers],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    duplicate_window: DUPLICATE_WINDOW_NS,
    // Direct get: the loss accounting reads what is left in a child's mailbox without a consumer
    // (a work-queue subject admits only one).
    allow_direct: true,
    max_age: STEER_MAX_AGE_NS,
  };
  let info;
  try {
    info = await jsm.streams.info(STEER_STREAM);
  } catch {
    await jsm.streams.add(config);
    return;
  }
  // A stream made by an older release has no max age: it gets one.
  if (info.config.max_age !== STEER_MAX_AGE_NS) await jsm.streams.update(STEER_STREAM, { max_age: STEER_MAX_AGE_NS });
}

/** A request that got no answer within its timeout. */
export function isTimeout(err: unknown): boolean {
  if (err instanceof NoAnswerError) return err.reason === 'timeout';
  return err instanceof errors.TimeoutError || (err instanceof RequestError && err.cause instanceof errors.TimeoutError);
}

/**
 * A request nobody is subscribed to answer (the subject's service is gone). A JetStream publish
 * reports it wrapped (JetStreamNotEnabled, the RequestError as its cause): no stream took the
 * subject, so the message surely was not stored.
 */
export function isNoResponders(err: unknown): boolean {
  if (err instanceof NoAnswerError) return err.reason === 'no_responders';
  if (err instanceof RequestError) return err.isNoResponders();
  return err instanceof Error && err.cause instanceof RequestError && err.cause.isNoResponders();
}

export function describe(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}
