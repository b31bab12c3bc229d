import { describe, expect, it } from 'vitest';
import { ChildQueue } from '../../src/delegation/child-queue.ts';
import { stillReachable } from '../helpers/gc.ts';
import { flush } from '../helpers/manual-clock.ts';

/** Just what ChildQueue uses of a LiveChild: its record's finished flag, its queue, holdSlot. */
function fake(name: string, started: string[], hold?: Promise<unknown>) {
  const live = {
    name,
    record: { finished: false },
    queue: undefined as ChildQueue | undefined,
    holdSlot: () => {
      started.push(name);
      return hold ?? Promise.resolve();
    },
  };
  return live;
}

function addWatched(q: ChildQueue, n: number, started: string[]): WeakRef<object>[] {
  const refs: WeakRef<object>[] = [];
  for (let i = 0; i < n; i++) {
    const f = fake(`c${i}`, started);
    refs.push(new WeakRef(f));
    q.add(f);
  }
  return refs;
}

describe('ChildQueue', () => {
  it('children cancelled while waiting do not pile up: the line is rebuilt once the dead outnumber the living, and the living keep their order', async () => {
    const started: string[] = [];
    let release!: () => void;
    const q = new ChildQueue(1);
    q.add(fake('blocker', started, new Promise<void>((r) => (release = r))));
    await flush();
    expect(started).toEqual(['blocker']);

    const waiting: ReturnType<typeof fake>[] = [];
    for (let i = 0; i < 1000; i++) {
      const f = fake(`c${i}`, started);
      q.add(f);
      waiting.push(f);
      // Every child but each 100th is cancelled while it waits (the record says finished; the
      // lifecycle tells the queue).
      if (i % 100 !== 0) {
        f.record.finished = true;
        f.queue?.dropped();
      }
      // Never more than the living plus what is allowed to wait before a rebuild.
      expect(q.waiting).toBeLessThanOrEqual(2 * Math.ceil((i + 1) / 100) + 64);
    }
    release();
    await flush();
    await flush();
    // The living ran in the order they were added; none of the cancelled had a turn.
    const living = new Set(waiting.filter((f) => !f.record.finished).map((f) => f.name));
    expect(started).toEqual(['blocker', ...living]);
    expect(q.waiting).toBe(0);
  });

  it('below the threshold nothing is rebuilt: the living start in order', async () => {
    const started: string[] = [];
    const q = new ChildQueue(2);
    const a = fake('a', started);
    const b = fake('b', started);
    q.add(a);
    q.add(b);
    await flush();
    expect(started).toEqual(['a', 'b']);
  });

  it('runs at most its cap at once, in the order added; a freed slot takes the next waiting child, a dead one is skipped, and a child added after the line emptied starts', async () => {
    const started: string[] = [];
    const releases = new Map<string, () => void>();
    const held = (name: string) => {
      const f = fake(name, started, new Promise<void>((r) => releases.set(name, r)));
      return f;
    };
    const q = new ChildQueue(2);
    const kids = ['a', 'b', 'c', 'd', 'e'].map(held);
    for (const k of kids) q.add(k);
    await flush();
    expect(started).toEqual(['a', 'b']);
    // c is stopped while it waits: it never starts.
    const c = kids[2] as ReturnType<typeof fake>;
    c.record.finished = true;
    c.queue?.dropped();
    releases.get('b')?.();
    await flush();
    expect(started).toEqual(['a', 'b', 'd']);
    releases.get('a')?.();
    await flush();
    expect(started).toEqual(['a', 'b', 'd', 'e']);
    releases.get('d')?.();
    releases.get('e')?.();
    await flush();
    expect(q.waiting).toBe(0);
    // The line emptied and its runs ended: later children start, still two at a time.
    for (const name of ['f', 'g', 'h']) q.add(held(name));
    await flush();
    expect(started.slice(4)).toEqual(['f', 'g']);
    releases.get('g')?.();
    await flush();
    expect(started.slice(4)).toEqual(['f', 'g', 'h']);
  });

  it('holds no child once it has started and finished: a queue that lives on keeps none of what it ran', async () => {
    const started: string[] = [];
    const q = new ChildQueue(2);
    // Added from a plain function: a suspended async frame may keep its last local alive.
    const refs = addWatched(q, 10, started);
    await flush();
    expect(started).toHaveLength(10);
    expect(q.waiting).toBe(0);
    expect(await stillReachable(refs)).toBe(0);
    // The queue itself is still in use.
    q.add(fake('later', started));
    await flush();
    expect(started.at(-1)).toBe('later');
  });
});
