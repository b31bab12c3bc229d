// The Runner the control plane gives a remote child: it holds the agent spec the worker resolves and
// hands each stage (place, run, steer, commit) to the child's RemoteChild; nothing per child lives here.
import type { RunOutcome, Runner, RunnerContext, Steer, SteerCommit } from '../../types.ts';
import type { PlacementPort } from './port.ts';

export class RemoteRunner implements Runner {
  readonly model: string;
  readonly #p: PlacementPort;
  readonly #agent: Record<string, unknown>;

  constructor(placement: PlacementPort, agent: Record<string, unknown>, model: string) {
    this.#p = placement;
    this.#agent = agent;
    this.model = model;
  }

  #child(ctx: RunnerContext) {
    const known = this.#p.find(ctx.subagent_id);
    if (known) return known;
    const c = this.#p.child(ctx.subagent_id, this.#agent);
    // A child stopped before it was ever placed (still queued) leaves no mailbox behind.
    const signal = ctx.signal;
    signal.addEventListener('abort', () => setTimeout(() => c.disposeIfIdle(), 0), { once: true });
    return c;
  }

  place(ctx: RunnerContext): Promise<void> {
    return this.#child(ctx).place(ctx);
  }

  run(ctx: RunnerContext): Promise<RunOutcome> {
    return this.#child(ctx).run(ctx);
  }

  /** The steer is accepted: publish it now (msgID = steer_id); the host hears `queued` on its ack. */
  onSteer(steer: Steer, ctx: RunnerContext): void {
    this.#child(ctx).publishSteer(steer);
  }

  committed(subagent_id: string, steer_id: string): Promise<SteerCommit> | undefined {
    return this.#p.find(subagent_id)?.committed(steer_id);
  }

  outlives(subagent_id: string): boolean {
    return this.#p.adoptive && this.#p.find(subagent_id)?.placed === true;
  }

  abandon(subagent_id: string): void {
    this.#p.find(subagent_id)?.abandon();
  }
}
