// A remote child's steers as the control plane accounts them: the worker's taken receipts (granted
// here, before any steer can reach a model request), its deliveries, and the loss, after which
// every steer has exactly one of three fates (docs/scale-out.md, "Exact accounting").
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

  constructor(mailbox: ChildMailbox) {
    this.#mailbox = mailbox;
  }

  attach(ctx: RunnerContext): void {
    this.#ctx = ctx;
  }

  /**
   * The receipt for `ids` (steers the worker fetched): every undelivered steer accepted up to the
   * latest of them, in acceptance order, recorded as granted before the worker hears of it. A
   * steer whose publish is still in flight is waited for first, so the prefix has no hole a later
   * publish could fill: FIFO per child holds whatever the mailbox handed over first. Undefined
   * (nothing granted) if `current` says the asker lost its assignment meanwhile.
   */
  async grant(ids: readonly string[], current: () => boolean): Promise<Steer[] | undefined> {
    await this.#mailbox.settled();
    if (!current()) return undefined;
    this.#pull();
    let line = -1;
    for (const id of ids) {
      const s = this.#pending.get(id);
      if (s && s.seq > line) line = s.seq;
    }
    const granted = [...this.#pending.values()].filter((s) => s.seq <= line).sort((a, b) => a.seq - b.seq);
    for (const s of granted) this.#granted.add(s.steer_id);
    return granted;
  }

  /** Steers the worker reports delivered: delivered in the ledger (transcript + event), once each. */
  confirm(ids: Iterable<string>): void {
    const ctx = this.#ctx;
    if (!ctx) return;
    this.#pull();
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
   * The worker is gone: a granted steer its worker acked (gone from the mailbox) was delivered even
   * if the word of it was lost; the other granted ones may have been; every steer without a
   * receipt was not (maybe_delivered false), whatever JetStream had handed the dead worker's pull.
   * Returns the ids that may have been delivered.
   */
  async settleLoss(): Promise<ReadonlySet<string>> {
    if (this.#granted.size > 0) this.confirm(await this.#mailbox.acked([...this.#granted]));
    return new Set(this.#granted);
  }

  /** Moves what the runtime queued for the child into #pending, in acceptance order. */
  #pull(): void {
    for (const s of this.#ctx?.takeSteers() ?? []) this.#pending.set(s.steer_id, s);
  }
}
