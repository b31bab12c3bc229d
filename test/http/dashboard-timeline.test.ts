// The Timeline's geometry (src/http/ui/timeline.js), without a DOM: rows in the answer's order,
// the queued and running parts of each bar as percentages of the axis, steer markers at their
// fate's moment (a missed one at its child's end), interrupt marks, and the axis itself.
import { describe, expect, it } from 'vitest';
import { isTimeline, timelineLayout, timelineSteers, type TimelineData } from '../../src/http/ui/timeline.js';

const data: TimelineData = {
  session_id: 'ses_1',
  now: 110,
  children: [
    { subagent_id: 'a', parent_id: null, depth: 0, goal: 'a', status: 'completed', created_at: 100, started_at: 102, finished_at: 106 },
    { subagent_id: 'a1', parent_id: 'a', depth: 1, goal: 'a1', status: 'running', created_at: 103, started_at: 104, finished_at: null },
    { subagent_id: 'b', parent_id: null, depth: 0, goal: 'b', status: 'queued', created_at: 100, started_at: null, finished_at: null },
  ],
  steers: [
    { steer_id: 's1', subagent_id: 'a', fate: 'missed', queued_at: 103, at: 106.5 },
    { steer_id: 's2', subagent_id: 'a1', fate: 'delivered', queued_at: 104, at: 105 },
    { steer_id: 's3', subagent_id: 'b', fate: 'queued', queued_at: 101, at: null },
    { steer_id: null, subagent_id: 'a', fate: 'rejected', queued_at: null, at: 107 },
  ],
  interrupts: [{ subagent_id: 'a1', target_id: 'a1', at: 108 }],
};

describe('the Timeline layout', () => {
  it('draws from the first creation to now while a child runs, bars and marks at their moments', () => {
    const l = timelineLayout(data, 110);
    expect([l.start, l.end, l.live]).toEqual([100, 110, true]);
    expect(l.rows.map((r) => r.child.subagent_id)).toEqual(['a', 'a1', 'b']);
    const [a, a1, b] = l.rows;
    expect(a!.queued).toEqual({ x: 0, w: 20 });
    expect(a!.run).toEqual({ x: 20, w: 40 });
    // The missed steer at the child's end (106), not its settling moment; the refused one where it was refused.
    expect(a!.steers.map((s) => [s.fate, s.x])).toEqual([
      ['missed', 60],
      ['rejected', 70],
    ]);
    expect(a1!.run).toEqual({ x: 40, w: 60 });
    expect(a1!.steers.map((s) => [s.fate, s.steer_id, s.x])).toEqual([['delivered', 's2', 50]]);
    expect(a1!.interrupts).toEqual([{ target_id: 'a1', x: 80, t: 108 }]);
    // Still queued: the whole bar is its queued part, up to now; its steer where it waits.
    expect(b!.run).toBeNull();
    expect(b!.queued).toEqual({ x: 0, w: 100 });
    expect(b!.steers.map((s) => [s.fate, s.x])).toEqual([['queued', 10]]);
  });

  it('ends at the last moment once the tree is quiet, and moves with now while it is not', () => {
    const quiet = {
      ...data,
      children: data.children.map((c) => ({ ...c, status: 'completed', started_at: c.started_at ?? 101, finished_at: c.finished_at ?? 108 })),
    };
    expect(timelineLayout(quiet, 500).end).toBe(108);
    expect(timelineLayout(data, 120).end).toBe(120);
    expect(timelineLayout({ ...data, children: [] }, 5).rows).toEqual([]);
  });

  it('hands the fold the steers it can tell apart (by id), and checks an answer before drawing it', () => {
    expect(timelineSteers(data)).toEqual([
      { steer_id: 's1', subagent_id: 'a', fate: 'missed' },
      { steer_id: 's2', subagent_id: 'a1', fate: 'delivered' },
      { steer_id: 's3', subagent_id: 'b', fate: 'queued' },
    ]);
    expect(isTimeline(data)).toBe(true);
    expect(isTimeline({ error: { code: 4001 } })).toBe(false);
    expect(isTimeline(null)).toBe(false);
  });
});
