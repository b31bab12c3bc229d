// `subrun worker`: takes children from the control plane and runs them through the same Runner
// contract as in-process, heartbeating its capacity and dropping any child whose epoch is fenced.
import { sleep, systemClock, type Clock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import { randomIds } from '../../ids.ts';
import type { CompletionEntry, DelegateOptions, RunOutcome, Runner, Steer, TaskSpec } from '../../types.ts';
import { isOutcome } from '../../delegation/run-child.ts';
import type { RunnerKinds } from '../../delegation/runners/kinds.ts';
import {
  type Assign,
  type AssignReply,
  assignSchema,
  controlRequestSchema,
  type Drop,
  dropSchema,
  encode,
  guarded,
  type Heartbeat,
  inboundSchema,
  parse,
  spawnReplySchema,
  type SpawnRequest,
  subjects,
  type TakenRequest,
  takenReplySchema,
  tryParse,
} from '../wire.ts';
import { describe, isNoResponders, isTimeout, openNats, type NatsLink } from '../nats.ts';
import { every, Latch, within } from '../wait.ts';
import { Mailbox } from './mailbox.ts';
import { refusedEntry, WorkerContext } from './worker-context.ts';
import { workerTelemetry } from './worker-trace.ts';
import { traceCarrier, traceHeaders } from '../trace-headers.ts';
import type { Msg, Subscription } from '@nats-io/transport-node';

export interface WorkerOptions {
  readonly url: string;
  /** Children it runs at once (those waiting only for their own children do not count). Default 16. */
  readonly max_children?: number;
  /** Heartbeat period. Default 1000 ms (keep it well under the control plane's --worker-loss-ms). */
  readonly heartbeat_ms?: number;
  readonly kinds: RunnerKinds;
  readonly logger: Logger;
  /** Every wait and timestamp of the worker and of its children's contexts. Default: the system clock. */
  readonly clock?: Clock;
  /** Its id (newWorkerId()); the CLI makes it first, to name its spans' resource. Default: a new one. */
  readonly id?: string;
}

/** A new worker id (`wk_` and 12 random characters). */
export function newWorkerId(): string {
  return `wk_${randomIds.subagent().slice(3)}`;
}

/** How long a spawn is asked again while no control plane answers (one restarting). */
const SPAWN_RETRY_MS = 30_000;

/** How long a receipt request waits for the control plane (it first waits for publishes in flight). */
const RECEIPT_MS = 8000;

/** One child on this worker. */
interface Held {
  readonly assign: Assign;
  readonly ctx: WorkerContext;
  readonly mailbox: Mailbox;
  readonly subs: Subscription[];
  /** Delegations in flight: while any is, the child holds no slot. */
  waiting: number;
  /** Entries of the child's delegations, by delegation_id. */
  readonly results: Map<string, (entries: CompletionEntry[]) => void>;
}

export class Worker {
  readonly id: string;
  readonly #link: NatsLink;
  readonly #options: WorkerOptions;
  readonly #capacity: number;
  readonly #clock: Clock;
  readonly #held = new Map<string, Held>();
  #stopHeartbeats: (() => void) | undefined;
  /** Ends the keep-alive held from start to stop. */
  #endKeepAlive: (() => void) | undefined;
  /** Opened when the last child is released during stop(). */
  #drained: Latch | undefined;
  #draining = false;
  /**
   * Refused an assignment as full since its last heartbeat: the control plane skips it until it
   * hears from it again, so the next child let go says at once that there is room.
   */
  #refusedFull = false;

  private constructor(link: NatsLink, options: WorkerOptions, clock: Clock) {
    this.#link = link;
    this.#options = options;
    this.#clock = clock;
    this.#capacity = options.max_children ?? 16;
    this.id = options.id ?? newWorkerId();
  }

  static async start(options: WorkerOptions): Promise<Worker> {
    const clock = options.clock ?? systemClock;
    const link = await openNats(options.url, 'subrun-worker', clock);
    const w = new Worker(link, options, clock);
    w.#listen();
    return w;
  }

  get running(): number {
    let n = 0;
    for (const h of this.#held.values()) if (h.waiting === 0) n++;
    return n;
  }

  #listen(): void {
    const { nc } = this.#link;
    const log = this.#options.logger;
    nc.subscribe(subjects.assign(this.id), {
      callback: guarded(log, (m) => {
        const reply = this.#assign(parse(assignSchema, m.data, log, m.subject), traceCarrier(m.headers));
        m.respond(encode(reply));
      }),
    });
    nc.subscribe(subjects.drop(this.id), { callback: guarded(log, (m) => this.#drop(parse(dropSchema, m.data, log, m.subject))) });
    this.#heartbeat();
    // The process lives as long as the worker does (the clock's timers keep nothing alive).
    this.#endKeepAlive = this.#clock.keepAlive?.();
    this.#stopHeartbeats = every(this.#clock, this.#options.heartbeat_ms ?? 1000, () => this.#heartbeat());
    this.#options.logger.info({ worker: this.id, capacity: this.#capacity }, 'worker ready');
  }

  #heartbeat(): void {
    if (this.#link.nc.isClosed()) return;
    this.#refusedFull = false;
    const hb: Heartbeat = {
      worker: this.id,
      capacity: this.#capacity,
      children: [...this.#held.values()].map((h) => ({ child: h.assign.child, epoch: h.assign.epoch })),
    };
    this.#link.nc.publish(subjects.heartbeat(this.id), encode(hb));
  }

  /** `trace`: the child's W3C context from the assignment's headers (its span on the control plane). */
  #assign(a: Assign | undefined, trace: Record<string, string>): AssignReply {
    if (!a) return { ok: false, reason: 'invalid' };
    if (this.#draining) return { ok: false, reason: 'draining' };
    const held = this.#held.get(a.child);
    if (held?.assign.epoch === a.epoch) return { ok: true };
    // Assigned again at a new epoch (the control plane gave up waiting for our answer): the old
    // run is fenced; this one starts afresh.
    if (held) this.#drop({ children: [{ child: a.child, epoch: held.assign.epoch }] });
    if (this.running >= this.#capacity) {
      this.#refusedFull = true;
      return { ok: false, reason: 'full' };
    }
    const runner = this.#resolve(a.agent);
    if (!runner) return { ok: false, reason: 'invalid' };
    this.#start(a, runner, trace);
    return { ok: true };
  }

  #resolve(agent: Record<string, unknown>): Runner | undefined {
    const name = typeof agent.kind === 'string' ? agent.kind : '';
    const kind = Object.hasOwn(this.#options.kinds, name) ? this.#options.kinds[name] : undefined;
    if (!kind) return undefined;
    const spec = kind.schema.safeParse(agent);
    if (!spec.success) return undefined;
    try {
      return kind.create(spec.data);
    } catch {
      return undefined;
    }
  }

  #start(a: Assign, runner: Runner, trace: Record<string, string>): void {
    const { nc } = this.#link;
    const mailbox = new Mailbox({ clock: this.#clock, ask: () => this.#receipt(a) });
    const results = new Map<string, (entries: CompletionEntry[]) => void>();
    const base = { epoch: a.epoch, worker: this.id };
    const send = (ev: object) => nc.publish(subjects.events(a.child), encode({ ...ev, ...base }));
    const held: Held = {
      assign: a,
      mailbox,
      results,
      subs: [],
      waiting: 0,
      ctx: new WorkerContext(
        a,
        {
          clock: this.#clock,
          send,
          spawn: (delegation_id, subagent_ids, tasks, options) => this.#spawn(held, delegation_id, subagent_ids, tasks, options),
        },
        mailbox,
        workerTelemetry(trace),
      ),
    };
    this.#held.set(a.child, held);
    // Subscribed before the assignment is answered: an interrupt right after it finds a responder.
    const log = this.#options.logger;
    held.subs.push(
      nc.subscribe(subjects.control(a.child), {
        callback: guarded(log, (m) => {
          const req = parse(controlRequestSchema, m.data, log, m.subject);
          if (req?.op === 'interrupt' && req.epoch === a.epoch) held.ctx.abort('interrupt');
          m.respond(encode({ ok: true }));
        }),
      }),
      nc.subscribe(subjects.inbound(a.child), {
        callback: guarded(log, (m) => {
          const msg = parse(inboundSchema, m.data, log, m.subject);
          if (!msg) return;
          if (msg.type === 'steer') {
            if (msg.epoch === a.epoch) mailbox.notice();
            return;
          }
          results.get(msg.delegation_id)?.(msg.entries);
          results.delete(msg.delegation_id);
        }),
      }),
    );
    void this.#run(held, runner);
  }

  async #run(held: Held, runner: Runner): Promise<void> {
    const { ctx } = held;
    let outcome: RunOutcome;
    try {
      const out: unknown = await runner.run(ctx);
      outcome = isOutcome(out) ? out : { status: 'failed', error: 'runner returned an invalid outcome' };
    } catch (err) {
      outcome = { status: 'failed', error: describe(err) };
    }
    if (!ctx.open) return; // dropped meanwhile
    ctx.close();
    held.mailbox.close();
    this.#link.nc.publish(subjects.events(held.assign.child), encode({ type: 'finish', outcome, epoch: held.assign.epoch, worker: this.id }));
    this.#letGo(held);
  }

  /**
   * The control plane's taken receipt for the steers waiting for this child: until it answers,
   * none of them may reach a model request. No answer (the control plane gone or restarting): undefined.
   */
  async #receipt(a: Assign): Promise<readonly Steer[] | undefined> {
    const req: TakenRequest = { epoch: a.epoch, worker: this.id };
    try {
      const m = await this.#link.request(subjects.taken(a.child), encode(req), { timeout: RECEIPT_MS });
      const reply = tryParse(takenReplySchema, m.data);
      return reply?.ok ? reply.steers : undefined;
    } catch {
      return undefined;
    }
  }

  #spawn(held: Held, delegation_id: string, subagent_ids: readonly string[], tasks: readonly TaskSpec[], options: DelegateOptions): Promise<CompletionEntry[]> {
    const own = held.assign.agent;
    // A task with an in-process runner object (the openai runner's grandchildren) runs the parent's own spec.
    const wire = tasks.map((t) => {
      const agent = t.agent !== undefined ? t.agent : t.runner !== undefined ? own : undefined;
      return { goal: t.goal, ...(t.context !== undefined ? { context: t.context } : {}), ...(agent !== undefined ? { agent } : {}) };
    });
    const req: SpawnRequest = {
      epoch: held.assign.epoch,
      worker: this.id,
      delegation_id,
      subagent_ids,
      tasks: wire,
      ...(options.timeout_ms !== undefined ? { timeout_ms: options.timeout_ms } : {}),
    };
    return new Promise((resolve) => {
      const refused = (error: string) => resolve(subagent_ids.map((subagent_id, task_index) => refusedEntry(subagent_id, task_index, error)));
      held.waiting++;
      held.results.set(delegation_id, (entries) => {
        held.waiting--;
        resolve(entries);
      });
      this.#askSpawn(held, req)
        .then((m) => {
          const reply = tryParse(spawnReplySchema, m.data);
          if (!reply?.ok) {
            held.results.delete(delegation_id);
            held.waiting--;
            refused(reply ? reply.error : 'spawn refused');
          }
        })
        .catch((err: unknown) => {
          held.results.delete(delegation_id);
          held.waiting--;
          refused(`spawn failed: ${describe(err)}`);
        });
    });
  }

  /**
   * The spawn request, asked again while nobody answers (the control plane restarting: a new one
   * adopts this child and answers; one that had made the spawn already says so, it is not made
   * twice), for up to SPAWN_RETRY_MS; then the spawning step fails visibly.
   */
  async #askSpawn(held: Held, req: SpawnRequest): Promise<Msg> {
    const until = this.#clock.now() + SPAWN_RETRY_MS;
    // The span the spawn is made in (the child's tool call): a remote grandchild nests under it.
    const trace: Record<string, string> = {};
    held.ctx.telemetry.inject(trace);
    const headers = traceHeaders(trace);
    for (;;) {
      try {
        return await this.#link.request(subjects.spawn(held.assign.child), encode(req), { timeout: 5000, ...(headers ? { headers } : {}) });
      } catch (err) {
        if (!held.ctx.open || this.#clock.now() >= until || !(isNoResponders(err) || isTimeout(err))) throw err;
        await sleep(this.#clock, 500, held.ctx.signal);
      }
    }
  }

  #drop(d: Drop | undefined): void {
    if (!d) return;
    for (const { child, epoch } of d.children) {
      const held = this.#held.get(child);
      if (!held || held.assign.epoch !== epoch) continue;
      // Fenced: nothing more about this child may leave this worker.
      held.ctx.close();
      held.ctx.abort('dropped');
      held.mailbox.close();
      this.#letGo(held);
      this.#options.logger.warn({ subagent_id: child, epoch }, `dropped ${child} (epoch ${epoch} fenced by the control plane)`);
    }
  }

  /** Lets a child go (finished or dropped): its slot and subscriptions. */
  #letGo(held: Held): void {
    for (const s of held.subs) s.unsubscribe();
    this.#held.delete(held.assign.child);
    // Only a worker the control plane counts as full says so at once; otherwise the periodic
    // heartbeat carries the change. One per child let go listed every child held, and the control
    // plane went through them all each time: work that grew with the square of a busy worker's
    // children (bench: remote.cp_cpu_per_child).
    if (this.#refusedFull) this.#heartbeat();
    if (this.#held.size === 0) this.#drained?.open();
  }

  /** Stops taking children, interrupts those it holds, sends their outcomes (within the grace), then closes. */
  async stop(grace_ms = 5000): Promise<void> {
    this.#draining = true;
    const drained = (this.#drained = new Latch());
    if (this.#held.size === 0) drained.open();
    for (const h of this.#held.values()) h.ctx.abort('interrupt');
    await within(this.#clock, grace_ms, drained.promise);
    this.#stopHeartbeats?.();
    this.#endKeepAlive?.();
    await this.#link.close();
  }
}
