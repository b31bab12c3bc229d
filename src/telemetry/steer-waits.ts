// The steers the metrics saw queued and not yet settled, each with when it was queued. Kept per
// child, in acceptance order, in two plain arrays: a steer settles almost always at its child's
// head (delivery takes in acceptance order; a withdrawn steer is among the last queued), so a
// settle is an index step, not a lookup. One map keyed by steer id held every queued steer of the server: at 64,000 queued
// steers its inserts cost more than the rest of the steer's observers (bench: http.steer.floor_depth).

/** Where a settled steer was: its slot is blanked, and the head moves past blanks. */
const SETTLED = '';

/** One child's queued steers: `ids[i]` was queued at `at[i]` (ms); slots before `head` are settled. */
interface Queue {
  readonly ids: string[];
  readonly at: number[];
  head: number;
}

/** Below this many settled slots at the head, a queue is not compacted (a splice per steer would cost more). */
const COMPACT_AFTER = 1024;

export class SteerWaits {
  readonly #byChild = new Map<string, Queue>();
  #size = 0;

  /** Steers queued and not settled, every child's. */
  get size(): number {
    return this.#size;
  }

  /** A steer accepted for `child` at `at` (ms). The runtime reports each steer id once. */
  queued(child: string, steer_id: string, at: number): void {
    let q = this.#byChild.get(child);
    if (q === undefined) this.#byChild.set(child, (q = { ids: [], at: [], head: 0 }));
    q.ids.push(steer_id);
    q.at.push(at);
    this.#size++;
  }

  /**
   * The steer settled (delivered or withdrawn): when it was queued, or undefined if it was not seen
   * queued here (a steer an adopted child brought from before a restart, say). `newest` searches
   * from the tail (a withdrawn steer is among its child's last).
   */
  settle(child: string, steer_id: string, newest = false): number | undefined {
    const q = this.#byChild.get(child);
    if (q === undefined || steer_id === SETTLED) return undefined;
    const i = q.ids[q.head] === steer_id ? q.head : newest ? q.ids.lastIndexOf(steer_id) : q.ids.indexOf(steer_id, q.head);
    if (i < q.head) return undefined;
    const at = q.at[i];
    // Its time stays in the slot until the head passes it (at once, settled in order): blanking
    // it would turn an array of numbers into one of boxed values.
    q.ids[i] = SETTLED;
    this.#size--;
    while (q.head < q.ids.length && q.ids[q.head] === SETTLED) q.head++;
    // Emptied: dropped, so only children with steers queued are held (a server may steer
    // 100,000 children once each).
    if (q.head === q.ids.length) this.#byChild.delete(child);
    else if (q.head >= COMPACT_AFTER && q.head * 2 >= q.ids.length) {
      q.ids.splice(0, q.head);
      q.at.splice(0, q.head);
      q.head = 0;
    }
    return at;
  }

  /**
   * The child ended: settles the steers it missed (`missed`, its entry's detail) that were seen
   * queued here, and drops the rest of its queue. Returns when each was queued, in acceptance order. One
   * pass over a set of the missed ids, whichever of them the queue holds (a steer queued before a
   * restart is not in it).
   */
  ended(child: string, missed: readonly { readonly steer_id: string }[]): number[] {
    const q = this.#byChild.get(child);
    if (q === undefined) return [];
    this.#byChild.delete(child);
    const ids = missed.length > 0 ? new Set(missed.map((m) => m.steer_id)) : undefined;
    const out: number[] = [];
    for (let i = q.head; i < q.ids.length; i++) {
      const id = q.ids[i];
      const at = q.at[i];
      if (id === undefined || id === SETTLED) continue;
      this.#size--;
      if (at !== undefined && ids?.has(id) === true) out.push(at);
    }
    return out;
  }
}
