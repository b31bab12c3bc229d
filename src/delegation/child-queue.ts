// One parent's queue of children (p-queue caps how many run at once). A child stopped while waiting
// leaves a dead entry, skipped at its turn; once the dead outnumber the living the line is rebuilt,
// so cancelled ones never pile up.
import PQueue from 'p-queue';

/** What the queue needs of a child (the lifecycle in run-child.ts is one). */
export interface QueuedChild {
  /** The line it waits in, set when it is added. */
  queue: ChildQueue | undefined;
  readonly record: { readonly finished: boolean };
  /** Starts the child; resolves when its slot may be given to the next one. Never rejects. */
  holdSlot(): Promise<unknown>;
}

/** Below this many dead entries the line is never rebuilt (a rebuild copies the line). */
const MIN_DEAD_TO_COMPACT = 64;

export class ChildQueue {
  readonly #pq: PQueue;
  readonly #concurrency: number;
  /**
   * Runs handed to p-queue and not yet returned: each is one of its slots, and runs the children at
   * the head of the line one after another until the line is empty. p-queue's cap is the cap on
   * children running at once, as it was with one task per child, but a child costs an entry in the
   * line, not p-queue's state for a task (a promise, an options object, four closures, an id string
   * and a symbol: about 1.7 KB made per child; bench: delegation.per_child).
   */
  #runs = 0;
  /**
   * Children added and not yet started, oldest first from #head. A started child's place is
   * emptied at once, so the line never keeps a started child's record alive.
   */
  #line: Array<QueuedChild | undefined> = [];
  #head = 0;
  /** Entries in the line whose child already finished without starting. */
  #dead = 0;
  /** What p-queue runs: made once per queue, not a closure per run. */
  readonly #run = (): Promise<void> => this.#runLine();

  constructor(concurrency: number) {
    this.#concurrency = concurrency;
    this.#pq = new PQueue({ concurrency });
  }

  /** Children waiting for a slot (dead entries included), for tests and diagnostics. */
  get waiting(): number {
    return this.#line.length - this.#head;
  }

  add(live: QueuedChild): void {
    this.#line.push(live);
    live.queue = this;
    // A run per slot at most: p-queue may start it at once, and it takes this child then.
    if (this.#runs < this.#concurrency) {
      this.#runs++;
      void this.#pq.add(this.#run);
    }
  }

  /** A child in this line finished before its turn (stopped while queued). */
  dropped(): void {
    this.#dead++;
    if (this.#dead >= MIN_DEAD_TO_COMPACT && this.#dead * 2 > this.#line.length - this.#head) this.#compact();
  }

  /** One slot: the children at the head of the line, each until its slot may go to the next. Never rejects. */
  async #runLine(): Promise<void> {
    for (let live = this.#next(); live !== undefined; live = this.#next()) await live.holdSlot();
  }

  /**
   * The next child to start (FIFO), its place emptied; a child that finished while it waited is
   * skipped. With none left, the run ends: counted out in this same step, so a child added next
   * gets a run of its own.
   */
  #next(): QueuedChild | undefined {
    while (this.#head < this.#line.length) {
      const live = this.#line[this.#head];
      this.#line[this.#head++] = undefined;
      if (this.#head >= 1024 && this.#head * 2 >= this.#line.length) {
        this.#line = this.#line.slice(this.#head);
        this.#head = 0;
      }
      if (live === undefined) continue;
      if (!live.record.finished) return live;
      this.#dead--;
    }
    this.#runs--;
    return undefined;
  }

  /** Drops every dead entry, the living keeping their order. */
  #compact(): void {
    this.#line = this.#line.slice(this.#head).filter((l): l is QueuedChild => l !== undefined && !l.record.finished);
    this.#head = 0;
    this.#dead = 0;
  }
}
