// A session's kept steer marks (delegation/timeline.ts): acceptance order, at most `max`, the oldest
// settled mark leaving first, never the one just added; with no other settled, the oldest. The
// first form spliced a 1,000-entry array on every steer of a session past its bound: ~8 µs a
// steer, the steer path's biggest cost once a busy child's steers pile up (bench:
// http.steer.floor_depth). Here the marks sit in an array read from a head (a mark that leaves is
// flagged, and the array compacted once half of it has left), and the settled ones in a min-heap
// by acceptance number, so the oldest settled is found without a scan: O(log n) a step at most.

/** What the list needs of a mark: its acceptance number (set by add) and whether it has left. */
export interface KeptMark {
  n: number;
  gone: boolean;
}

export class KeptMarks<M extends KeptMark> {
  readonly #max: number;
  #slots: M[] = [];
  #head = 0;
  #live = 0;
  #next = 0;
  /** The settled marks still kept, a min-heap by `n`. */
  readonly #settled: M[] = [];

  constructor(max: number) {
    this.#max = max;
  }

  get size(): number {
    return this.#live;
  }

  /** Appends `mark` (settled already, or queued); returns the mark that left for it, if any. */
  add(mark: M, settled: boolean): M | undefined {
    mark.n = this.#next++;
    mark.gone = false;
    this.#slots.push(mark);
    this.#live++;
    if (settled) this.#push(mark);
    return this.#live > this.#max ? this.#evict(mark) : undefined;
  }

  /** A kept mark just settled: it may now leave before queued ones. */
  settled(mark: M): void {
    if (!mark.gone) this.#push(mark);
  }

  /** Takes out a mark (a withdrawn steer's, still queued: it leaves no trace). */
  remove(mark: M): void {
    if (mark.gone) return;
    mark.gone = true;
    this.#live--;
    this.#tidy();
  }

  /** The kept marks, in acceptance order. */
  values(): M[] {
    const out: M[] = [];
    for (let i = this.#head; i < this.#slots.length; i++) {
      const m = at(this.#slots, i);
      if (!m.gone) out.push(m);
    }
    return out;
  }

  #evict(just: M): M | undefined {
    // A settled mark taken out by remove() leaves the heap here.
    while (this.#settled[0]?.gone === true) this.#pop();
    const top = this.#settled[0];
    let gone: M | undefined;
    if (top !== undefined && top !== just) gone = this.#pop();
    else {
      // No settled mark but the one just added: the oldest goes (queued, so in no heap).
      for (let i = this.#head; i < this.#slots.length && gone === undefined; i++) {
        const m = at(this.#slots, i);
        if (!m.gone) gone = m;
      }
    }
    if (gone === undefined) return undefined;
    gone.gone = true;
    this.#live--;
    this.#tidy();
    return gone;
  }

  /** Moves the head past marks that left, and compacts once most of the array has left. */
  #tidy(): void {
    const slots = this.#slots;
    while (this.#head < slots.length && at(slots, this.#head).gone) this.#head++;
    if (slots.length - this.#head <= 2 * this.#live + 32 && this.#head <= 1024) return;
    this.#slots = this.values();
    this.#head = 0;
  }

  #push(mark: M): void {
    const h = this.#settled;
    h.push(mark);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (at(h, p).n <= mark.n) break;
      h[i] = at(h, p);
      i = p;
    }
    h[i] = mark;
  }

  #pop(): M | undefined {
    const h = this.#settled;
    const top = h[0];
    const last = h.pop();
    if (top === undefined || last === undefined || h.length === 0) return top;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= h.length) break;
      const r = l + 1;
      const c = r < h.length && at(h, r).n < at(h, l).n ? r : l;
      if (at(h, c).n >= last.n) break;
      h[i] = at(h, c);
      i = c;
    }
    h[i] = last;
    return top;
  }
}

/** An index the caller's loop bounds hold inside the array (checked, not cast). */
function at<T>(a: readonly T[], i: number): T {
  const v = a[i];
  if (v === undefined) throw new RangeError(`kept marks: no slot ${i}`);
  return v;
}
