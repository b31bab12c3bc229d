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
  readonly #concurrency: number;
  /**
   * Tasks handed to p-queue and not yet started. p-queue is given only as many as it could start
   * at once (its concurrency), topped up as each starts: it starts the same children at the same
   * moments as with every child added up front, but a waiting child costs an entry in the line
   * here instead of p-queue's task state (a promise, an options object, four closures, an id
   * string and a symbol: about 800 bytes, kept and copied by the GC for as long as the child waits;
   * bench: delegation.per_child).
   */
  #handed = 0;
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
    this.#handOn();
  }

  /** Gives p-queue a task for each waiting child it has none for, up to what it could start at once. */
  #handOn(): void {
    while (this.#handed < this.#concurrency && this.#handed < this.#line.length - this.#head) {
      this.#handed++;
      // p-queue may start it at once (a free slot), re-entering #start: counted before.
      void this.#pq.add(this.#next);
    }
  }

  /** A child in this line finished before its turn (stopped while queued). */
  dropped(): void {
    this.#dead++;
    if (this.#dead >= MIN_DEAD_TO_COMPACT && this.#dead * 2 > this.#line.length - this.#head) this.#compact();
  }

  #start(): Promise<unknown> {
    // FIFO: the child starting is the one at the head of the line (every task added has its place).
    const live = this.#line[this.#head];
    this.#handed--;
    if (live === undefined) return NOTHING_HELD; // never: p-queue holds no more tasks than children wait
    this.#line[this.#head++] = undefined;
    if (live.record.finished) this.#dead--;
    if (this.#head >= 1024 && this.#head * 2 >= this.#line.length) {
      this.#line = this.#line.slice(this.#head);
      this.#head = 0;
    }
    // The child starts before the next task is handed on: p-queue may start that one at once, and
    // children start in the order they were added.
    const held = live.holdSlot();
    this.#handOn();
    return held;
  }

  /** Drops every waiting entry and adds back, in order, the children still waiting. */
  #compact(): void {
    const waiting = this.#line.slice(this.#head).filter((l): l is QueuedChild => l !== undefined && !l.record.finished);
    // clear() removes only entries not yet started; the promises of the dropped ones never
    // settle, and nothing awaits them.
    this.#pq.clear();
    this.#handed = 0;
    this.#line = [];
    this.#head = 0;
    this.#dead = 0;
    for (const l of waiting) this.add(l);
  }
}
