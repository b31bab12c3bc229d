// The dashboard's fold (src/http/ui/state.js), without a DOM. A small model of a session plays
// random runs (spawns at any depth, tools, steers, deliveries, completions, the idle signal) and
// records what the server would answer at each seq: the SSE snapshot and the delegations' entries.
// Then: any split of the run into a snapshot and a resumed tail (overlapping, with duplicates)
// folds to the state of the unbroken stream, and to the server's own final roster; a steer's fate
// does not depend on when the answer to its POST lands among the events.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  fold,
  foldAll,
  initialState,
  rosterTree,
  subtree,
  queuedSteers,
  tailApply,
  tailInit,
  tailStale,
  RETAIN_FINISHED,
  type Input,
  type State,
  type WireEvent,
} from '../../src/http/ui/state.js';

type Status = 'queued' | 'running' | 'completed' | 'interrupted' | 'failed';

interface ModelChild {
  subagent_id: string;
  parent_id: string | null;
  depth: number;
  goal: string;
  delegation_id: string;
  task_index: number;
  status: Status;
  started_at: number | null;
  finished_at: number | null;
  tool_count: number;
  last_tool: string;
  inbox: Array<{ steer_id: string; text: string }>;
  summary: string;
  missed_steer?: string;
}

interface SteerRecord {
  key: string;
  subagent_id: string;
  text: string;
  /** Index of the event after which the server took the POST (-1: before any). */
  at: number;
  answer: { status: 'queued'; steer_id: string; text: string } | { status: 'rejected'; reason: string };
  /** What actually became of it on the server. */
  outcome: 'delivered' | 'missed' | 'rejected';
}

interface Run {
  events: WireEvent[];
  /** snapshots[k]: the SSE snapshot at seq k (after the first k events). */
  snapshots: Array<{ seq: number; subagents: Record<string, unknown>[] }>;
  /** entries[k]: the completion entries the delegations route would give at seq k. */
  entries: Record<string, unknown>[][];
  steers: SteerRecord[];
}

interface Op {
  op: 'spawn' | 'start' | 'tool' | 'text' | 'steer' | 'deliver' | 'complete';
  pick: number;
  flat: boolean;
  status: Status;
}

const op: fc.Arbitrary<Op> = fc.record({
  op: fc.constantFrom<Op['op']>('spawn', 'start', 'tool', 'text', 'steer', 'deliver', 'complete', 'complete'),
  pick: fc.nat(),
  flat: fc.boolean(),
  status: fc.constantFrom<Status>('completed', 'interrupted', 'failed'),
});

/** Plays `ops` on a model session and records every answer the server would give. */
function play(ops: readonly Op[]): Run {
  const children: ModelChild[] = [];
  const events: WireEvent[] = [];
  const steers: SteerRecord[] = [];
  const run: Run = { events, snapshots: [snapshotOf(children, 0)], entries: [[]], steers };
  let delegations = 0;
  let steerIds = 0;
  const live = () => children.filter((c) => c.status === 'queued' || c.status === 'running');
  const running = () => children.filter((c) => c.status === 'running');
  const emit = (type: string, payload: Record<string, unknown>) => {
    const seq = events.length + 1;
    events.push({ type, session_id: 'ses_m', seq, ts: 100 + seq, payload });
    run.snapshots.push(snapshotOf(children, seq));
    run.entries.push(children.filter((c) => isDone(c)).map(entryOf));
  };
  const identity = (c: ModelChild) => ({
    subagent_id: c.subagent_id,
    parent_id: c.parent_id,
    depth: c.depth,
    delegation_id: c.delegation_id,
    task_index: c.task_index,
    task_count: 1,
    goal: c.goal,
    // Every subagent.* payload names the model (hermes-compat.md section 4).
    model: 'scripted',
  });
  for (const o of ops) {
    switch (o.op) {
      case 'spawn': {
        const parents = running().filter((c) => c.depth < 2);
        const parent = o.flat || parents.length === 0 ? null : parents[o.pick % parents.length]!;
        const delegation_id = `dg_${++delegations}`;
        const c: ModelChild = {
          subagent_id: `sa_${children.length}`,
          parent_id: parent?.subagent_id ?? null,
          depth: parent ? parent.depth + 1 : 0,
          goal: `goal ${children.length}`,
          delegation_id,
          task_index: 0,
          status: 'queued',
          started_at: null,
          finished_at: null,
          tool_count: 0,
          last_tool: '',
          inbox: [],
          summary: '',
        };
        children.push(c);
        emit('delegation.dispatched', { delegation_id, subagent_ids: [c.subagent_id], count: 1 });
        emit('subagent.spawn_requested', identity(c));
        break;
      }
      case 'start': {
        const q = children.filter((c) => c.status === 'queued');
        const c = q[o.pick % Math.max(1, q.length)];
        if (!c) break;
        c.status = 'running';
        c.started_at = 100 + events.length + 1;
        emit('subagent.start', identity(c));
        break;
      }
      case 'tool':
      case 'text': {
        const r = running();
        const c = r[o.pick % Math.max(1, r.length)];
        if (!c) break;
        if (o.op === 'tool') {
          c.tool_count++;
          c.last_tool = `tool_${o.pick % 5}`;
          emit('subagent.tool', { ...identity(c), tool_name: c.last_tool, preview: '{}', tool_count: c.tool_count });
        } else {
          emit('subagent.text', { ...identity(c), text: `said ${o.pick}` });
        }
        break;
      }
      case 'steer': {
        // The page steers any child it knows, even one that already finished (409 then).
        const c = children[o.pick % Math.max(1, children.length)];
        if (!c) break;
        const key = `k${steers.length}`;
        const text = `steer ${steers.length}`;
        if (isDone(c)) {
          steers.push({
            key,
            subagent_id: c.subagent_id,
            text,
            at: events.length - 1,
            answer: { status: 'rejected', reason: 'not accepting steer' },
            outcome: 'rejected',
          });
        } else {
          const steer_id = `st_${++steerIds}`;
          c.inbox.push({ steer_id, text });
          steers.push({ key, subagent_id: c.subagent_id, text, at: events.length - 1, answer: { status: 'queued', steer_id, text }, outcome: 'missed' });
        }
        break;
      }
      case 'deliver': {
        const r = running().filter((c) => c.inbox.length > 0);
        const c = r[o.pick % Math.max(1, r.length)];
        if (!c) break;
        for (const s of c.inbox.splice(0)) {
          steers.find((x) => x.answer.status === 'queued' && x.answer.steer_id === s.steer_id)!.outcome = 'delivered';
          emit('subagent.steer.delivered', { ...identity(c), steer_id: s.steer_id, text: s.text });
        }
        break;
      }
      case 'complete': {
        // Leaves first: a child with live children does not complete in this model.
        const r = running().filter((c) => !children.some((k) => k.parent_id === c.subagent_id && !isDone(k)));
        const c = r[o.pick % Math.max(1, r.length)];
        if (!c) break;
        c.status = o.status;
        c.finished_at = 100 + events.length + 1;
        c.summary = `summary of ${c.subagent_id}`;
        if (c.inbox.length > 0) c.missed_steer = c.inbox.map((s) => s.text).join('\n');
        c.inbox = [];
        const entry = entryOf(c);
        emit('subagent.complete', o.flat ? { ...identity(c), ...entry } : { ...identity(c), entry });
        emit('delegation.complete', { delegation_id: c.delegation_id, results: [entry] });
        if (live().length === 0) emit('session.idle', { session_id: 'ses_m', generation: 1 });
        break;
      }
    }
  }
  return run;
}

function isDone(c: ModelChild): boolean {
  return c.status !== 'queued' && c.status !== 'running';
}

function entryOf(c: ModelChild): Record<string, unknown> {
  return {
    task_index: c.task_index,
    subagent_id: c.subagent_id,
    status: c.status,
    exit_reason: c.status,
    summary: c.summary,
    api_calls: 0,
    duration_seconds: (c.finished_at ?? 0) - (c.started_at ?? 0),
    model: 'scripted',
    tokens: { input: 0, output: 0 },
    tool_trace: [],
    ...(c.missed_steer !== undefined ? { missed_steer: c.missed_steer } : {}),
  };
}

/** The server's snapshot rows (src/child/snapshot.ts's fields, nothing else). */
function snapshotOf(children: readonly ModelChild[], seq: number) {
  return {
    seq,
    subagents: children.map((c) => ({
      subagent_id: c.subagent_id,
      parent_id: c.parent_id,
      depth: c.depth,
      goal: c.goal,
      delegation_id: c.delegation_id,
      model: 'scripted',
      started_at: c.started_at,
      status: c.status,
      tool_count: c.tool_count,
      last_tool: c.last_tool,
      accepting_steer: !isDone(c),
      ...(c.finished_at !== null ? { finished_at: c.finished_at } : {}),
    })),
  };
}

const ev = (event: WireEvent): Input => ({ kind: 'event', event });
/**
 * The state without what is history of this page's own viewing: the event log and the steers of
 * other hosts it saw delivered (a page that opened later never saw those events).
 */
const withoutLog = (s: State) => ({ ...s, log: [], steers: s.steers.filter((x) => x.mine) });

/** The unbroken stream: the snapshot at seq 0, then every event. */
function unbroken(run: Run): State {
  return foldAll(initialState(), [{ kind: 'snapshot', data: run.snapshots[0]! }, ...run.events.map(ev)]);
}

/** The fold's children projected onto the snapshot's fields, for comparing with the server. */
function asSnapshotRows(state: State) {
  return Object.values(state.children)
    .map((c) => ({
      subagent_id: c.subagent_id,
      parent_id: c.parent_id,
      depth: c.depth,
      goal: c.goal,
      delegation_id: c.delegation_id,
      model: c.model || 'scripted',
      started_at: c.started_at,
      status: c.status,
      tool_count: c.tool_count,
      last_tool: c.last_tool,
      accepting_steer: c.accepting_steer,
      ...(c.finished_at !== null ? { finished_at: c.finished_at } : {}),
    }))
    .sort((a, b) => (a.subagent_id < b.subagent_id ? -1 : 1));
}

const runs = fc.array(op, { minLength: 1, maxLength: 60 }).map(play);

describe('dashboard state: snapshot + events by seq', () => {
  it('any split into a snapshot and a resumed, overlapping tail folds to the unbroken stream and the server roster', () => {
    fc.assert(
      fc.property(runs, fc.nat(), fc.nat(), (run, cutPick, overlapPick) => {
        const n = run.events.length;
        const k = cutPick % (n + 1);
        // The resumed tail may start before the cut (events the snapshot already reflects).
        const from = k - (overlapPick % (k + 1));
        const resumed = foldAll(initialState(), [
          { kind: 'snapshot', data: run.snapshots[k]! },
          { kind: 'entries', results: run.entries[k]! },
          ...run.events.slice(from).map(ev),
        ]);
        const whole = unbroken(run);
        expect(withoutLog(resumed)).toEqual(withoutLog(whole));
        const server = run.snapshots[n]!.subagents.map((r) => ({ ...r })).sort((a, b) => (String(a.subagent_id) < String(b.subagent_id) ? -1 : 1));
        expect(asSnapshotRows(whole)).toEqual(server);
        expect(whole.seq).toBe(n);
        expect(whole.gaps).toBe(0);
        // Finished children keep their summary and missed_steer, from events or from entries.
        for (const e of run.entries[n]!) {
          const c = resumed.children[String(e.subagent_id)]!;
          expect(c.summary).toBe(e.summary);
          expect(c.missed_steer).toBe(e.missed_steer);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('a duplicate of any event, delivered again anywhere after it, changes nothing (log included)', () => {
    fc.assert(
      fc.property(runs, fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 20 }), (run, dups) => {
        const inputs: Input[] = [{ kind: 'snapshot', data: run.snapshots[0]! }, ...run.events.map(ev)];
        for (const [a, b] of dups) {
          if (run.events.length === 0) break;
          const original = run.events[a % run.events.length]!;
          // The copy goes anywhere after the original's first delivery.
          const first = inputs.findIndex((x) => x.kind === 'event' && x.event === original);
          inputs.splice(first + 1 + (b % (inputs.length - first)), 0, ev(original));
        }
        expect(foldAll(initialState(), inputs)).toEqual(unbroken(run));
      }),
      { numRuns: 200 },
    );
  });

  it('the event log after a resume holds each event after the snapshot exactly once, in seq order', () => {
    fc.assert(
      fc.property(runs, fc.nat(), fc.nat(), (run, cutPick, overlapPick) => {
        const n = run.events.length;
        const k = cutPick % (n + 1);
        const from = k - (overlapPick % (k + 1));
        const s = foldAll(initialState(), [
          { kind: 'snapshot', data: run.snapshots[k]! },
          ...run.events.slice(from).map(ev),
          ...run.events.slice(from).map(ev),
        ]);
        expect(s.log.map((l) => l.seq)).toEqual(
          run.events
            .slice(k)
            .map((e) => e.seq)
            .slice(-200),
        );
      }),
      { numRuns: 200 },
    );
  });

  it("a steer's fate is the server's outcome wherever the answer to its POST lands among the events", () => {
    fc.assert(
      fc.property(runs, fc.array(fc.tuple(fc.nat(), fc.nat())), (run, picks) => {
        // Page inputs: the events in order, and per steer a 'sent' no later than the first event
        // after the server took it, then its answer anywhere after the sent.
        const inputs: Array<{ pos: number; tie: number; input: Input }> = run.events.map((e, i) => ({ pos: i, tie: 1, input: ev(e) }));
        run.steers.forEach((s, j) => {
          const [p1, p2] = picks[j] ?? [0, 0];
          const latestSent = s.at + 1; // before the event that follows the server taking it
          const sent = p1 % (latestSent + 1); // any position 0..latestSent (before event at that index)
          const answer = sent + (p2 % (run.events.length - sent + 1));
          inputs.push({ pos: sent, tie: 0, input: { kind: 'steer.sent', key: s.key, subagent_id: s.subagent_id, text: s.text } });
          const a = s.answer;
          inputs.push({
            pos: answer,
            tie: 0.5,
            input:
              a.status === 'queued'
                ? { kind: 'steer.answer', key: s.key, status: 'queued', steer_id: a.steer_id, text: a.text }
                : { kind: 'steer.answer', key: s.key, status: 'rejected', reason: a.reason },
          });
        });
        inputs.sort((x, y) => x.pos - y.pos || x.tie - y.tie);
        const state = foldAll(
          fold(initialState(), { kind: 'snapshot', data: run.snapshots[0]! }),
          inputs.map((x) => x.input),
        );
        for (const s of run.steers) {
          const mine = state.steers.filter((x) => x.key === s.key);
          expect(mine).toHaveLength(1);
          const fate = mine[0]!.fate;
          // Not yet answered by the end of the run: a queued steer of a child still running.
          const childDone = !['queued', 'running'].includes(
            run.snapshots[run.events.length]!.subagents.find((c) => c.subagent_id === s.subagent_id)!.status as string,
          );
          if (s.outcome === 'missed' && !childDone) expect(fate).toBe('queued');
          else expect(fate).toBe(s.outcome);
        }
        // Each delivered steer is one row, not one from the event and one from the answer.
        const ids = state.steers.map((x) => x.steer_id).filter((x) => x !== null);
        expect(new Set(ids).size).toBe(ids.length);
      }),
      { numRuns: 300 },
    );
  });
});

describe('dashboard state: pieces', () => {
  const identity = (id: string, parent: string | null = null, depth = 0) => ({
    subagent_id: id,
    parent_id: parent,
    depth,
    delegation_id: 'dg_1',
    task_index: 0,
    task_count: 1,
    goal: `g ${id}`,
  });
  const event = (seq: number, type: string, payload: Record<string, unknown>): Input => ({
    kind: 'event',
    event: { type, seq, ts: seq, session_id: 's', payload },
  });

  it('keeps the most recently finished children, as the server retains them', () => {
    const inputs: Input[] = [];
    let seq = 0;
    for (let i = 0; i < RETAIN_FINISHED + 5; i++) {
      inputs.push(event(++seq, 'subagent.start', identity(`sa_${i}`)));
      inputs.push(event(++seq, 'subagent.complete', { ...identity(`sa_${i}`), status: 'completed', summary: 'ok' }));
    }
    const s = foldAll(initialState(), inputs);
    expect(Object.keys(s.children)).toHaveLength(RETAIN_FINISHED);
    expect(s.children.sa_0).toBeUndefined();
    expect(s.children[`sa_${RETAIN_FINISHED + 4}`]?.summary).toBe('ok');
  });

  it('builds the tree depth-first and the subtree of an interrupt', () => {
    const s = foldAll(initialState(), [
      event(1, 'subagent.start', identity('a')),
      event(2, 'subagent.start', identity('b')),
      event(3, 'subagent.start', identity('a1', 'a', 1)),
      event(4, 'subagent.start', identity('a1x', 'a1', 2)),
    ]);
    expect(rosterTree(s).map((c) => c.subagent_id)).toEqual(['a', 'a1', 'a1x', 'b']);
    expect(subtree(s, 'a')).toEqual(['a', 'a1', 'a1x']);
    expect(subtree(s, 'b')).toEqual(['b']);
  });

  it('counts queued steers and marks a rejected one', () => {
    let s = foldAll(initialState(), [event(1, 'subagent.start', identity('a'))]);
    s = fold(s, { kind: 'steer.sent', key: 'k1', subagent_id: 'a', text: 'x' });
    s = fold(s, { kind: 'steer.answer', key: 'k1', status: 'queued', steer_id: 'st_1', text: 'x' });
    s = fold(s, { kind: 'steer.sent', key: 'k2', subagent_id: 'a', text: 'y' });
    s = fold(s, { kind: 'steer.answer', key: 'k2', status: 'rejected', reason: 'not accepting steer' });
    expect(queuedSteers(s, 'a')).toBe(1);
    expect(s.steers.find((x) => x.key === 'k2')).toMatchObject({ fate: 'rejected', reason: 'not accepting steer' });
  });

  it('a stale snapshot (older than the folded seq) is ignored; a reset is counted', () => {
    const s = foldAll(initialState(), [
      event(1, 'subagent.start', identity('a')),
      event(2, 'subagent.tool', { ...identity('a'), tool_name: 't', tool_count: 1 }),
    ]);
    expect(fold(s, { kind: 'snapshot', data: { seq: 1, subagents: [] } })).toBe(s);
    const r = fold(s, { kind: 'snapshot', reset: true, data: { seq: 9, subagents: [] } });
    expect(r.resets).toBe(1);
    expect(r.children).toEqual({});
    expect(r.seq).toBe(9);
  });

  it('counts a gap in seq (events lost), so the page can resync', () => {
    const s = foldAll(initialState(), [event(1, 'subagent.start', identity('a')), event(3, 'subagent.text', { ...identity('a'), text: 'x' })]);
    expect(s.gaps).toBe(1);
  });
});

describe('dashboard tail: window extended by offset', () => {
  it('appends exactly the bytes after the offset and drops stale answers', () => {
    let t = tailInit('a');
    t = tailApply(t, undefined, { subagent_id: 'a', available: true, text: 'one\n', offset: 4, truncated: false, seq: 3 });
    // Two fetches raced from offset 4: the first answer extends, the second is stale.
    const t2 = tailApply(t, 4, { subagent_id: 'a', available: true, text: 'two\n', offset: 8, truncated: false, seq: 5 });
    expect(tailApply(t2, 4, { subagent_id: 'a', available: true, text: 'two\n', offset: 8, truncated: false, seq: 5 })).toBe(t2);
    expect(t2.text).toBe('one\ntwo\n');
    expect(t2.offset).toBe(8);
    const t3 = tailApply(t2, 8, { subagent_id: 'a', available: true, text: 'x', offset: 100, truncated: true, seq: 9 });
    expect(t3.text).toContain('left the window');
    expect(t3.skipped).toBe(1);
    expect(tailApply(t3, 100, { subagent_id: 'b', text: 'no', offset: 102, seq: 10 })).toBe(t3);
  });

  it('is stale only for later events of its own child', () => {
    const t = tailApply(tailInit('a'), undefined, { subagent_id: 'a', text: '', offset: 0, seq: 5 });
    const e = (seq: number, id: string): WireEvent => ({ type: 'subagent.text', seq, ts: 0, payload: { subagent_id: id } });
    expect(tailStale(t, e(5, 'a'))).toBe(false);
    expect(tailStale(t, e(6, 'b'))).toBe(false);
    expect(tailStale(t, e(6, 'a'))).toBe(true);
  });
});
