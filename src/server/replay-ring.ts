// A session's recent events, kept so a host that reconnects can fill its gap: `session.events.since`
// over JSON-RPC and `Last-Event-ID` over SSE read the same ring. Each event is kept as the exact
// JSON text of the envelope that was sent (serialised once, for every transport and for the ring),
// bounded by a count and a byte budget, whichever is reached first. The ring lives as long as its
// session, parked included, and goes with it.

export interface ReplayLimits {
  /** Events kept at most. Default 1,000. */
  readonly max_events: number;
  /** Bytes of envelope text kept at most. Default 1 MiB. */
  readonly max_bytes: number;
}

export const DEFAULT_REPLAY_LIMITS: ReplayLimits = { max_events: 1000, max_bytes: 1024 * 1024 };

export interface ReplayedEvent {
  readonly seq: number;
  /** The envelope as sent: `{"type":…,"session_id":…,"seq":…,"ts":…,"payload":…}`. */
  readonly text: string;
  /** Its UTF-8 size, counted against max_bytes. */
  readonly bytes: number;
}

export interface Replay {
  /** Events with seq > the cursor, oldest first. */
  readonly events: readonly ReplayedEvent[];
  /** True when events after the cursor already left the ring: the host must refetch state. */
  readonly truncated: boolean;
  /** The session's latest seq (0 before any event). */
  readonly latest_seq: number;
}

/** How a ring outlives its process (a durable store): what it held, and each eviction. */
export interface RingStorage {
  /** The kept events, oldest first: read once, on the ring's first use. */
  load(): ReadonlyArray<{ readonly seq: number; readonly text: string }>;
  /** Events up to `seq` left the ring. */
  evicted(seq: number): void;
}

export class ReplayRing {
  readonly #limits: ReplayLimits;
  #storage: RingStorage | undefined;
  /** Set until the stored events are read back (a restored session's ring loads on first use). */
  #unloaded: RingStorage | undefined;
  // A circular buffer of max_events slots: push and evict are O(1), with no shifting.
  readonly #slots: Array<ReplayedEvent | undefined>;
  #head = 0;
  #size = 0;
  #bytes = 0;
  /** The seq of the newest event ever pushed (kept even when the ring is empty). */
  #latest = 0;
  /** The seq of the newest event that left the ring (0: none has). */
  #evicted = 0;

  /**
   * `latest`: the seq of the newest event of a restored session (its ring is read from `storage`
   * on first use, and every event before its oldest kept one counts as evicted).
   */
  constructor(limits: ReplayLimits = DEFAULT_REPLAY_LIMITS, storage?: RingStorage, latest = 0) {
    this.#limits = limits;
    this.#slots = new Array<ReplayedEvent | undefined>(limits.max_events);
    this.#storage = storage;
    if (storage !== undefined && latest > 0) {
      this.#unloaded = storage;
      this.#latest = latest;
    }
  }

  #load(): void {
    const storage = this.#unloaded;
    if (storage === undefined) return;
    this.#unloaded = undefined;
    const latest = this.#latest;
    const rows = storage.load();
    // What is older than the oldest kept event is gone: a cursor before it reads as truncated.
    this.#evicted = (rows[0]?.seq ?? latest + 1) - 1;
    for (const r of rows) this.push(r.seq, r.text);
    this.#latest = Math.max(this.#latest, latest);
  }

  get latestSeq(): number {
    return this.#latest;
  }

  /** Events kept (a restored ring is read back first, so the count is what a replay would hand out). */
  get size(): number {
    this.#load();
    return this.#size;
  }

  get bytes(): number {
    this.#load();
    return this.#bytes;
  }

  /** Keeps one sent envelope; `seq` must be above every earlier one. */
  push(seq: number, text: string): void {
    if (this.#unloaded !== undefined) this.#load();
    this.#latest = seq;
    const bytes = Buffer.byteLength(text, 'utf8');
    // An event bigger than the whole budget is never kept: a cursor before it reads as truncated.
    if (bytes > this.#limits.max_bytes || this.#limits.max_events === 0) {
      this.#evictAll();
      this.#evicted = seq;
      this.#storage?.evicted(seq);
      return;
    }
    while (this.#size > 0 && (this.#size >= this.#limits.max_events || this.#bytes + bytes > this.#limits.max_bytes)) this.#evictOldest();
    this.#slots[(this.#head + this.#size) % this.#limits.max_events] = { seq, text, bytes };
    this.#size += 1;
    this.#bytes += bytes;
  }

  /**
   * Every kept event with seq > `after` (and at most `upto`: a durable server hands out only what
   * is written); `truncated` if some such event was already evicted.
   */
  since(after: number, upto = Infinity): Replay {
    if (this.#unloaded !== undefined) this.#load();
    const events: ReplayedEvent[] = [];
    for (let i = 0; i < this.#size; i++) {
      const e = this.#slots[(this.#head + i) % this.#limits.max_events];
      if (e !== undefined && e.seq > after && e.seq <= upto) events.push(e);
    }
    return { events, truncated: this.#evicted > after, latest_seq: Math.min(this.#latest, upto) };
  }

  #evictOldest(): void {
    const e = this.#slots[this.#head];
    if (e === undefined) return;
    this.#slots[this.#head] = undefined;
    this.#head = (this.#head + 1) % this.#limits.max_events;
    this.#size -= 1;
    this.#bytes -= e.bytes;
    this.#evicted = e.seq;
    this.#storage?.evicted(e.seq);
  }

  #evictAll(): void {
    while (this.#size > 0) this.#evictOldest();
  }
}
