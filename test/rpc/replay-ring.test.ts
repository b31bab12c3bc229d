// The replay ring: what a reconnecting host can recover. Checked against a model that keeps
// every event: the ring answers exactly the events after the cursor that it holds, holds the
// newest events that fit both bounds, and says `truncated` exactly when something after the
// cursor is gone.
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { ReplayRing } from '../../src/server/replay-ring.ts';

const text = (seq: number, size: number) => `{"seq":${seq},"p":"${'é'.repeat(size)}"}`;
const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

describe('replay ring', () => {
  test.prop([
    fc.record({ max_events: fc.integer({ min: 1, max: 12 }), max_bytes: fc.integer({ min: 20, max: 400 }) }),
    fc.array(fc.integer({ min: 0, max: 120 }), { maxLength: 60 }),
    fc.integer({ min: 0, max: 70 }),
  ])('answers every kept event after the cursor, keeps the newest that fit, and says truncated exactly when one is gone', (limits, sizes, cursor) => {
    const ring = new ReplayRing(limits);
    const all = sizes.map((size, i) => ({ seq: i + 1, text: text(i + 1, size) }));
    for (const e of all) ring.push(e.seq, e.text);

    // The model: the longest suffix within both bounds (stopping at an event bigger than the budget).
    const kept: typeof all = [];
    let used = 0;
    for (let i = all.length - 1; i >= 0; i--) {
      const e = all[i] as (typeof all)[number];
      if (kept.length === limits.max_events || used + bytes(e.text) > limits.max_bytes) break;
      kept.unshift(e);
      used += bytes(e.text);
    }
    const r = ring.since(cursor);
    expect(r.events.map((e) => [e.seq, e.text])).toEqual(kept.filter((e) => e.seq > cursor).map((e) => [e.seq, e.text]));
    const wanted = all.filter((e) => e.seq > cursor);
    expect(r.truncated).toBe(wanted.length > 0 && wanted[0]?.seq !== r.events[0]?.seq);
    expect(r.latest_seq).toBe(all.length);
    expect(ring.size).toBeLessThanOrEqual(limits.max_events);
    expect(ring.bytes).toBeLessThanOrEqual(limits.max_bytes);
    expect(ring.bytes).toBe(used);
  });

  it('an event larger than the whole budget is not kept, and a cursor before it reads as truncated', () => {
    const ring = new ReplayRing({ max_events: 10, max_bytes: 100 });
    ring.push(1, text(1, 5));
    ring.push(2, text(2, 500));
    ring.push(3, text(3, 5));
    expect(ring.since(0)).toMatchObject({ truncated: true, latest_seq: 3 });
    expect(ring.since(0).events.map((e) => e.seq)).toEqual([3]);
    expect(ring.since(2)).toMatchObject({ truncated: false });
  });

  it('an empty ring, a cursor at or past the newest event: nothing to replay, nothing lost', () => {
    const ring = new ReplayRing();
    expect(ring.since(0)).toEqual({ events: [], truncated: false, latest_seq: 0 });
    ring.push(1, text(1, 1));
    expect(ring.since(1)).toEqual({ events: [], truncated: false, latest_seq: 1 });
    expect(ring.since(99)).toEqual({ events: [], truncated: false, latest_seq: 1 });
  });
});
