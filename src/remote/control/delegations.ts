// A remote child's own delegations, as the control plane keeps them: each spawn made once (one
// asked again is answered, not made twice), the worker slot given back while any is in flight,
// the entries sent to the worker when they are all in, and what it waits for kept in its progress.
import { isSubrunError } from '../../errors.ts';
import type { CompletionEntry, DelegationHandle, RunnerContext, TaskSpec } from '../../types.ts';
import { describe } from '../nats.ts';
import { parentFrom, within } from '../../telemetry/context.ts';
import { encode, type Inbound, type SpawnReply, type SpawnRequest, subjects } from '../wire.ts';
import type { PlacementPort, RemoteProgress } from './port.ts';

/** What the delegations need of their child. */
export interface DelegatingChild {
  readonly id: string;
  readonly worker: string | undefined;
  readonly epoch: number;
  readonly settled: boolean;
}

export class ChildDelegations {
  readonly #p: PlacementPort;
  readonly #child: DelegatingChild;
  /** Every delegation made for it, by id. */
  readonly #made = new Set<string>();
  /** Those whose entries its worker still waits for. */
  readonly #waiting = new Set<string>();
  /** The context its progress is saved through (from its placement on). */
  #ctx: RunnerContext | undefined;

  constructor(placement: PlacementPort, child: DelegatingChild) {
    this.#p = placement;
    this.#child = child;
  }

  /** Whether any delegation is in flight (the child then holds no worker slot). */
  get waiting(): boolean {
    return this.#waiting.size > 0;
  }

  /** The child is placed: where it runs goes into its progress (a restart adopts it there). */
  placed(ctx: RunnerContext): void {
    this.#ctx = ctx;
    this.#save();
  }

  /** `trace`: the W3C context the spawn request carried (the worker's span it was made in). */
  spawn(ctx: RunnerContext, req: SpawnRequest, trace: Readonly<Record<string, string>> = {}): SpawnReply {
    // Asked again (its answer was lost, or this control plane restarted since): spawned once.
    if (this.#made.has(req.delegation_id)) return { ok: true };
    let handle: DelegationHandle;
    try {
      const tasks: TaskSpec[] = req.tasks.map((t) => ({
        goal: t.goal,
        ...(t.context !== undefined ? { context: t.context } : {}),
        ...(t.agent ? { agent: t.agent } : {}),
      }));
      const delegate = () => ctx.delegate(tasks, req.timeout_ms !== undefined ? { timeout_ms: req.timeout_ms } : {});
      const parent = parentFrom(trace);
      handle = this.#p.ids.preassigned(req.delegation_id, req.subagent_ids, () => (parent ? within(parent, delegate) : delegate()));
    } catch (err) {
      return { ok: false, error: isSubrunError(err) ? err.message : describe(err) };
    }
    this.await(handle.delegation_id, handle.results);
    return { ok: true };
  }

  /**
   * A delegation in flight (made here, or resumed after a restart): while any is, the child holds
   * no worker slot (so deep trees cannot deadlock); its entries go to the worker when all are in.
   */
  await(delegation_id: string, results: Promise<CompletionEntry[]>): void {
    this.#made.add(delegation_id);
    const first = this.#waiting.size === 0;
    this.#waiting.add(delegation_id);
    this.#save();
    const { worker } = this.#child;
    if (first && worker) this.#p.workers.release(worker);
    void results.then((entries) => {
      this.#waiting.delete(delegation_id);
      this.#save();
      const c = this.#child;
      if (this.#waiting.size === 0 && c.worker && !c.settled) this.#p.workers.retake(c.worker);
      // A closed connection throws here: logged, never an unhandled rejection.
      try {
        if (!c.settled) this.#p.link.nc.publish(subjects.inbound(c.id), encode({ type: 'results', delegation_id, entries } satisfies Inbound));
      } catch (err) {
        this.#p.logger.warn({ subagent_id: c.id, err: describe(err) }, 'could not send a delegation’s entries to the worker');
      }
    });
  }

  #save(): void {
    const c = this.#child;
    if (!this.#ctx || c.worker === undefined) return;
    const progress: RemoteProgress = { remote: { worker: c.worker, epoch: c.epoch }, delegations: [...this.#waiting] };
    this.#ctx.saveProgress(progress);
  }
}
