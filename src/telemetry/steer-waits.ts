// Steers an observer saw queued and not yet settled, each with a value of the observer's (the
// metrics: when it was queued). Kept per child, in acceptance order, in
// two plain arrays: a steer settles almost always at its child's head (delivery takes in
// acceptance order; a withdrawn steer is among the last queued), so a settle is an index step, not
// a lookup. One map keyed by steer id held every queued steer of the server: at 64,000 queued
// steers its inserts cost more than the rest of the steer's observers (bench: http.steer.floor_depth).

/** Where a settled steer was: its slot is blanked, and the head moves past blanks. */
const SETTLED = '';

/** One child's queued steers: `ids[i]` holds `values[i]`; slots before `head` are settled. */
interface Queue<T> {
  readonly ids: string[];
  readonly values: T[];
  head: number;
}

/** Below this many settled slots at the head, a queue is not compacted (a splice per steer would cost more). */
const COMPACT_AFTER = 1024;

export class SteerWaits<T> {
  readonly #byChild = new Map<string, Queue<T>>();
  #size = 0;

  /** Steers queued and not settled, every child's. */
  get size(): number {
    return this.#size;
  }

  /** A steer accepted for `child`, with its value. The runtime reports each steer id once. */
  queued(child: string, steer_id: string, value: T): void {
    let q = this.#byChild.get(child);
    if (q === undefined) this.#byChild.set(child, (q = { ids: [], values: [], head: 0 }));
    q.ids.push(steer_id);
    q.values.push(value);
    this.#size++;
  }

  /**
   * The steer settled (delivered, missed or withdrawn): its value, or undefined if it was not seen
   * queued here (a steer an adopted child brought from before a restart, say).
   * `newest` searches from the tail first (a withdrawn steer is the child's last).
   */
  settle(child: string, steer_id: string, newest = false): T | undefined {
    const q = this.#byChild.get(child);
    if (q === undefined || steer_id === SETTLED) return undefined;
    const i = q.ids[q.head] === steer_id ? q.head : newest ? q.ids.lastIndexOf(steer_id) : q.ids.indexOf(steer_id, q.head);
    if (i < q.head) return undefined;
    const value = q.values[i];
    // Its value stays in the slot until the head passes it (at once, settled in order): blanking
    // it would turn an array of numbers into one of boxed values.
    q.ids[i] = SETTLED;
    this.#size--;
    while (q.head < q.ids.length && q.ids[q.head] === SETTLED) q.head++;
    // Emptied: dropped, so only children with steers queued are held (a server may steer
    // 100,000 children once each).
    if (q.head === q.ids.length) this.#byChild.delete(child);
    else if (q.head >= COMPACT_AFTER && q.head * 2 >= q.ids.length) {
      q.ids.splice(0, q.head);
      q.values.splice(0, q.head);
      q.head = 0;
    }
    return value;
  }

  /**
   * The child ended: settles the steers it missed (`missed`, its entry's detail) that were seen
   * queued here, and drops the rest of its queue. Returns their values in acceptance order. One
   * pass over a set of the missed ids, whichever of them the queue holds (a steer queued before a
   * restart is not in it).
   */
  ended(child: string, missed: readonly { readonly steer_id: string }[]): T[] {
    const q = this.#byChild.get(child);
    if (q === undefined) return [];
    this.#byChild.delete(child);
    const ids = missed.length > 0 ? new Set(missed.map((m) => m.steer_id)) : undefined;
    const out: T[] = [];
    for (let i = q.head; i < q.ids.length; i++) {
      const id = q.ids[i];
      const value = q.values[i];
      if (id === undefined || id === SETTLED) continue;
      this.#size--;
      if (value !== undefined && ids?.has(id) === true) out.push(value);
    }
    return out;
  }
}
