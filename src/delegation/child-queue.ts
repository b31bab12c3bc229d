// One parent's queue of children (p-queue caps how many run at once). A child stopped while waiting
// leaves a dead entry; once the dead outnumber the living the line is rebuilt, so cancelled ones never pile up.
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

const NOTHING_HELD: Promise<unknown> = Promise.resolve();

export class ChildQueue {
  readonly #pq: PQueue;
  /**
   * Children added and not yet started, oldest first from #head (p-queue starts them in order). A
   * started child's place is emptied at once, so the line never keeps a started child's record alive.
   */
  #line: Array<QueuedChild | undefined> = [];
  #head = 0;
  /** Entries in the line whose child already finished without starting. */
  #dead = 0;
  /**
   * What p-queue runs for every child: it starts tasks in the order they were added, as the line
   * holds them, so one function made per queue finds its child at the head (a closure per child
   * was kept alive for as long as it waited: bench delegation.per_child).
   */
  readonly #next = (): Promise<unknown> => this.#start();

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
    void this.#pq.add(this.#next);
  }

  /** A child in this line finished before its turn (stopped while queued). */
  dropped(): void {
    this.#dead++;
    if (this.#dead >= MIN_DEAD_TO_COMPACT && this.#dead * 2 > this.#line.length - this.#head) this.#compact();
  }

  #start(): Promise<unknown> {
    // FIFO: the child starting is the one at the head of the line (every task added has its place).
    const live = this.#line[this.#head];
    if (live === undefined) return NOTHING_HELD; // never: each task p-queue runs was added with its child
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
