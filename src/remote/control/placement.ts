// The control plane's remote placement: the NATS link, the worker table and every remote child by id.
// The runtime stays the in-process one: a remote child is a child whose runner relays to a worker.
import { systemClock, type Clock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import type { Runner } from '../../types.ts';
import type { RunnerKinds } from '../../delegation/runners/kinds.ts';
import type { Msg } from '@nats-io/transport-node';
import { type Drop, encode, eventSenderSchema, guarded, type Heartbeat, heartbeatSchema, isRecord, parse, subjects, tryParse } from '../wire.ts';
import { openNats, type NatsLink } from '../nats.ts';
import { RemoteChild } from './remote-child.ts';
import { RemoteRunner } from './remote-runner.ts';
import { WorkerTable } from './worker-table.ts';
import { PreassignedIds } from './preassigned-ids.ts';
import type { PlacementPort, RemoteChildHandle } from './port.ts';

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
    link.nc.subscribe(subjects.heartbeats, {
      callback: guarded(this.logger, (m) => this.#heartbeat(parse(heartbeatSchema, m.data, this.logger, m.subject), m.subject)),
    });
    // One subscription for every child's events and one for its requests (not three per child):
    // a child costs the connection and the server no interest of its own.
    link.nc.subscribe(subjects.allEvents, { callback: guarded(this.logger, (m) => this.#event(m)) });
    link.nc.subscribe(subjects.requests, { callback: guarded(this.logger, (m) => this.#request(m)) });
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
        create: (spec) => new RemoteRunner(this, { ...(isRecord(spec) ? spec : {}), kind: name }, kind.create(spec).model),
      };
    }
    return out;
  }

  /** The runner for tasks that name none: the given kind's default spec, on a worker. */
  defaultRunner(kind: string, model: string): Runner {
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
    // Steers that wait for a receipt: their notice may have been lost, so the worker hears again.
    for (const c of this.#byWorker.get(hb.worker) ?? []) c.renotify();
  }

  #event(m: Msg): void {
    const child = m.subject.slice('sr.ev.'.length);
    const c = this.#children.get(child);
    if (c) return c.onEvent(m.data, m.subject);
    // About a child this control plane does not hold (finished, or another process's): fenced.
    const from = tryParse(eventSenderSchema, m.data);
    if (from) this.fence(from.worker, child, from.epoch);
  }

  #request(m: Msg): void {
    const [, , child = '', kind = ''] = m.subject.split('.');
    const c = this.#children.get(child);
    if (c) return c.onRequest(m, kind);
    if (m.reply) m.respond(encode({ ok: false, error: 'not the current assignment' }));
  }

  #lost(worker: string): void {
    const set = this.#byWorker.get(worker);
    this.#byWorker.delete(worker);
    for (const c of set ?? []) c.lost();
  }
}
