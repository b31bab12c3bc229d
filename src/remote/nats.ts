// Connecting to NATS for the control plane and the workers: one connection each, checked at start
// (reachable, JetStream enabled, the steer stream in place) so a bad URL or a server without
// JetStream is one line and exit 2, never a hang. Once up, the client reconnects for ever with a
// short backoff; the connection's state is tracked for the outage bound.
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType, type ConsumerConfig, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { CONSUMER_INACTIVE_NS, consumerName, STEER_MAX_AGE_NS, STEER_STREAM, subjects } from './wire.ts';

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
  close(): Promise<void>;
}

/** Two minutes: a steer retried within it is deduplicated by its steer_id. */
const DUPLICATE_WINDOW_NS = 120_000_000_000;

export async function openNats(url: string, name: string): Promise<NatsLink> {
  let nc: NatsConnection;
  try {
    // timeout bounds the handshake (a port that accepts TCP but never speaks NATS).
    nc = await connect({ servers: url, name, timeout: 2000, maxReconnectAttempts: -1, reconnectTimeWait: 250, reconnectJitter: 50, pingInterval: 2000, maxPingOut: 2 });
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
  let downSince: number | undefined;
  let waiters: Array<(up: boolean) => void> = [];
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') downSince ??= Date.now();
      else if (s.type === 'reconnect') {
        downSince = undefined;
        for (const w of waiters.splice(0)) w(true);
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
    whenUp(bound_ms) {
      if (downSince === undefined) return Promise.resolve(!nc.isClosed());
      const left = downSince + bound_ms - Date.now();
      if (left <= 0) return Promise.resolve(false);
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          waiters = waiters.filter((w) => w !== wake);
          resolve(false);
        }, left);
        timer.unref();
        const wake = (up: boolean) => {
          clearTimeout(timer);
          resolve(up);
        };
        waiters.push(wake);
      });
    },
    close: async () => {
      for (const w of waiters.splice(0)) w(false);
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

/** The config of a child's mailbox consumer; the control plane and the worker make it alike. */
export function mailboxConsumer(child: string): Partial<ConsumerConfig> {
  return {
    durable_name: consumerName(child),
    filter_subject: subjects.steer(child),
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    // A lost worker's consumer is deleted at once; this only bounds a stuck fetch.
    ack_wait: 3_600_000_000_000,
    max_deliver: -1,
    inactive_threshold: CONSUMER_INACTIVE_NS,
  };
}

export function isNotFound(err: unknown): boolean {
  const code = (err as { api_error?: { err_code?: unknown } } | null)?.api_error?.err_code;
  return code === 10014 || code === 10059;
}

export function describe(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}
