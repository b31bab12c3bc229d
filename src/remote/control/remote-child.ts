// One child on a worker, as the control plane runs it: its assignment (worker and epoch), the relay
// of the worker's events into the child's real context, interrupt by request, and its loss.
import type { Msg } from '@nats-io/transport-node';
import { RunnerLostError, type CompletionEntry, type RunOutcome, type RunnerContext, type Steer, type SteerCommit } from '../../types.ts';
import {
  type Assign,
  type AssignReply,
  assignReplySchema,
  encode,
  eventSenderSchema,
  type Inbound,
  parse,
  type SpawnReply,
  type SpawnRequest,
  spawnRequestSchema,
  subjects,
  type TakenReply,
  type TakenRequest,
  takenRequestSchema,
  tryParse,
  type WorkerEvent,
  workerEventSchema,
} from '../wire.ts';
import { describe, isNoResponders } from '../nats.ts';
import { traceCarrier, traceHeaders } from '../trace-headers.ts';
import { Latch, within } from '../wait.ts';
import { ChildMailbox } from './child-mailbox.ts';
import { RemoteSteerLedger } from './steer-ledger.ts';
import { EventRelay } from './relay.ts';
import { ChildDelegations } from './delegations.ts';
import type { PlacementPort, RemoteChildHandle } from './port.ts';
import { NatsUnavailableError, type WorkerState } from './worker-table.ts';

/** How long a control request (assign, interrupt) may take before it is given up. */
const REQUEST_MS = 2000;
/** Interrupt requests left unanswered (each after REQUEST_MS) before the child counts as unreachable. */
export const INTERRUPT_TRIES = 5;

export class RemoteChild implements RemoteChildHandle {
  readonly id: string;
  readonly #p: PlacementPort;
  readonly #agent: Record<string, unknown>;
  readonly #mailbox: ChildMailbox;
  readonly #ledger: RemoteSteerLedger;
  readonly #relay: EventRelay;
  worker: string | undefined;
  epoch = 0;
  /** The child's real context, from run() on; events before it (a fast worker) wait in #early. */
  #ctx: RunnerContext | undefined;
  /** Opened by run(): a spawn or a receipt asked before it (a fast worker) waits for the context. */
  readonly #running = new Latch<RunnerContext>();
  #early: WorkerEvent[] = [];
  #settle: { resolve(o: RunOutcome): void; reject(e: Error): void } | undefined;
  /** Opened once the child's end is decided: the worker's finish, or the loss. */
  readonly #settled = new Latch();
  #placeError: Error | undefined;
  #placing = false;
  /** Rebuilt after a control-plane restart on the worker it already runs on. */
  #adopted = false;
  /** Its own delegations: made once each, their entries sent to its worker. */
  readonly #delegations: ChildDelegations;

  constructor(placement: PlacementPort, id: string, agent: Record<string, unknown>) {
    this.#p = placement;
    this.id = id;
    this.#agent = agent;
    this.#mailbox = new ChildMailbox(placement, id);
    this.#ledger = new RemoteSteerLedger(this.#mailbox);
    this.#delegations = new ChildDelegations(placement, this);
    this.#relay = new EventRelay(this.#ledger, (outcome) => {
      this.#settled.open();
      this.#settle?.resolve(outcome);
    });
  }

  get adopted(): boolean {
    return this.#adopted;
  }

  get settled(): boolean {
    return this.#settled.opened;
  }

  get placed(): boolean {
    return this.worker !== undefined && this.#ctx !== undefined && !this.#settled.opened;
  }

  /**
   * Publishes an accepted steer (msgID = steer_id); the host hears `queued` once it is stored.
   * Then the worker is told that steers wait: it asks for their receipt at its next delivery point.
   */
  publishSteer(steer: Steer): void {
    void this.#mailbox.publish(steer).then((commit) => {
      if (commit === 'refused') return;
      // One notice until the worker asks: it takes every waiting steer with one receipt, so a
      // notice per steer only woke it (and a NATS write) for nothing while its child was busy;
      // a lost notice is sent again by the heartbeats (bench: remote.steer_queued_p50).
      const told = this.#ledger.waiting;
      this.#ledger.published();
      if (!told) this.#notify();
    });
  }

  /** Tells the worker again that steers wait, if any do (heartbeats call it: a notice may be lost). */
  renotify(): void {
    if (this.#ledger.waiting) this.#notify();
  }

  #notify(): void {
    if (!this.#ctx || this.worker === undefined || this.#settled.opened) return;
    try {
      this.#p.link.nc.publish(subjects.inbound(this.id), encode({ type: 'steer', epoch: this.epoch } satisfies Inbound));
    } catch {
      // The connection closed: the child is settled by the loss or the shutdown.
    }
  }

  committed(steer_id: string): Promise<SteerCommit> | undefined {
    return this.#mailbox.committed(steer_id);
  }

  /** Finds the child a worker (the child is still queued meanwhile). */
  async place(ctx: RunnerContext): Promise<void> {
    this.#placing = true;
    // Adopted after a restart: it runs on its worker already.
    if (this.#adopted) return;
    try {
      // During an outage a spawn waits (up to the bound) for NATS before it is assigned.
      if (!(await this.#p.link.whenUp(this.#p.outage_ms))) throw new NatsUnavailableError();
      const log = this.#p.logger;
      for (;;) {
        const w = await this.#p.workers.acquire(ctx.signal);
        if (!w) {
          // Stopped while queued: the core finishes it without running it.
          this.disposeUnplaced();
          return;
        }
        log.debug({ subagent_id: this.id, worker: w.id }, 'placing: worker chosen');
        const outcome = await this.#assign(w, ctx);
        log.debug({ subagent_id: this.id, worker: w.id, outcome }, 'placing: assignment answered');
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
      this.#placeError =
        err instanceof NatsUnavailableError || !this.#p.link.connected ? new NatsUnavailableError() : new Error(`cannot place the child: ${describe(err)}`);
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
    // The child's invoke_agent context: the worker's spans for it join the host's trace under it.
    const trace: Record<string, string> = {};
    ctx.telemetry?.inject(trace);
    const headers = traceHeaders(trace);
    let reply: AssignReply | undefined;
    try {
      const answer = await this.#p.link.request(subjects.assign(w.id), encode(msg), { timeout: REQUEST_MS, ...(headers ? { headers } : {}) });
      reply = tryParse(assignReplySchema, answer.data);
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
      ctx.telemetry?.placed(w.id, this.#agent.kind === 'openai' ? 'openai' : 'subrun');
      // Where it runs, in the child's progress: a restarted control plane adopts it there.
      this.#delegations.placed(ctx);
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
    this.#ledger.attach(ctx);
    this.#running.open(ctx);
    // Adopted: its progress (where it runs, what its worker waits for) is kept up from now on.
    if (this.#adopted) this.#delegations.placed(ctx);
    // Steered while it waited for a worker: the worker hears of it now.
    this.renotify();
    const done = new Promise<RunOutcome>((resolve, reject) => (this.#settle = { resolve, reject }));
    for (const ev of this.#early.splice(0)) this.#relay.apply(ctx, ev);
    // Stopped (interrupt, timeout, an ancestor's stop): ask the worker; nobody there is a loss.
    const onAbort = () => void this.#interrupt();
    if (ctx.signal.aborted) onAbort();
    else ctx.signal.addEventListener('abort', onAbort, { once: true });
    return done.finally(() => {
      ctx.signal.removeEventListener('abort', onAbort);
      this.#cleanup();
    });
  }

  /**
   * Asks the worker to stop the child, again after a timeout (a worker slow under load), at most
   * INTERRUPT_TRIES times. No responders on the child's own subject says only that the child is no
   * longer on that worker (it finished as the interrupt went out, or was dropped), never that the
   * worker is gone, which only its heartbeats say; either way its finish may still be on its way.
   */
  async #interrupt(): Promise<void> {
    for (let attempt = 1; !this.#settled.opened && this.worker !== undefined; attempt++) {
      const { worker, epoch } = this;
      try {
        await this.#p.link.request(subjects.control(this.id), encode({ op: 'interrupt', epoch }), { timeout: REQUEST_MS });
        return;
      } catch (err) {
        if (isNoResponders(err)) return this.#gone(worker, epoch, 'is no longer', false);
        if (attempt >= INTERRUPT_TRIES) return this.#gone(worker, epoch, `did not answer ${INTERRUPT_TRIES} interrupts`, true);
      }
    }
  }

  /**
   * The child cannot be reached on its worker at this epoch: settle it alone unless its finish
   * comes first. No responders is certain (nobody holds the child's subject) and the finish it
   * may have sent before letting go is in the event stream ahead of that: reading the stream up
   * to its end is enough to have it. A child that is there but silent gets a moment.
   */
  async #gone(worker: string, epoch: number, why: string, silent: boolean): Promise<void> {
    if (silent) await within(this.#p.clock, REQUEST_MS, this.#settled.promise);
    else
      await within(
        this.#p.clock,
        REQUEST_MS,
        this.#p.caughtUp().catch(() => undefined),
      );
    if (this.#settled.opened || this.worker !== worker || this.epoch !== epoch) return;
    this.#p.logger.warn({ worker, subagent_id: this.id, epoch }, `child ${why} on its worker`);
    // Whatever it still holds there at this epoch must go.
    this.#p.fence(worker, this.id, epoch);
    this.lost('child_lost', `child ${this.id} ${why} on worker ${worker}`);
  }

  /** A worker's event about this child (the placement routes `sr.ev.<child>` here). */
  onEvent(data: Uint8Array, subject: string): void {
    const ev = parse(workerEventSchema, data, this.#p.logger, subject);
    if (!ev) {
      // Malformed, but from a sender we can name at a stale epoch: fence it all the same.
      const from = tryParse(eventSenderSchema, data);
      if (from && (from.epoch !== this.epoch || from.worker !== this.worker)) this.#p.fence(from.worker, this.id, from.epoch);
      return;
    }
    if (ev.epoch !== this.epoch || ev.worker !== this.worker || this.#settled.opened) {
      // A fenced worker (declared lost, or a superseded epoch): it must drop the child.
      this.#p.fence(ev.worker, this.id, ev.epoch);
      return;
    }
    if (this.#ctx) this.#relay.apply(this.#ctx, ev);
    else this.#early.push(ev);
  }

  /** The context, once run() has it; undefined if it does not come within a request's bound. */
  #whenRunning(): Promise<RunnerContext | undefined> {
    return this.#ctx ? Promise.resolve(this.#ctx) : within(this.#p.clock, REQUEST_MS, this.#running.promise);
  }

  #current(req: { readonly epoch: number; readonly worker: string } | undefined): boolean {
    return req !== undefined && req.epoch === this.epoch && req.worker === this.worker && !this.#settled.opened;
  }

  /** A worker's request about this child (the placement routes `sr.cp.<child>.*` here). */
  onRequest(m: Msg, kind: string): void {
    const log = this.#p.logger;
    if (kind === 'spawn') {
      const req = parse(spawnRequestSchema, m.data, log, m.subject);
      // The span the worker made the spawn in (its tool call): the spawn's delegation hangs under it.
      const trace = traceCarrier(m.headers);
      void this.#whenRunning()
        .then((ctx) => this.#stored(this.#onSpawn(ctx, req, trace)))
        .then((reply) => m.respond(encode(reply)), this.#unanswered(kind));
    } else if (kind === 'taken') {
      const req = parse(takenRequestSchema, m.data, log, m.subject);
      void this.#onTaken(req)
        .then((reply) => this.#stored(reply))
        .then((reply) => m.respond(encode(reply)), this.#unanswered(kind));
    }
  }

  /**
   * `reply` once what it says is durable (the spawned children, the receipt): a store that cannot
   * store it answers nothing, and the worker asks again.
   */
  async #stored<T>(reply: T): Promise<T> {
    await this.#p.stored();
    return reply;
  }

  /** Not stored (the store cannot write): no answer, so the worker asks again (its retry). */
  #unanswered(kind: string): (err: unknown) => void {
    return (err) => this.#p.logger.warn({ err: describe(err), subagent_id: this.id, kind }, 'a worker request is not answered until the store can write');
  }

  /** A worker asks for the taken receipt of the steers that wait; recorded before it is answered. */
  async #onTaken(req: TakenRequest | undefined): Promise<TakenReply> {
    const ctx = await this.#whenRunning();
    if (!ctx || !this.#current(req)) return { ok: false, error: 'not the current assignment' };
    // Lost or fenced while the publishes settled: nothing may be handed over any more.
    const steers = await this.#ledger.grant(() => this.#current(req));
    return steers ? { ok: true, steers } : { ok: false, error: 'not the current assignment' };
  }

  #onSpawn(ctx: RunnerContext | undefined, req: SpawnRequest | undefined, trace: Record<string, string>): SpawnReply {
    if (!ctx || !req || !this.#current(req)) return { ok: false, error: 'not the current assignment' };
    return this.#delegations.spawn(ctx, req, trace);
  }

  /**
   * After a control-plane restart: the child still runs on `worker` at `epoch` (its last
   * assignment, from its saved progress). It is bound there, and place() finds it placed.
   */
  adopt(worker: string, epoch: number): void {
    this.worker = worker;
    this.epoch = epoch;
    this.#adopted = true;
    this.#p.bind(this);
  }

  /** The adopted child's steers that held receipts when the last process stopped, and whether others wait. */
  restoreGranted(taken: readonly Steer[], waiting: boolean): void {
    this.#ledger.restore(taken);
    // Queued ones too: run() tells the worker they wait (its last notice may have died with us).
    if (waiting) this.#ledger.published();
  }

  /** The adopted child's delegation that goes on after the restart: its entries go to the worker. */
  resumeDelegation(delegation_id: string, results: Promise<CompletionEntry[]>): void {
    this.#delegations.await(delegation_id, results);
  }

  /** The runtime abandoned the run, or an adopted child it never resumed: the worker drops it, the slot goes now. */
  abandon(): void {
    if (this.#settled.opened) return;
    this.#settled.open();
    if (this.worker !== undefined) this.#p.fence(this.worker, this.id, this.epoch);
    if (this.#settle) this.#settle.reject(new Error('abandoned by the runtime'));
    else this.#cleanup(); // an adopted child never resumed: no run here to clean up after it
  }

  /** The worker (or the child on it) is gone: account for every steer, then settle as `error`. */
  lost(exit_reason = 'worker_lost', message = `worker ${this.worker ?? '?'} lost`): void {
    if (this.#settled.opened) return;
    this.#settled.open();
    const err = new RunnerLostError(message, exit_reason, this.#ledger.settleLoss());
    // Lost before its run began (an adopted child still waiting in a full queue): run() says so.
    if (this.#settle) this.#settle.reject(err);
    else this.#placeError = err;
  }

  #cleanup(): void {
    if (this.worker !== undefined && !this.#delegations.waiting) this.#p.workers.release(this.worker);
    this.#p.unbind(this);
    void this.#mailbox.dispose();
  }

  /** Stopped before placement began (still queued): nothing else will clean up. */
  disposeIfIdle(): void {
    if (!this.#placing) this.disposeUnplaced();
  }

  /** A child that never ran (stopped while queued): its mailbox goes too. */
  disposeUnplaced(): void {
    this.#p.unbind(this);
    void this.#mailbox.dispose();
  }
}
