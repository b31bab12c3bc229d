// A remote child's steers as the control plane accounts them: the worker's taken receipts (granted
// here, before any steer can reach a model request), its deliveries, and the loss, after which
// every steer has exactly one of three fates (docs/scale-out.md, "Exact accounting"). The ledger
// alone decides: what the mailbox stream holds is the steers' durable copy, not their state.
import type { RunnerContext, Steer } from '../../types.ts';
import type { ChildMailbox } from './child-mailbox.ts';

export class RemoteSteerLedger {
  readonly #mailbox: ChildMailbox;
  /**
   * Steers taken from the child's inbox here and not yet delivered, by id. Taking them here only
   * moves them out of the runtime's queue; what counts is the receipt (#granted).
   */
  readonly #pending = new Map<string, Steer>();
  /** Steers holding a taken receipt: the worker may have put them in a model request. */
  readonly #granted = new Set<string>();
  #ctx: RunnerContext | undefined;
  #unasked = false;

  constructor(mailbox: ChildMailbox) {
    this.#mailbox = mailbox;
  }

  attach(ctx: RunnerContext): void {
    this.#ctx = ctx;
  }

  /**
   * The receipt: every undelivered steer, in acceptance order, recorded as granted before the
   * worker hears of it (granted again if an earlier answer was lost). Publishes still in flight
   * are waited for first, so no steer is handed over while an earlier one is undecided: FIFO per
   * child. Undefined (nothing granted) if `current` says the asker lost its assignment meanwhile.
   */
  async grant(current: () => boolean): Promise<Steer[] | undefined> {
    await this.#mailbox.settled();
    if (!current()) return undefined;
    this.#unasked = false;
    this.#pull();
    const granted = [...this.#pending.values()].sort((a, b) => a.seq - b.seq);
    for (const s of granted) this.#granted.add(s.steer_id);
    return granted;
  }

  /** After a restart: steers that held receipts, taken again from the rebuilt child's inbox. */
  restore(taken: readonly Steer[]): void {
    for (const s of taken) {
      this.#pending.set(s.steer_id, s);
      this.#granted.add(s.steer_id);
    }
  }

  /** Steers the worker reports delivered: delivered in the ledger (transcript + event), once each. */
  confirm(ids: Iterable<string>): void {
    const ctx = this.#ctx;
    if (!ctx) return;
    // No pull here: a delivery names only granted steers, and taking the rest now would write
    // them down as taken (a restart would then count them as holding a receipt).
    const steers: Steer[] = [];
    for (const id of ids) {
      const s = this.#pending.get(id);
      if (!s) continue;
      steers.push(s);
      this.#pending.delete(id);
      this.#granted.delete(id);
    }
    if (steers.length > 0) ctx.confirmDelivered(steers.sort((a, b) => a.seq - b.seq));
  }

  /**
   * The worker is gone: a steer holding a receipt may have reached the model (maybe delivered);
   * every other one did not, whatever JetStream or the network held (maybe_delivered false).
   * Returns the ids that may have been delivered.
   */
  settleLoss(): ReadonlySet<string> {
    return new Set(this.#granted);
  }

  /** A steer's publish settled (stored, or unknown): it waits for a receipt. */
  published(): void {
    this.#unasked = true;
  }

  /** Whether a steer published since the last receipt waits for one (a notice may have been lost). */
  get waiting(): boolean {
    return this.#unasked;
  }

  /** Moves what the runtime queued for the child into #pending, in acceptance order. */
  #pull(): void {
    for (const s of this.#ctx?.takeSteers() ?? []) this.#pending.set(s.steer_id, s);
  }
}
