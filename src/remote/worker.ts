// `subrun worker`: takes children from the control plane and runs them with the runner kinds it
// knows (the same Runner contract as in-process). It heartbeats its capacity and the children it
// holds; answers interrupts; sends each child's events and outcome in order; and drops a child
// when the control plane says its epoch is fenced (this worker was declared lost and came back).
import type { Logger } from '../log.ts';
import { randomIds } from '../ids.ts';
import type { CompletionEntry, DelegateOptions, RunOutcome, Runner, TaskSpec } from '../types.ts';
import type { RunnerKinds } from '../delegation/runners/kinds.ts';
import { encode, subjects, type Assign, type AssignReply, type Drop, type Heartbeat, type SpawnRequest } from './protocol.ts';
import { assignSchema, controlRequestSchema, dropSchema, guarded, inboundSchema, parse, spawnReplySchema, tryParse } from './messages.ts';
import { describe, openNats, type NatsLink } from './nats.ts';
import { Mailbox } from './mailbox.ts';
import { WorkerContext } from './worker-context.ts';
import type { Subscription } from '@nats-io/transport-node';

export interface WorkerOptions {
  readonly url: string;
  /** Children it runs at once (those waiting only for their own children do not count). Default 16. */
  readonly max_children?: number;
  /** Heartbeat period. Default 1000 ms (keep it well under the control plane's --worker-loss-ms). */
  readonly heartbeat_ms?: number;
  readonly kinds: RunnerKinds;
  readonly logger: Logger;
}

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
  readonly id = `wk_${randomIds.subagent().slice(3)}`;
  readonly #link: NatsLink;
  readonly #options: WorkerOptions;
  readonly #capacity: number;
  readonly #held = new Map<string, Held>();
  #timer: NodeJS.Timeout | undefined;
  #draining = false;

  private constructor(link: NatsLink, options: WorkerOptions) {
    this.#link = link;
    this.#options = options;
    this.#capacity = options.max_children ?? 16;
  }

  static async start(options: WorkerOptions): Promise<Worker> {
    const link = await openNats(options.url, 'subrun-worker');
    const w = new Worker(link, options);
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
        const reply = this.#assign(parse(assignSchema, m.data, log, m.subject));
        m.respond(encode(reply));
      }),
    });
    nc.subscribe(subjects.drop(this.id), { callback: guarded(log, (m) => this.#drop(parse(dropSchema, m.data, log, m.subject))) });
    this.#heartbeat();
    this.#timer = setInterval(() => this.#heartbeat(), this.#options.heartbeat_ms ?? 1000);
    this.#options.logger.info({ worker: this.id, capacity: this.#capacity }, 'worker ready');
  }

  #heartbeat(): void {
    if (this.#link.nc.isClosed()) return;
    const hb: Heartbeat = { worker: this.id, capacity: this.#capacity, children: [...this.#held.values()].map((h) => ({ child: h.assign.child, epoch: h.assign.epoch })) };
    this.#link.nc.publish(subjects.heartbeat(this.id), encode(hb));
  }

  #assign(a: Assign | undefined): AssignReply {
    if (!a) return { ok: false, reason: 'invalid' };
    if (this.#draining) return { ok: false, reason: 'draining' };
    const held = this.#held.get(a.child);
    if (held?.assign.epoch === a.epoch) return { ok: true };
    // Assigned again at a new epoch (the control plane gave up waiting for our answer): the old
    // run is fenced; this one starts afresh.
    if (held) this.#drop({ children: [{ child: a.child, epoch: held.assign.epoch }] });
    if (this.running >= this.#capacity) return { ok: false, reason: 'full' };
    const runner = this.#resolve(a.agent);
    if (!runner) return { ok: false, reason: 'invalid' };
    this.#start(a, runner);
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

  #start(a: Assign, runner: Runner): void {
    const { nc, js, jsm } = this.#link;
    const mailbox = new Mailbox();
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
          send,
          spawn: (delegation_id, subagent_ids, tasks, options) => this.#spawn(held, delegation_id, subagent_ids, tasks, options),
        },
        mailbox,
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
          results.get(msg.delegation_id)?.(msg.entries as CompletionEntry[]);
          results.delete(msg.delegation_id);
        }),
      }),
    );
    void (async () => {
      try {
        await mailbox.open(js, jsm, a.child);
      } catch (err) {
        this.#options.logger.warn({ subagent_id: a.child, err: describe(err) }, 'mailbox not available');
      }
    })();
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
    this.#link.nc.publish(
      subjects.events(held.assign.child),
      encode({ type: 'finish', outcome, epoch: held.assign.epoch, worker: this.id }),
    );
    this.#release(held);
  }

  #spawn(held: Held, delegation_id: string, subagent_ids: readonly string[], tasks: readonly TaskSpec[], options: DelegateOptions): Promise<CompletionEntry[]> {
    const own = held.assign.agent;
    // A task with an in-process runner object (the openai runner's grandchildren) runs the parent's own spec.
    const wire = tasks.map((t) => ({
      goal: t.goal,
      ...(t.context !== undefined ? { context: t.context } : {}),
      ...(t.agent !== undefined ? { agent: t.agent as Record<string, unknown> } : t.runner !== undefined ? { agent: own } : {}),
    }));
    const req: SpawnRequest = { epoch: held.assign.epoch, worker: this.id, delegation_id, subagent_ids, tasks: wire as SpawnRequest['tasks'], ...(options.timeout_ms !== undefined ? { timeout_ms: options.timeout_ms } : {}) };
    return new Promise((resolve) => {
      const refused = (error: string) => resolve(subagent_ids.map((subagent_id, task_index) => refusedEntry(subagent_id, task_index, error)));
      held.waiting++;
      held.results.set(delegation_id, (entries) => {
        held.waiting--;
        resolve(entries);
      });
      this.#link.nc
        .request(subjects.spawn(held.assign.child), encode(req), { timeout: 5000 })
        .then((m) => {
          const reply = tryParse(spawnReplySchema, m.data);
          if (!reply?.ok) {
            held.results.delete(delegation_id);
            held.waiting--;
            refused(reply && !reply.ok ? reply.error : 'spawn refused');
          }
        })
        .catch((err: unknown) => {
          held.results.delete(delegation_id);
          held.waiting--;
          refused(`spawn failed: ${describe(err)}`);
        });
    });
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
      this.#release(held);
      this.#options.logger.warn({ subagent_id: child, epoch }, 'dropped a fenced child');
      process.stderr.write(`subrun worker: dropped ${child} (epoch ${epoch} fenced by the control plane)\n`);
    }
  }

  #release(held: Held): void {
    for (const s of held.subs) s.unsubscribe();
    this.#held.delete(held.assign.child);
    this.#heartbeat();
  }

  /** Stops taking children, interrupts those it holds, sends their outcomes, then closes. */
  async stop(grace_ms = 5000): Promise<void> {
    this.#draining = true;
    for (const h of this.#held.values()) h.ctx.abort('interrupt');
    const deadline = Date.now() + grace_ms;
    while (this.#held.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    clearInterval(this.#timer);
    await this.#link.close();
  }
}

function refusedEntry(subagent_id: string, task_index: number, error: string): CompletionEntry {
  return { task_index, subagent_id, status: 'error', exit_reason: 'spawn_refused', summary: '', error, api_calls: 0, duration_seconds: 0, model: '', tokens: { input: 0, output: 0 }, tool_trace: [] };
}

function isOutcome(value: unknown): value is RunOutcome {
  if (typeof value !== 'object' || value === null) return false;
  const status = (value as { status?: unknown }).status;
  return status === 'completed' || status === 'failed' || status === 'interrupted';
}
