// The outbound rule shared by the WebSocket and the event stream (src/server/backlog.ts), on a
// fake peer and fake timers: over the bound a peer must drain something each check interval, past
// the ceiling it is dropped at once, and a burst alone never drops it.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Backlog, CEILING_FACTOR, type DropReason } from '../../src/server/backlog.ts';

const MAX = 1000;
const CHECK = 2000;

/** A peer whose unsent count grows by what is written and shrinks by what it reads. */
function peer() {
  let buffered = 0;
  const drops: Array<{ reason: DropReason; buffered: number }> = [];
  const backlog = new Backlog({ max_bytes: MAX, check_ms: CHECK, buffered: () => buffered, drop: (reason, b) => void drops.push({ reason, buffered: b }) });
  return {
    backlog,
    drops,
    write: (n: number) => backlog.send(() => void (buffered += n)),
    read: (n: number) => void (buffered = Math.max(0, buffered - n)),
  };
}

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

describe('Backlog', () => {
  it('lets a burst far past the bound through, and keeps a peer that drains it', () => {
    const p = peer();
    for (let i = 0; i < 30; i++) expect(p.write(100)).toBe(true);
    // 3,000 queued in one turn: three times the bound, under the ceiling; it reads a little.
    p.read(10);
    vi.advanceTimersByTime(CHECK);
    expect(p.drops).toEqual([]);
    p.read(10);
    vi.advanceTimersByTime(CHECK);
    p.read(10);
    vi.advanceTimersByTime(CHECK);
    expect(p.drops).toEqual([]);
    p.read(3000);
    vi.advanceTimersByTime(10 * CHECK);
    expect(p.drops).toEqual([]);
  });

  it('drops a peer over the bound that drained nothing for a whole interval, not before', () => {
    const p = peer();
    p.write(MAX + 1);
    p.write(1);
    // The watch starts with the first send made over the bound.
    vi.advanceTimersByTime(CHECK - 1);
    expect(p.drops).toEqual([]);
    p.read(1);
    vi.advanceTimersByTime(1);
    expect(p.drops).toEqual([]);
    vi.advanceTimersByTime(CHECK);
    expect(p.drops).toEqual([{ reason: 'stalled', buffered: MAX + 1 }]);
    expect(p.write(1)).toBe(false);
    expect(p.backlog.dropped).toBe(true);
  });

  it('drops a peer past the ceiling at once, reading or not; what one send adds is one frame on top', () => {
    const p = peer();
    expect(p.write(CEILING_FACTOR * MAX)).toBe(true);
    expect(p.write(5 * MAX)).toBe(true);
    expect(p.write(1)).toBe(false);
    expect(p.drops).toEqual([{ reason: 'ceiling', buffered: (CEILING_FACTOR + 5) * MAX }]);
  });

  it('stops watching once the peer is back under the bound, and counts afresh the next time', () => {
    const p = peer();
    p.write(MAX + 1);
    p.write(1);
    p.read(MAX);
    vi.advanceTimersByTime(CHECK);
    // Back over the bound later: a whole new interval before any judgement.
    p.write(MAX);
    p.write(1);
    vi.advanceTimersByTime(CHECK - 1);
    expect(p.drops).toEqual([]);
    vi.advanceTimersByTime(CHECK + 1);
    expect(p.drops.map((d) => d.reason)).toEqual(['stalled']);
  });

  it('a closed peer is never judged', () => {
    const p = peer();
    p.write(MAX + 1);
    p.write(1);
    p.backlog.close();
    vi.advanceTimersByTime(10 * CHECK);
    expect(p.drops).toEqual([]);
  });
});
