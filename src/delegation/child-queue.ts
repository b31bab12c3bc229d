// One parent's queue of children: p-queue caps how many run at once. A child stopped while it
// waits completes at once, but its p-queue entry stays until its turn (p-queue takes an entry out
// early only through an AbortSignal listener per entry, about 8 µs each on Node 20, paid by every
// child). So the dead entries are counted, and once they outnumber the living ones the waiting
// line is rebuilt without them: a host that keeps spawning and cancelling while every slot is
// held by long-running children holds at most about twice the live line, not every child it ever
// cancelled (with its record, context and transcript).
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
  /**
   * Children added and not yet started, oldest first from #head (p-queue starts them in order).
   * A started child's place is emptied at once: the line held every started child (its record,
   * context and transcript) until 1,024 had started, so a session that ran a few children kept
   * them all after it closed.
   */
  #line: Array<QueuedChild | undefined> = [];
  #head = 0;
  /** Entries in the line whose child already finished without starting. */
  #dead = 0;

  constructor(concurrency: number) {
    this.#pq = new PQueue({ concurrency });
  }

  /** Children waiting for a slot (dead entries included), for tests and diagnostics. */
  get waiting(): number {
    return this.#pq.size;
  }

  add(live: QueuedChild): void {
    this.#line.push(live);
    live.queue = this;
    void this.#pq.add(() => this.#start(live));
  }

  /** A child in this line finished before its turn (stopped while queued). */
  dropped(): void {
    this.#dead++;
    if (this.#dead >= MIN_DEAD_TO_COMPACT && this.#dead * 2 > this.#line.length - this.#head) this.#compact();
  }

  #start(live: QueuedChild): Promise<unknown> {
    // FIFO: the child starting is the one at the head of the line.
    this.#line[this.#head++] = undefined;
    if (live.record.finished) this.#dead--;
    if (this.#head >= 1024 && this.#head * 2 >= this.#line.length) {
      this.#line = this.#line.slice(this.#head);
      this.#head = 0;
    }
    return live.holdSlot();
  }

  /** Drops every waiting entry and adds back, in order, the children still waiting. */
  #compact(): void {
    const waiting = this.#line.slice(this.#head).filter((l): l is QueuedChild => l !== undefined && !l.record.finished);
    // clear() removes only entries not yet started; the promises of the dropped ones never
    // settle, and nothing awaits them.
    this.#pq.clear();
    this.#line = [];
    this.#head = 0;
    this.#dead = 0;
    for (const l of waiting) this.add(l);
  }
}
