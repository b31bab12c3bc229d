// One NATS serves one control plane: the leader holds a lease, a key in a JetStream KV bucket that it
// rewrites every lease_ms/3 with a compare-and-set on the revision it last wrote. The server is 2.9
// (no per-key TTL), so "lapsed" is read off the entry's server-side `created` time: a key nobody
// rewrote for lease_ms is free. The revision is the fencing token: a write that finds another
// revision than its own lost the lease, and nothing else may be acted on after that.
import { randomBytes } from 'node:crypto';
import { readlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import type { NatsConnection } from '@nats-io/transport-node';
import { JetStreamApiCodes, JetStreamApiError, StorageType } from '@nats-io/jetstream';
import { Kvm, KvWatchInclude, type KV, type KvEntry } from '@nats-io/kv';
import { z } from 'zod';
import { systemClock, type Clock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import { describe, NatsStartError, type NatsLink } from '../nats.ts';
import { every, Latch, within } from '../wait.ts';

export const LEASE_BUCKET = 'SUBRUN_LEASE';
export const LEASE_KEY = 'control';
export const DEFAULT_LEASE_MS = 3000;

const recordSchema = z.object({
  /** Random per process: "a revision it did not write" is one whose record names another holder. */
  holder: z.string(),
  pid: z.number().int(),
  host: z.string(),
  /** The pid namespace (Linux): a pid on a same-named host means the same process only within it. */
  pid_ns: z.string().optional(),
  listener: z.string().optional(),
  /** The holder's own clock: for people reading the key, never for deciding (created does that). */
  renewed_at: z.number(),
});
export type LeaseRecord = z.infer<typeof recordSchema>;

/** The key as the lease logic reads it. */
export interface Seen {
  readonly revision: number;
  /** The server's time of the write, in ms since the epoch. */
  readonly created: number;
  /** The last write was a delete (a clean release) or a purge. */
  readonly deleted: boolean;
  /** Undefined when deleted, or when the value is not a record (then only the lapse frees it). */
  readonly record: LeaseRecord | undefined;
}

/** Who is asking: its holder id, and how it tells that a holder on its own host is dead. */
export interface Self {
  readonly holder: string;
  readonly host: string;
  readonly pid_ns: string | undefined;
  alive(pid: number): boolean;
}

/** Why the key could be taken: there was none, it was released, it lapsed, or its holder is dead. */
export type Previous = 'none' | 'released' | 'lapsed' | 'holder dead';

export type Decision =
  | { readonly take: 'create'; readonly previous: Previous }
  | { readonly take: 'update'; readonly revision: number; readonly previous: Previous }
  | { readonly take: false; readonly holder: LeaseRecord | undefined; readonly lapses_at: number };

/** What to do about the key as seen at `now` (the asker's clock against the server's `created`). */
export function decide(seen: Seen | undefined, now: number, lease_ms: number, self: Self): Decision {
  if (seen === undefined) return { take: 'create', previous: 'none' };
  // An update on the delete marker's revision: two askers cannot both win it.
  if (seen.deleted) return { take: 'update', revision: seen.revision, previous: 'released' };
  if (now - seen.created > lease_ms) return { take: 'update', revision: seen.revision, previous: 'lapsed' };
  const r = seen.record;
  // A leader SIGKILLed and started again on the same machine need not wait out its own lease. A
  // live pid (or one reused since) only makes it wait: the safe side.
  if (r && r.holder !== self.holder && r.host === self.host && r.pid_ns === self.pid_ns && !self.alive(r.pid)) {
    return { take: 'update', revision: seen.revision, previous: 'holder dead' };
  }
  return { take: false, holder: r, lapses_at: seen.created + lease_ms };
}

/** "pid 12 on host (ws://...)" */
export function holderText(r: LeaseRecord | undefined): string {
  if (!r) return 'an unknown holder';
  return `pid ${r.pid} on ${r.host}${r.listener === undefined ? '' : ` (${r.listener})`}`;
}

/** A live leader holds the lease and this process is no standby: the CLI prints it and exits 2. */
export class LeaseHeldError extends Error {
  override readonly name = 'LeaseHeldError';
  readonly holder: LeaseRecord | undefined;

  constructor(holder: LeaseRecord | undefined, renewed_ms_ago: number) {
    super(
      `another control plane leads on this NATS: ${holderText(holder)}, lease renewed ${Math.max(0, Math.round(renewed_ms_ago))} ms ago; ` +
        'stop it, or start this one with --standby to take over when its lease lapses',
    );
    this.holder = holder;
  }
}

interface LeaseBase {
  /** A key not rewritten for this long is free. Default 3000. */
  readonly lease_ms?: number;
  /** Default: made up (random). */
  readonly holder?: string;
  readonly listener?: string;
  /** Wait for a live leader's lease to lapse instead of throwing LeaseHeldError. */
  readonly standby?: boolean;
  readonly logger: Logger;
  readonly clock?: Clock;
  /** Called once when the lease is taken over or could not be renewed for lease_ms; one line. */
  readonly onLost: (why: string) => void;
}
export type LeaseOptions = LeaseBase & ({ readonly link: NatsLink } | { readonly nc: NatsConnection });

export class Lease {
  readonly holder: string;
  readonly lease_ms: number;
  readonly #kv: KV;
  readonly #self: Self;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #onLost: (why: string) => void;
  readonly #period: number;
  #revision: number;
  #listener: string | undefined;
  #state: 'held' | 'released' | 'lost' = 'held';
  #inFlight: Promise<void> | undefined;
  #failing = false;
  #stopTick: () => void = noop;
  #deadline: unknown;

  private constructor(kv: KV, self: Self, lease_ms: number, o: LeaseBase, held: { readonly revision: number; readonly sentAt: number }) {
    this.#kv = kv;
    this.#self = self;
    this.holder = self.holder;
    this.lease_ms = lease_ms;
    this.#period = periodOf(lease_ms);
    this.#clock = o.clock ?? systemClock;
    this.#logger = o.logger;
    this.#onLost = o.onLost;
    this.#revision = held.revision;
    this.#listener = o.listener;
    const sentAt = held.sentAt;
    this.#armDeadline(sentAt);
    this.#stopTick = every(this.#clock, this.#period, () => this.#tick());
  }

  /** The revision of the last write that kept the lease: the fencing token. */
  get revision(): number {
    return this.#revision;
  }

  /** Takes the lease (waiting, with `standby`, for a live leader's to lapse). */
  static async acquire(o: LeaseOptions): Promise<Lease> {
    const lease_ms = o.lease_ms ?? DEFAULT_LEASE_MS;
    const clock = o.clock ?? systemClock;
    const self = localSelf(o.holder ?? `cp_${randomBytes(6).toString('hex')}`);
    const nc = 'link' in o ? o.link.nc : o.nc;
    let kv: KV;
    try {
      kv = await new Kvm(nc).create(LEASE_BUCKET, { history: 1, storage: StorageType.File });
    } catch (err) {
      throw new NatsStartError(`NATS cannot hold the control plane's lease (KV bucket ${LEASE_BUCKET}): ${describe(err)}`);
    }
    const standby = o.standby === true;
    const waker = standby ? await Waker.open(kv, o.logger) : undefined;
    // A standby's timers are the system clock's, which keep nothing alive by themselves.
    const release = clock.keepAlive?.();
    let waiting = false;
    try {
      for (;;) {
        let d: Decision;
        let seen: Seen | undefined;
        try {
          seen = await read(kv);
          d = decide(seen, clock.now(), lease_ms, self);
          if (d.take !== false) {
            const sentAt = clock.now();
            const value = encode({ holder: self.holder, pid: process.pid, host: self.host, pid_ns: self.pid_ns, listener: o.listener, renewed_at: sentAt });
            const revision = d.take === 'create' ? await kv.create(LEASE_KEY, value) : await kv.update(LEASE_KEY, value, d.revision);
            const fields = { revision, previous: d.previous, lease_ms };
            if (standby) o.logger.warn(fields, 'took the lease: this control plane leads on this NATS');
            else o.logger.info(fields, 'took the lease: this control plane leads on this NATS');
            return new Lease(kv, self, lease_ms, o, { revision, sentAt });
          }
        } catch (err) {
          // Lost the race for a free key: someone else took it; read again.
          if (isCasFailure(err)) continue;
          if (!standby) throw new NatsStartError(`cannot take the control plane's lease on NATS: ${describe(err)}`);
          o.logger.debug({ err }, 'lease: NATS unavailable while standing by; trying again');
          await waker?.pause(clock, periodOf(lease_ms));
          continue;
        }
        if (!standby) throw new LeaseHeldError(d.holder, clock.now() - (seen?.created ?? 0));
        if (!waiting) {
          waiting = true;
          o.logger.warn(
            { holder_pid: d.holder?.pid, holder_host: d.holder?.host, holder_listener: d.holder?.listener, lease_ms },
            'standby: another control plane leads on this NATS; waiting for its lease to lapse',
          );
        }
        // Looked at again when the key changes (a release wakes it at once), when it would lapse,
        // and every period regardless (a missed watch message must not leave it waiting).
        await waker?.pause(clock, Math.min(periodOf(lease_ms), Math.max(1, d.lapses_at - clock.now() + 1)));
      }
    } finally {
      waker?.stop();
      release?.();
    }
  }

  /** Puts the listener into the record at once (hosts and a refused second plane read it there). */
  async announce(listener: string): Promise<void> {
    this.#listener = listener;
    await this.#inFlight;
    this.#tick();
    await this.#inFlight;
  }

  /** On clean shutdown: deletes the key if it is still ours, so a standby takes over at once. */
  async release(): Promise<void> {
    if (this.#state !== 'held') return;
    this.#state = 'released';
    this.#stop();
    // A renew in flight moves the revision: the delete must name the one it wrote.
    await this.#inFlight;
    try {
      await this.#kv.delete(LEASE_KEY, { previousSeq: this.#revision });
      this.#logger.info({ revision: this.#revision }, 'released the lease');
    } catch (err) {
      // Not ours any more, or NATS is gone: the key lapses on its own.
      this.#logger.warn({ err }, 'could not release the lease; it lapses by itself');
    }
  }

  #tick(): void {
    if (this.#state !== 'held' || this.#inFlight) return;
    this.#inFlight = this.#renew().finally(() => {
      this.#inFlight = undefined;
    });
  }

  async #renew(): Promise<void> {
    const sentAt = this.#clock.now();
    const { holder, host, pid_ns } = this.#self;
    const value = encode({ holder, pid: process.pid, host, pid_ns, listener: this.#listener, renewed_at: sentAt });
    try {
      // Bounded by the period, so one stuck request never holds back the next try.
      this.#revision = await this.#kv.update(LEASE_KEY, value, this.#revision, this.#period);
      this.#armDeadline(sentAt);
      this.#failing = false;
    } catch (err) {
      if (isCasFailure(err)) {
        await this.#whoHolds();
        return;
      }
      // Once per run of failures: the deadline is what ends it, this says why it may come.
      if (this.#failing) this.#logger.debug({ err }, 'lease: renew failed; trying again');
      else this.#logger.warn({ err, lease_ms: this.lease_ms }, 'lease: renew failed; trying again until the lease would lapse');
      this.#failing = true;
    }
  }

  /** A renew found another revision: ours whose ack was lost (adopt it), or someone else's (lost). */
  async #whoHolds(): Promise<void> {
    let seen: Seen | undefined;
    try {
      seen = await read(this.#kv);
    } catch {
      return;
    }
    if (seen && !seen.deleted && seen.record?.holder === this.holder) {
      this.#revision = seen.revision;
      return;
    }
    this.#lose(seen === undefined || seen.deleted ? 'the NATS lease was deleted by another process' : `the NATS lease was taken by ${holderText(seen.record)}`);
  }

  /**
   * lease_ms after the last renew that succeeded was sent, the key may lapse for the others. That
   * alone does not end this leader: in a NATS outage nobody can take the lease, and a leader cut
   * off from NATS cannot act on a worker either (every action goes through NATS). It keeps serving
   * and the next renew decides: its revision still there, it leads on; another's, it is fenced.
   */
  #armDeadline(sentAt: number): void {
    if (this.#state !== 'held') return;
    this.#clock.clearTimeout(this.#deadline);
    this.#deadline = this.#clock.setTimeout(
      () =>
        this.#logger.warn(
          { lease_ms: this.lease_ms },
          'lease: not renewed within the lease (NATS unreachable, or this process stalled); a standby may take over, the next renew will tell',
        ),
      sentAt + this.lease_ms - this.#clock.now(),
    );
  }

  #lose(why: string): void {
    if (this.#state !== 'held') return;
    this.#state = 'lost';
    this.#stop();
    this.#onLost(why);
  }

  #stop(): void {
    this.#stopTick();
    this.#clock.clearTimeout(this.#deadline);
  }
}

/** Wakes a standby when the key changes (a release), so it need not wait for its next look. */
class Waker {
  #latch = new Latch();
  readonly #stop: () => void;

  private constructor(stop: () => void) {
    this.#stop = stop;
  }

  static async open(kv: KV, logger: Logger): Promise<Waker> {
    try {
      const it = await kv.watch({ key: LEASE_KEY, include: KvWatchInclude.UpdatesOnly });
      const waker = new Waker(() => it.stop());
      void (async () => {
        for await (const _change of it) waker.#latch.open();
      })().catch(() => undefined);
      return waker;
    } catch (err) {
      // Without the watch it still looks every period.
      logger.debug({ err }, 'lease: no watch on the key; polling only');
      return new Waker(noop);
    }
  }

  async pause(clock: Clock, ms: number): Promise<void> {
    await within(clock, ms, this.#latch.promise);
    // Renewed before the caller reads again: a change after this wakes the next pause.
    this.#latch = new Latch();
  }

  stop(): void {
    this.#stop();
    this.#latch.open();
  }
}

async function read(kv: KV): Promise<Seen | undefined> {
  const e = await kv.get(LEASE_KEY);
  if (!e) return undefined;
  const deleted = e.operation !== 'PUT';
  return { revision: e.revision, created: e.created.getTime(), deleted, record: deleted ? undefined : parseRecord(e) };
}

function parseRecord(e: KvEntry): LeaseRecord | undefined {
  try {
    const r = recordSchema.safeParse(e.json());
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}

function encode(r: LeaseRecord): string {
  return JSON.stringify(r);
}

/** JetStream refused the write because the key is not at the revision it named. */
function isCasFailure(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamWrongLastSequence || err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}

function periodOf(lease_ms: number): number {
  return Math.max(10, Math.floor(lease_ms / 3));
}

function localSelf(holder: string): Self {
  let pid_ns: string | undefined;
  try {
    pid_ns = readlinkSync('/proc/self/ns/pid');
  } catch {
    pid_ns = undefined;
  }
  return { holder, host: hostname(), pid_ns, alive: isAlive };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, under another user.
    return !(err instanceof Error && 'code' in err && err.code === 'ESRCH');
  }
}

function noop(): void {}
