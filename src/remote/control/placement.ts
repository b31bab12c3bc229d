// The control plane's remote placement: the NATS link, the worker table and every remote child by id.
// The runtime stays the in-process one: a remote child is a child whose runner relays to a worker.
import { systemClock, type Clock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import type { Runner } from '../../types.ts';
import type { RunnerKinds } from '../../delegation/runners/kinds.ts';
import type { Msg, Subscription } from '@nats-io/transport-node';
import { type Drop, encode, eventSenderSchema, guarded, type Heartbeat, heartbeatSchema, isRecord, parse, subjects, tryParse } from '../wire.ts';
import { openNats, type NatsLink } from '../nats.ts';
import { within } from '../wait.ts';
import { RemoteChild } from './remote-child.ts';
import { RemoteRunner } from './remote-runner.ts';
import { WorkerTable } from './worker-table.ts';
import { PreassignedIds } from './preassigned-ids.ts';
import type { PlacementPort, RemoteChildHandle, RemoteProgress } from './port.ts';
import { EventFeed, type EventFeedOptions } from './event-feed.ts';
import type { Adopter } from '../../delegation/adopt.ts';
import { withProps } from '../../shapes.ts';

export interface PlacementOptions {
  readonly url: string;
  /** Heartbeats missed for this long declare a worker lost. Default 3000 ms. */
  readonly worker_loss_ms?: number;
  /** During a NATS outage, how long a spawn waits for a worker before it fails. Default 30000 ms. */
  readonly nats_outage_ms?: number;
  readonly logger: Logger;
  /** Every bound and deadline of the control plane's remote side. Default: the system clock. */
  readonly clock?: Clock;
}

export class Placement implements PlacementPort {
  readonly link: NatsLink;
  readonly workers: WorkerTable;
  readonly ids = new PreassignedIds();
  readonly logger: Logger;
  readonly clock: Clock;
  /** Steer publish-ack bound: a steer during an outage gets an error within it. */
  readonly publish_ms: number;
  /** How long a spawn waits for NATS during an outage. */
  readonly outage_ms: number;
  readonly #children = new Map<string, RemoteChildHandle>();
  /** Children bound to a worker, for the loss. */
  readonly #byWorker = new Map<string, Set<RemoteChildHandle>>();
  #epoch = 0;
  #feed: EventFeed | undefined;
  #adoptive = false;
  #settled: () => Promise<void> | undefined = () => undefined;
  #subs: Subscription[] = [];
  /** The agent spec of tasks that name none (an adopted default child runs it again). */
  #defaultSpec: Record<string, unknown> = { kind: 'scripted' };
  #onLost: Array<() => void> = [];

  private constructor(link: NatsLink, options: Omit<PlacementOptions, 'url'>) {
    this.link = link;
    this.logger = options.logger;
    this.clock = options.clock ?? systemClock;
    const outage = options.nats_outage_ms ?? 30_000;
    this.outage_ms = outage;
    this.publish_ms = Math.min(5000, Math.max(500, outage));
    this.workers = new WorkerTable({
      loss_ms: options.worker_loss_ms ?? 3000,
      outage_ms: outage,
      logger: options.logger,
      clock: this.clock,
      downSince: () => link.downSince,
      onLost: (worker) => this.#lost(worker),
    });
  }

  /**
   * Starts listening to the workers, once the runtime has adopted what the last process left
   * running (a heartbeat before that would fence those children). One subscription for every
   * child's requests and one for every child's events, durable when adoptive (not three per
   * child): a child costs the connection and the server no interest of its own. The store's
   * `flush` commits before an event is acked, and its `cursor` keeps the last event applied.
   */
  async start(store?: Pick<EventFeedOptions, 'flush' | 'cursor' | 'settled'>): Promise<void> {
    const { nc } = this.link;
    if (store?.settled) this.#settled = store.settled;
    const onEvent = (subject: string, data: Uint8Array) => this.#event(subject, data);
    // The durable feed only where a next process can adopt what runs on (a store keeps it): a
    // control plane without one gains nothing from events that outlive it, and reads them live.
    if (this.#adoptive) this.#feed = await EventFeed.open({ link: this.link, logger: this.logger, onEvent, ...store });
    else this.#subs.push(nc.subscribe(subjects.allEvents, { callback: guarded(this.logger, (m) => onEvent(m.subject, m.data)) }));
    this.#subs.push(nc.subscribe(subjects.requests, { callback: guarded(this.logger, (m) => this.#request(m)) }));
    this.#subs.push(
      nc.subscribe(subjects.heartbeats, {
        callback: guarded(this.logger, (m) => this.#heartbeat(parse(heartbeatSchema, m.data, this.logger, m.subject), m.subject)),
      }),
    );
    // The workers of adopted children were counted as seen at adoption: the loss bound runs from now.
    this.workers.listening();
  }

  /**
   * Stops hearing the workers (at shutdown, before the store closes): what they send from now on
   * waits in JetStream for the next process, which adopts the children left running.
   */
  quiet(): void {
    this.#feed?.close();
    this.#feed = undefined;
    for (const s of this.#subs.splice(0)) s.unsubscribe();
  }

  /** Resolves once what the store committed is durable (undefined: it is), before a worker hears of it. */
  stored(): Promise<void> | undefined {
    return this.#settled();
  }

  get adoptive(): boolean {
    return this.#adoptive;
  }

  /** Every worker event handled so far that the stream held when asked (see EventFeed.caughtUp). */
  caughtUp(): Promise<void> {
    // Live events: a round trip to the server has everything it routed to us before.
    return this.#feed ? this.#feed.caughtUp() : this.link.nc.flush();
  }

  /**
   * After a restart: a child the last process left running on a worker (its saved progress names
   * the worker and the epoch) is adopted there; anything else is settled by the runtime.
   */
  adopter(): Adopter {
    this.#adoptive = true;
    return (child) => {
      const progress = remoteProgress(child.checkpoint);
      const at = progress?.remote;
      if (!at || child.agent === 'object') return undefined;
      const spec = child.agent === 'default' ? this.#defaultSpec : child.agent.spec;
      if (!isRecord(spec)) return undefined;
      const c = this.child(child.subagent_id, spec);
      c.adopt(at.worker, at.epoch);
      this.#epoch = Math.max(this.#epoch, at.epoch);
      // Its worker counts as alive until its heartbeats say otherwise (or their absence: lost).
      this.workers.expect(at.worker);
      this.logger.info({ subagent_id: child.subagent_id, worker: at.worker, epoch: at.epoch }, 'adopted a child still running on its worker');
      return {
        runner: new RemoteRunner(this, spec, child.model),
        restored: (taken, waiting) => c.restoreGranted(taken, waiting),
        delegation: (delegation_id, results) => c.resumeDelegation(delegation_id, results),
        delegations: progress.delegations ?? [],
      };
    };
  }

  /** Connects (one line and exit 2 at start when NATS or JetStream is missing: NatsStartError). */
  static async open(options: PlacementOptions): Promise<Placement> {
    const link = await openNats(options.url, 'subrun-control-plane', options.clock);
    return new Placement(link, options);
  }

  /**
   * On a link opened already: `serve` takes the control plane's lease on it first, because this
   * starts acting at once (a heartbeat naming children it does not know gets them dropped).
   */
  static attach(link: NatsLink, options: Omit<PlacementOptions, 'url'>): Placement {
    return new Placement(link, options);
  }

  /** Runner kinds whose children run on workers: each local kind validates and names the model. */
  kinds(local: RunnerKinds): RunnerKinds {
    const out: Record<string, RunnerKinds[string]> = {};
    for (const [name, kind] of Object.entries(local)) {
      out[name] = {
        schema: kind.schema,
        create: (spec) => new RemoteRunner(this, withProps(isRecord(spec) ? spec : {}, { kind: name }), kind.create(spec).model),
      };
    }
    return out;
  }

  /** The runner for tasks that name none: the given kind's default spec, on a worker. */
  defaultRunner(kind: string, model: string): Runner {
    this.#defaultSpec = { kind };
    return new RemoteRunner(this, { kind }, model);
  }

  child(id: string, agent: Record<string, unknown>): RemoteChildHandle {
    let c: RemoteChildHandle | undefined = this.#children.get(id);
    if (!c) this.#children.set(id, (c = new RemoteChild(this, id, agent)));
    return c;
  }

  find(id: string): RemoteChildHandle | undefined {
    return this.#children.get(id);
  }

  nextEpoch(): number {
    return ++this.#epoch;
  }

  bind(c: RemoteChildHandle): void {
    if (c.worker === undefined) return;
    let set = this.#byWorker.get(c.worker);
    if (!set) this.#byWorker.set(c.worker, (set = new Set()));
    set.add(c);
  }

  unbind(c: RemoteChildHandle): void {
    this.#children.delete(c.id);
    if (c.worker !== undefined) this.#byWorker.get(c.worker)?.delete(c);
  }

  /** Tells a worker to drop a child whose epoch is no longer the live assignment. */
  fence(worker: string, child: string, epoch: number): void {
    if (typeof worker !== 'string' || worker === '') return;
    this.logger.warn({ worker, subagent_id: child, epoch }, 'fenced a stale worker message');
    const drop: Drop = { children: [{ child, epoch }] };
    this.link.nc.publish(subjects.drop(worker), encode(drop));
  }

  async close(): Promise<void> {
    this.quiet();
    this.workers.close();
    await this.link.close();
  }

  #heartbeat(hb: Heartbeat | undefined, subject: string): void {
    if (!hb) return;
    // A heartbeat speaks for the worker its subject names, and no other.
    if (subject !== subjects.heartbeat(hb.worker)) return;
    // A worker holding children that are not (or no longer) assigned to it at that epoch was
    // declared lost and came back: it drops them.
    const stale = hb.children.filter(({ child, epoch }) => {
      const c = this.#children.get(child);
      return !c || c.worker !== hb.worker || c.epoch !== epoch;
    });
    if (stale.length > 0) {
      this.logger.warn({ worker: hb.worker, count: stale.length }, 'fenced a returning worker');
      this.link.nc.publish(subjects.drop(hb.worker), encode({ children: stale } satisfies Drop));
    }
    this.workers.heartbeat(hb);
    const held = new Set(hb.children.map(({ child, epoch }) => `${child}@${epoch}`));
    for (const c of this.#byWorker.get(hb.worker) ?? []) {
      // Steers that wait for a receipt: their notice may have been lost, so the worker hears again.
      c.renotify();
      // An adopted child its worker no longer holds ended while no control plane listened, its
      // finish past reach (read already, or aged out): once the feed is read up, it is lost.
      if (c.adopted && !held.has(`${c.id}@${c.epoch}`))
        void this.caughtUp().then(
          () => c.lost('child_lost', `child ${c.id} is no longer on worker ${hb.worker}`),
          () => undefined,
        );
    }
  }

  #event(subject: string, data: Uint8Array): void {
    const child = subject.slice('sr.ev.'.length);
    const c = this.#children.get(child);
    if (c) return c.onEvent(data, subject);
    // About a child this control plane does not hold (finished, or another process's): fenced.
    const from = tryParse(eventSenderSchema, data);
    if (from) this.fence(from.worker, child, from.epoch);
  }

  #request(m: Msg): void {
    const [, , child = '', kind = ''] = m.subject.split('.');
    const c = this.#children.get(child);
    if (c) return c.onRequest(m, kind);
    if (m.reply) m.respond(encode({ ok: false, error: 'not the current assignment' }));
  }

  /** Told each time a worker is declared lost (the `subrun_workers_lost_total` counter). */
  onWorkerLost(fn: () => void): void {
    this.#onLost.push(fn);
  }

  #lost(worker: string): void {
    for (const fn of this.#onLost) fn();
    const set = this.#byWorker.get(worker);
    this.#byWorker.delete(worker);
    // What the worker sent before it went (a finish, a delivery) may still wait in the event feed
    // (a restart's backlog): read it up first, within a bound, so a loss never outruns it.
    void within(
      this.clock,
      2000,
      this.caughtUp().catch(() => undefined),
    ).then(() => {
      for (const c of set ?? []) c.lost();
    });
  }
}

/** The remote assignment a child's saved progress names, if it is one (and what it waits for). */
function remoteProgress(checkpoint: unknown): RemoteProgress | undefined {
  if (!isRecord(checkpoint) || !isRecord(checkpoint.remote)) return undefined;
  const { worker, epoch } = checkpoint.remote;
  if (typeof worker !== 'string' || worker === '' || typeof epoch !== 'number' || !Number.isInteger(epoch)) return undefined;
  const waits = Array.isArray(checkpoint.delegations) ? checkpoint.delegations.filter((d): d is string => typeof d === 'string') : [];
  return { remote: { worker, epoch }, delegations: waits };
}
