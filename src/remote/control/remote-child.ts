// One child on a worker, as the control plane runs it: its mailbox consumer and event
// subscription, the assignment (worker and epoch), the relay of the worker's events into the
// child's real context (so the registry, transcript, events and replay stay here), its steer
// publishes, interrupt by request, and the loss accounting when its worker is gone.
import type { Subscription } from '@nats-io/transport-node';
import { isSubrunError } from '../../errors.ts';
import { RunnerLostError, type DelegationHandle, type RunOutcome, type RunnerContext, type Steer, type TaskSpec, type ToolCall } from '../../types.ts';
import { type Assign, type AssignReply, assignReplySchema, consumerName, encode, eventSenderSchema, guarded, parse, type SpawnReply, type SpawnRequest, spawnRequestSchema, STEER_STREAM, steerSchema, subjects, tryParse, type WorkerEvent, workerEventSchema } from '../wire.ts';
import type { PlacementPort, RemoteChildHandle } from './port.ts';
import { NatsUnavailableError, type WorkerState } from './worker-table.ts';
import { describe, isNotFound, mailboxConsumer } from '../nats.ts';

/** How long a control request (assign, interrupt) may take before it is given up. */
const REQUEST_MS = 2000;
/** Tries at removing a finished child's mailbox, each after NATS is up again (within the wait). */
const DISPOSE_TRIES = 10;
const DISPOSE_WAIT_MS = 24 * 3_600_000;
/** How long the loss accounting may spend reading the mailbox before it assumes the worst. */
const ACCOUNTING_MS = 1500;

export class RemoteChild implements RemoteChildHandle {
  readonly id: string;
  readonly #p: PlacementPort;
  readonly #agent: Record<string, unknown>;
  worker: string | undefined;
  epoch = 0;
  #ctx: RunnerContext | undefined;
  #subs: Subscription[] = [];
  /** Events that arrived before run() attached (a fast worker); replayed in order. */
  #early: WorkerEvent[] | undefined = [];
  #tools = new Map<number, ToolCall>();
  /** Publishes not yet acknowledged, by steer_id. */
  readonly #inflight = new Map<string, Promise<void>>();
  /** Steers whose publish was acknowledged: in the mailbox (or already taken from it). */
  readonly #published = new Set<string>();
  /** Steers whose publish was not acknowledged in time: perhaps in the mailbox, perhaps not. */
  readonly #uncertain = new Set<string>();
  #settle: { resolve(o: RunOutcome): void; reject(e: Error): void } | undefined;
  #settled = false;
  /** Woken when the worker's finish arrives (an interrupt that found no responder waits for it). */
  #onSettled: (() => void) | undefined;
  /** Slot released while this child waits for its own children (delegations in flight). */
  #waitingOn = 0;
  #placeError: Error | undefined;
  #placing = false;

  constructor(placement: PlacementPort, id: string, agent: Record<string, unknown>) {
    this.#p = placement;
    this.id = id;
    this.#agent = agent;
  }

  /**
   * Publishes an accepted steer with msgID = steer_id; the host hears `queued` after its ack. No
   * ack within the bound does not mean it is not stored (a stalled server stores it later and the
   * worker may deliver it): unless the publish surely never left, the steer is kept (the host is
   * told NATS is unavailable) and accounted like any other.
   */
  publishSteer(steer: Steer): void {
    const { js, nc } = this.#p.link;
    const publish = js
      .publish(subjects.steer(this.id), encode(steer), { msgID: steer.steer_id, timeout: this.#p.publish_ms })
      .then(
        () => {
          this.#published.add(steer.steer_id);
        },
        (err: unknown) => {
          const surelyNot = nc.isClosed() || isNoResponders(err);
          if (!surelyNot) this.#uncertain.add(steer.steer_id);
          throw Object.assign(new NatsUnavailableError(), { withdraw: surelyNot });
        },
      )
      .finally(() => this.#inflight.delete(steer.steer_id));
    this.#inflight.set(steer.steer_id, publish);
    publish.catch(() => undefined);
  }

  committed(steer_id: string): Promise<void> | undefined {
    return this.#inflight.get(steer_id);
  }

  /** Makes the mailbox, subscribes to the child's events and finds it a worker (child still queued). */
  async place(ctx: RunnerContext): Promise<void> {
    this.#placing = true;
    try {
      const { jsm, nc } = this.#p.link;
      // During an outage a spawn waits (up to the bound) for NATS before it makes its mailbox.
      if (!(await this.#p.link.whenUp(this.#p.outage_ms))) throw new NatsUnavailableError();
      await jsm.consumers.add(STEER_STREAM, mailboxConsumer(this.id));
      const log = this.#p.logger;
      this.#subs.push(nc.subscribe(subjects.events(this.id), { callback: guarded(log, (m) => this.#onEvent(m.data, m.subject)) }));
      this.#subs.push(
        nc.subscribe(subjects.spawn(this.id), {
          callback: guarded(log, (m) => {
            const reply = this.#onSpawn(parse(spawnRequestSchema, m.data, log, m.subject));
            m.respond(encode(reply));
          }),
        }),
      );
      for (;;) {
        const w = await this.#p.workers.acquire(ctx.signal);
        if (!w) {
          // Stopped while queued: the core finishes it without running it.
          this.disposeUnplaced();
          return;
        }
        const outcome = await this.#assign(w, ctx);
        if (outcome === 'assigned') {
          // Stopped while the assignment was in flight: the core finished it unstarted, so the
          // worker must let it go.
          if (ctx.signal.aborted) {
            this.#p.fence(w.id, this.id, this.epoch);
            this.#cleanup();
          }
          return;
        }
        if (outcome === 'invalid') throw new Error('the worker cannot run this agent spec');
      }
    } catch (err) {
      this.#placeError = err instanceof NatsUnavailableError || !this.#p.link.connected ? new NatsUnavailableError() : new Error(`cannot place the child: ${describe(err)}`);
    }
  }

  async #assign(w: WorkerState, ctx: RunnerContext): Promise<'assigned' | 'retry' | 'invalid'> {
    this.epoch = this.#p.nextEpoch();
    this.worker = w.id;
    const msg: Assign = {
      child: this.id,
      epoch: this.epoch,
      goal: ctx.goal,
      ...(ctx.context !== undefined ? { context: ctx.context } : {}),
      agent: this.#agent,
      limits: { parent_id: ctx.parent_id, depth: ctx.depth, can_delegate: ctx.can_delegate, max_batch: ctx.max_batch },
    };
    let reply: AssignReply | undefined;
    try {
      reply = tryParse(assignReplySchema, (await this.#p.link.nc.request(subjects.assign(w.id), encode(msg), { timeout: REQUEST_MS })).data);
    } catch (err) {
      this.#p.workers.release(w.id);
      this.worker = undefined;
      // Nobody on its assign subject (stopping, or gone): not chosen again until it heartbeats;
      // whether it is lost is for its heartbeats to say.
      if (isNoResponders(err)) this.#p.workers.markFull(w.id);
      // A slow worker may have taken it after all: that epoch is fenced before the next try.
      else this.#p.fence(w.id, this.id, this.epoch);
      return 'retry';
    }
    if (reply?.ok) {
      this.#p.bind(this);
      return 'assigned';
    }
    this.#p.workers.release(w.id);
    this.worker = undefined;
    if (reply?.ok === false && reply.reason === 'invalid') return 'invalid';
    this.#p.workers.markFull(w.id);
    return 'retry';
  }

  run(ctx: RunnerContext): Promise<RunOutcome> {
    if (this.#placeError) {
      const err = this.#placeError;
      this.#cleanup();
      return Promise.reject(err);
    }
    this.#ctx = ctx;
    const done = new Promise<RunOutcome>((resolve, reject) => (this.#settle = { resolve, reject }));
    const early = this.#early ?? [];
    this.#early = undefined;
    for (const ev of early) this.#apply(ev);
    // Stopped (interrupt, timeout, an ancestor's stop): ask the worker; nobody there is a loss.
    const onAbort = () => void this.#interrupt();
    if (ctx.signal.aborted) onAbort();
    else ctx.signal.addEventListener('abort', onAbort, { once: true });
    return done.finally(() => {
      ctx.signal.removeEventListener('abort', onAbort);
      this.#cleanup();
    });
  }

  async #interrupt(): Promise<void> {
    // Asked until answered: a worker slow under load (a timeout) is asked again. No responders on
    // this child's own subject says only that this child is no longer on that worker (it finished
    // as the interrupt went out, or the worker dropped it): never that the worker is gone, which
    // only its heartbeats say. Its finish, if it sent one, is already on the way.
    while (!this.#settled && this.worker !== undefined) {
      const { worker, epoch } = this;
      try {
        await this.#p.link.nc.request(subjects.control(this.id), encode({ op: 'interrupt', epoch }), { timeout: REQUEST_MS });
        return;
      } catch (err) {
        if (isNoResponders(err)) {
          await this.#gone(worker, epoch);
          return;
        }
      }
    }
  }

  /** The child is not on its worker at this epoch: wait a moment for its finish, else settle it alone. */
  async #gone(worker: string, epoch: number): Promise<void> {
    const finished = new Promise<void>((resolve) => (this.#onSettled = resolve));
    await withDeadline(finished, REQUEST_MS).catch(() => undefined);
    this.#onSettled = undefined;
    if (this.#settled || this.worker !== worker || this.epoch !== epoch) return;
    this.#p.logger.warn({ worker, subagent_id: this.id, epoch }, 'child no longer on its worker');
    // Whatever it still holds there at this epoch must go.
    this.#p.fence(worker, this.id, epoch);
    await this.lost('child_lost', `child ${this.id} is no longer on worker ${worker}`);
  }

  #onEvent(data: Uint8Array, subject: string): void {
    const ev = parse(workerEventSchema, data, this.#p.logger, subject);
    if (!ev) {
      // Malformed, but from a sender we can name at a stale epoch: fence it all the same.
      const from = tryParse(eventSenderSchema, data);
      if (from && (from.epoch !== this.epoch || from.worker !== this.worker)) this.#p.fence(from.worker, this.id, from.epoch);
      return;
    }
    if (ev.epoch !== this.epoch || ev.worker !== this.worker || this.#settled) {
      // A fenced worker (declared lost, or a superseded epoch): it must drop the child.
      this.#p.fence(ev.worker, this.id, ev.epoch);
      return;
    }
    if (this.#early) this.#early.push(ev);
    else this.#apply(ev);
  }

  #apply(ev: WorkerEvent): void {
    const ctx = this.#ctx as RunnerContext;
    switch (ev.type) {
      case 'write':
        ctx.write(ev.line);
        break;
      case 'thinking':
        ctx.thinking(ev.text);
        break;
      case 'text':
        ctx.text(ev.text);
        break;
      case 'text_delta':
        ctx.textDelta(ev.text);
        break;
      case 'thinking_delta':
        ctx.thinkingDelta(ev.text);
        break;
      case 'tool':
        this.#tools.set(ev.i, ctx.startTool(ev.name, ev.args));
        break;
      case 'tool_end':
        this.#tools.get(ev.i)?.finish(ev.result, ev.ok);
        this.#tools.delete(ev.i);
        break;
      case 'delivered':
        this.#confirm(new Set(ev.steer_ids));
        break;
      case 'finish':
        this.#settled = true;
        this.#settle?.resolve(ev.outcome);
        this.#onSettled?.();
        break;
    }
  }

  /** Moves steers the worker delivered to delivered in the ledger (transcript + event). */
  #confirm(ids: ReadonlySet<string>): void {
    const ctx = this.#ctx;
    if (!ctx || ids.size === 0) return;
    // take() then confirm() those: the rest stay taken, and the seal lists them as missed.
    const taken = ctx.takeSteers();
    ctx.confirmDelivered(taken.filter((s) => ids.has(s.steer_id)));
  }

  #onSpawn(req: SpawnRequest | undefined): SpawnReply {
    const ctx = this.#ctx;
    if (!req || !ctx || req.epoch !== this.epoch || req.worker !== this.worker || this.#settled) return { ok: false, error: 'not the current assignment' };
    let handle: DelegationHandle;
    try {
      const tasks: TaskSpec[] = req.tasks.map((t) => ({ goal: t.goal, ...(t.context !== undefined ? { context: t.context } : {}), ...(t.agent ? { agent: t.agent } : {}) }));
      handle = this.#p.ids.preassigned(req.delegation_id, req.subagent_ids, () => ctx.delegate(tasks, req.timeout_ms !== undefined ? { timeout_ms: req.timeout_ms } : {}));
    } catch (err) {
      return { ok: false, error: isSubrunError(err) ? err.message : describe(err) };
    }
    // Waiting for its own children holds no worker slot (so deep trees cannot deadlock).
    if (this.#waitingOn++ === 0 && this.worker) this.#p.workers.release(this.worker);
    void handle.results.then((entries) => {
      if (--this.#waitingOn === 0 && this.worker && !this.#settled) this.#p.workers.retake(this.worker);
      // A closed connection throws here: logged, never an unhandled rejection.
      try {
        if (!this.#settled) this.#p.link.nc.publish(subjects.inbound(this.id), encode({ type: 'results', delegation_id: handle.delegation_id, entries }));
      } catch (err) {
        this.#p.logger.warn({ subagent_id: this.id, err: describe(err) }, 'could not send a delegation’s entries to the worker');
      }
    });
    return { ok: true };
  }

  /** The worker (or the child on it) is gone: account for every steer, then settle as `error`. */
  async lost(exit_reason = 'worker_lost', message = `worker ${this.worker ?? '?'} lost`): Promise<void> {
    if (this.#settled) return;
    this.#settled = true;
    const maybe = new Set<string>();
    const delivered = new Set<string>();
    try {
      await withDeadline(this.#readMailbox(maybe, delivered), ACCOUNTING_MS);
    } catch {
      // The mailbox cannot be read (NATS down): every published, unconfirmed steer may have been
      // taken. Honest, not exact: they are all `maybe_delivered`.
      maybe.clear();
      delivered.clear();
      for (const id of this.#published) maybe.add(id);
      for (const id of this.#uncertain) maybe.add(id);
    }
    this.#confirm(delivered);
    this.#settle?.reject(new RunnerLostError(message, exit_reason, maybe));
  }

  /**
   * Splits the published steers by what the mailbox says: gone from it = acked by the worker
   * (delivered); still in it at or below the consumer's delivered sequence = fetched, not acked
   * (maybe delivered); above it = never fetched (missed).
   */
  async #readMailbox(maybe: Set<string>, delivered: Set<string>): Promise<void> {
    await Promise.allSettled([...this.#inflight.values()]);
    // Only steers published by now: one accepted during the walk was never fetchable (the consumer
    // is gone first), so it stays undelivered and is missed.
    const published = [...this.#published];
    const { jsm } = this.#p.link;
    // No consumer (the server reaped an idle one): nothing was fetched since it was made again.
    const info = await jsm.consumers.info(STEER_STREAM, consumerName(this.id)).catch((err: unknown) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
    // Fence the mailbox: a worker that comes back can no longer fetch or ack.
    await jsm.consumers.delete(STEER_STREAM, consumerName(this.id)).catch(() => undefined);
    const line = info?.delivered.stream_seq ?? 0;
    const left = new Map<string, number>();
    for (let seq = 1; ; ) {
      const m = await jsm.direct.getMessage(STEER_STREAM, { next_by_subj: subjects.steer(this.id), seq });
      if (!m) break;
      const steer = tryParse(steerSchema, m.data);
      if (steer) left.set(steer.steer_id, m.seq);
      seq = m.seq + 1;
    }
    for (const id of published) {
      const seq = left.get(id);
      if (seq === undefined) delivered.add(id);
      else if (seq <= line) maybe.add(id);
    }
    // Gone from the mailbox, an uncertain steer was either acked or never stored: maybe delivered.
    for (const id of this.#uncertain) {
      const seq = left.get(id);
      if (seq === undefined || seq <= line) maybe.add(id);
    }
  }

  #cleanup(): void {
    for (const s of this.#subs) s.unsubscribe();
    this.#subs = [];
    if (this.worker !== undefined && this.#waitingOn === 0) this.#p.workers.release(this.worker);
    this.#p.unbind(this);
    void this.#dispose();
  }

  /**
   * The consumer and the subject go once every publish has settled (none is left behind). NATS
   * down: tried again when it is back (the consumer's inactivity threshold and the stream's max
   * age are the backstop if this process never sees it back).
   */
  async #dispose(): Promise<void> {
    await Promise.allSettled([...this.#inflight.values()]);
    const { link, logger } = this.#p;
    let waited = false;
    for (let attempt = 1; attempt <= DISPOSE_TRIES; attempt++) {
      waited ||= !link.connected;
      if (!(await link.whenUp(DISPOSE_WAIT_MS))) break;
      try {
        await link.jsm.consumers.delete(STEER_STREAM, consumerName(this.id)).catch((err: unknown) => {
          if (!isNotFound(err)) throw err;
        });
        await link.jsm.streams.purge(STEER_STREAM, { filter: subjects.steer(this.id) });
        if (waited || attempt > 1) logger.info({ subagent_id: this.id, attempt }, 'removed the mailbox of a finished child');
        return;
      } catch (err) {
        logger.warn({ subagent_id: this.id, attempt, err: describe(err) }, 'could not remove the mailbox of a finished child; will retry');
        // Still seen as connected (the outage not noticed yet): a pause before the next try.
        if (link.connected) await new Promise((r) => setTimeout(r, 1000).unref());
      }
    }
    if (!link.nc.isClosed()) logger.warn({ subagent_id: this.id }, 'left the mailbox of a finished child to the server to reap');
  }

  /** Stopped before placement began (still queued): nothing else will clean up. */
  disposeIfIdle(): void {
    if (!this.#placing) this.disposeUnplaced();
  }

  /** A child that never ran (stopped while queued): its mailbox goes too. */
  disposeUnplaced(): void {
    for (const s of this.#subs) s.unsubscribe();
    this.#subs = [];
    this.#p.unbind(this);
    void this.#dispose();
  }
}

function isNoResponders(err: unknown): boolean {
  return typeof err === 'object' && err !== null && typeof (err as { isNoResponders?: unknown }).isNoResponders === 'function' && (err as { isNoResponders(): boolean }).isNoResponders();
}

function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('deadline')), ms)));
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}
