// What one peer of a socket surface (a WebSocket, an event stream) may have queued and not yet
// read. "Stopped reading" is judged by progress over time, never by one turn's burst: eight 1.1 MB
// completions and the delegation entry that repeats them are ~18 MB queued in one synchronous
// turn, before any socket could drain, and a peer reading as fast as loopback allows must get all
// of it. So:
// - over `max_bytes`, a peer is watched: if its backlog is still over the bound after a whole
//   check interval in which it drained nothing, it stopped reading and is dropped;
// - past CEILING_FACTOR times the bound it is dropped at once, reading or not: a burst may pass
//   the bound, a backlog may not grow without end. What one send adds is one frame on top.
// Progress is read off the peer's own buffered count (bytes or UTF-16 units, whatever the socket
// counts): drained = everything added - what is still buffered, in the count's own unit.

/** A backlog past this many times the bound is dropped at once. */
export const CEILING_FACTOR = 4;
/** How long a peer over the bound may drain nothing before it is dropped. */
export const DEFAULT_CHECK_MS = 2_000;

export type DropReason = 'stalled' | 'ceiling';

export interface BacklogOptions {
  /** The bound (`--max-outbound-bytes`). */
  readonly max_bytes: number;
  /** The check interval. Default DEFAULT_CHECK_MS. */
  readonly check_ms?: number;
  /** What the peer holds unsent now. */
  readonly buffered: () => number;
  /** Ends the peer; called at most once. */
  readonly drop: (reason: DropReason, buffered: number) => void;
}

export class Backlog {
  readonly #max: number;
  readonly #ceiling: number;
  readonly #checkMs: number;
  readonly #buffered: () => number;
  readonly #drop: (reason: DropReason, buffered: number) => void;
  /** Everything sends added to the buffered count, in its unit. */
  #added = 0;
  /** What had drained at the last check (`#added - buffered`). */
  #mark = 0;
  #timer: NodeJS.Timeout | undefined;
  /** A watch begun whose interval has not started yet (#watch). */
  #arming: NodeJS.Immediate | undefined;
  #dropped = false;

  constructor(opts: BacklogOptions) {
    this.#max = opts.max_bytes;
    this.#ceiling = opts.max_bytes * CEILING_FACTOR;
    this.#checkMs = opts.check_ms ?? DEFAULT_CHECK_MS;
    this.#buffered = opts.buffered;
    this.#drop = opts.drop;
  }

  get dropped(): boolean {
    return this.#dropped;
  }

  /**
   * Runs `write` (one frame to the peer) unless the peer is dropped, or must be now; returns
   * whether it ran.
   */
  send(write: () => void): boolean {
    if (this.#dropped) return false;
    const before = this.#buffered();
    if (before > this.#max) {
      if (before > this.#ceiling) {
        this.#end('ceiling', before);
        return false;
      }
      this.#watch(before);
    }
    write();
    // What this write added, as the peer counts it (a write that went out at once added less).
    this.#added += this.#buffered() - before;
    return true;
  }

  /** The peer is gone (closed, errored): no more checks. */
  close(): void {
    this.#dropped = true;
    this.#stop();
  }

  #watch(buffered: number): void {
    if (this.#timer !== undefined || this.#arming !== undefined) return;
    this.#mark = this.#added - buffered;
    // The interval starts once the turn that queued the burst is over (the check phase comes after
    // the poll in which its socket first drains): a turn longer than the interval, a loaded server
    // making a large burst, must not leave the peer less than a whole one (test/rpc/backlog-long-turn.test.ts).
    this.#arming = setImmediate(() => {
      this.#arming = undefined;
      this.#arm();
    }).unref();
  }

  #arm(): void {
    this.#timer = setTimeout(() => this.#check(), this.#checkMs);
    // A watch never holds the process: a shutdown has its own deadline.
    this.#timer.unref();
  }

  #check(): void {
    this.#timer = undefined;
    if (this.#dropped) return;
    const buffered = this.#buffered();
    if (buffered <= this.#max) return;
    const drained = this.#added - buffered;
    if (drained <= this.#mark) return this.#end('stalled', buffered);
    this.#mark = drained;
    this.#arm();
  }

  #end(reason: DropReason, buffered: number): void {
    this.close();
    this.#drop(reason, buffered);
  }

  #stop(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#arming !== undefined) clearImmediate(this.#arming);
    this.#arming = undefined;
  }
}
