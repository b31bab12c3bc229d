// The runtime's timeline (delegation/timeline.ts), in-process: a session's children in tree order
// with their times, each steer once with its fate (queued, delivered, missed at the child's end,
// rejected to an own child), interrupt marks on the target and each descendant; scoped to the
// session's live generation; bounded, the oldest settled steer leaving first.
import { describe, expect, it } from 'vitest';
import { timelineSchema } from '../../src/contract/entities.ts';
import { createRuntime, type Runtime } from '../../src/delegation/runtime.ts';
import { scripted } from '../../src/delegation/runners/scripted.ts';
import { MAX_TIMELINE_STEERS } from '../../src/delegation/timeline.ts';
import type { Owner, Scope, TaskSpec } from '../../src/types.ts';

const owner = (session_id: string, generation = 1): Owner => ({ session_id, transport: 't1', generation });
const scope = (o: Owner): Scope => ({ session_id: o.session_id, generation: o.generation });

/** Resolves at the child's next event of `type` (the runtime's own events, no polling). */
function reaches(runtime: Runtime, id: string, type: string): Promise<void> {
  return new Promise((resolve) => {
    const off = runtime.onOwnedEvent((e) => {
      if (e.type === type && e.subagent_id === id) {
        off();
        resolve();
      }
    });
  });
}

/** Two children of `o`: one parked in `hang` (takes no steer), one already finished. */
async function hangingAndDone(runtime: Runtime, o: Owner): Promise<{ hangs: string; done: string; results: Promise<unknown> }> {
  const doneFinished = new Promise<void>((resolve) => {
    const off = runtime.onOwnedEvent((e) => {
      if (e.type === 'subagent.complete' && e.goal === 'done') {
        off();
        resolve();
      }
    });
  });
  const { subagent_ids, results } = runtime.delegate(
    [
      { goal: 'hangs', runner: scripted([{ op: 'hang' }]) },
      { goal: 'done', runner: scripted([{ op: 'finish', summary: 'x' }]) },
    ],
    { owner: o },
  );
  const [hangs, done] = subagent_ids as [string, string];
  await doneFinished;
  return { hangs, done, results };
}

describe('the runtime timeline', () => {
  it('tells a tree: tree order, times, a delivered, a missed and a rejected steer, interrupt marks', async () => {
    const runtime = createRuntime({ max_spawn_depth: 2 });
    const o = owner('ses_a');
    const other = owner('ses_b');
    const tasks: TaskSpec[] = [
      {
        goal: 'parent',
        runner: scripted([
          { op: 'tool', name: 'plan' },
          {
            op: 'spawn',
            tasks: [
              { goal: 'helper', agent: { kind: 'scripted', steps: [{ op: 'say', text: 'ready' }, { op: 'wait_steer' }, { op: 'finish', summary: 'ok' }] } },
            ],
          },
          { op: 'finish', summary: 'done' },
        ]),
      },
      { goal: 'stuck', runner: scripted([{ op: 'spawn', tasks: [{ goal: 'stuck child', agent: { kind: 'scripted', steps: [{ op: 'hang' }] } }] }]) },
    ];
    const spawnedHelper = new Promise<string>((resolve) => {
      const off = runtime.onOwnedEvent((e) => {
        if (e.type === 'subagent.spawn_requested' && e.goal === 'helper') {
          off();
          resolve(String(e.subagent_id));
        }
      });
    });
    const handle = runtime.delegate(tasks, { owner: o });
    const [parent, stuck] = handle.subagent_ids as [string, string];
    const helper = await spawnedHelper;
    await reaches(runtime, helper, 'subagent.text');
    // Another session's host steers this one's child: refused, and nothing of it shows.
    expect(runtime.scoped.steer(scope(other), helper, 'not yours').status).toBe('rejected');
    const missed = runtime.scoped.steer(scope(o), parent, 'missed: the parent is inside its spawn step');
    const delivered = runtime.scoped.steer(scope(o), helper, 'delivered');
    expect(missed.status).toBe('queued');
    expect(delivered.status).toBe('queued');
    await reaches(runtime, parent, 'subagent.complete');
    expect(runtime.scoped.steer(scope(o), helper, 'too late').status).toBe('rejected');
    const stuckChild = runtime.scoped.list(scope(o)).find((s) => s.parent_id === stuck)?.subagent_id as string;
    const stopped = runtime.scoped.interrupt(scope(o), stuck);
    expect(stopped.interrupted).toEqual([stuck, stuckChild]);
    await handle.results;

    const t = runtime.scoped.timeline(scope(o));
    expect(timelineSchema.parse(t)).toEqual(t);
    expect(t.children.map((c) => c.subagent_id)).toEqual([parent, helper, stuck, stuckChild]);
    expect(t.children.map((c) => c.depth)).toEqual([0, 1, 0, 1]);
    for (const c of t.children) {
      expect(c.started_at).not.toBeNull();
      expect(c.created_at).toBeLessThanOrEqual(c.started_at as number);
      expect(c.started_at as number).toBeLessThanOrEqual(c.finished_at as number);
      expect(c.finished_at as number).toBeLessThanOrEqual(t.now);
    }
    const parentRow = t.children[0]!;
    expect(t.steers).toEqual([
      {
        steer_id: missed.status === 'queued' ? missed.steer_id : '',
        subagent_id: parent,
        fate: 'missed',
        queued_at: expect.any(Number),
        at: expect.any(Number),
      },
      {
        steer_id: delivered.status === 'queued' ? delivered.steer_id : '',
        subagent_id: helper,
        fate: 'delivered',
        queued_at: expect.any(Number),
        at: expect.any(Number),
      },
      { steer_id: null, subagent_id: helper, fate: 'rejected', queued_at: null, at: expect.any(Number) },
    ]);
    // A missed steer settles at the child's end; a delivered one after it was queued.
    expect(t.steers[0]!.at).toBeGreaterThanOrEqual(parentRow.finished_at as number);
    expect(t.steers[1]!.at).toBeGreaterThanOrEqual(t.steers[1]!.queued_at as number);
    expect(t.interrupts).toEqual([
      { subagent_id: stuck, target_id: stuck, at: expect.any(Number) },
      { subagent_id: stuckChild, target_id: stuck, at: expect.any(Number) },
    ]);
    expect(runtime.scoped.timeline(scope(other))).toEqual({ session_id: 'ses_b', now: expect.any(Number), children: [], steers: [], interrupts: [] });
  });

  it('shows a queued steer as queued until it settles, and a retired generation not at all', async () => {
    const runtime = createRuntime();
    const o = owner('ses_r');
    const { subagent_ids } = runtime.delegate([{ goal: 'hangs', runner: scripted([{ op: 'hang' }]) }], { owner: o });
    const id = subagent_ids[0] as string;
    expect(runtime.scoped.steer(scope(o), id, 'wait').status).toBe('queued');
    const t = runtime.scoped.timeline(scope(o));
    expect(t.steers).toEqual([{ steer_id: expect.any(String), subagent_id: id, fate: 'queued', queued_at: expect.any(Number), at: null }]);
    expect(t.children[0]?.status).toMatch(/queued|running/);
    // A reset: the session's scope is its next generation, which sees nothing of the old one.
    runtime.retireGeneration('ses_r', 1);
    expect(runtime.scoped.timeline(scope(o)).steers).toEqual([]);
    expect(runtime.scoped.timeline({ session_id: 'ses_r', generation: 2 })).toMatchObject({ children: [], steers: [], interrupts: [] });
    await runtime.shutdown();
  });

  it(`keeps at most ${MAX_TIMELINE_STEERS} steers a session, the oldest settled one leaving first`, async () => {
    const runtime = createRuntime();
    const o = owner('ses_bound');
    const { hangs, done, results } = await hangingAndDone(runtime, o);
    const first = runtime.scoped.steer(scope(o), hangs, 'oldest, still queued');
    expect(first.status).toBe('queued');
    for (let i = 0; i < MAX_TIMELINE_STEERS; i++) expect(runtime.scoped.steer(scope(o), done, `late ${i}`).status).toBe('rejected');
    const t = runtime.scoped.timeline(scope(o));
    expect(t.steers).toHaveLength(MAX_TIMELINE_STEERS);
    expect(t.steers[0]).toMatchObject({ subagent_id: hangs, fate: 'queued' });
    expect(t.steers.filter((s) => s.fate === 'rejected')).toHaveLength(MAX_TIMELINE_STEERS - 1);
    runtime.interrupt(hangs);
    await results;
    expect(runtime.scoped.timeline(scope(o)).steers[0]).toMatchObject({ subagent_id: hangs, fate: 'missed' });
    // A closed session lets go of its marks.
    runtime.releaseSession('ses_bound');
    expect(runtime.scoped.timeline(scope(o))).toMatchObject({ children: [], steers: [] });
  });

  it(`records a refused steer even when the ${MAX_TIMELINE_STEERS} kept are all still queued (the oldest goes)`, async () => {
    const runtime = createRuntime({ max_queued_steers: MAX_TIMELINE_STEERS + 10 });
    const o = owner('ses_full');
    const { hangs, done, results } = await hangingAndDone(runtime, o);
    for (let i = 0; i < MAX_TIMELINE_STEERS; i++) expect(runtime.scoped.steer(scope(o), hangs, `queued ${i}`).status).toBe('queued');
    expect(runtime.scoped.steer(scope(o), done, 'too late').status).toBe('rejected');
    const t = runtime.scoped.timeline(scope(o));
    expect(t.steers).toHaveLength(MAX_TIMELINE_STEERS);
    expect(t.steers.at(-1)).toMatchObject({ subagent_id: done, fate: 'rejected' });
    expect(t.steers.filter((s) => s.fate === 'queued')).toHaveLength(MAX_TIMELINE_STEERS - 1);
    runtime.interrupt(hangs);
    await results;
  });

  it('settles the queued steers it still keeps when they are delivered or missed, and never brings back one it let go', async () => {
    const runtime = createRuntime({ max_queued_steers: MAX_TIMELINE_STEERS + 10 });
    const o = owner('ses_settle');
    const { subagent_ids, results } = runtime.delegate(
      [
        { goal: 'takes', runner: scripted([{ op: 'wait_steer' }, { op: 'finish', summary: 'ok' }]) },
        { goal: 'hangs', runner: scripted([{ op: 'hang' }]) },
      ],
      { owner: o },
    );
    const [takes, hangs] = subagent_ids as [string, string];
    // Queued before either child runs: 5 more than the session keeps, so the 5 oldest marks go.
    const ids: string[] = [];
    for (let i = 0; i < MAX_TIMELINE_STEERS + 5; i++) {
      const r = runtime.scoped.steer(scope(o), i % 2 === 0 ? takes : hangs, `steer ${i}`);
      if (r.status !== 'queued') throw new Error(`steer ${i} ${r.status}`);
      ids.push(r.steer_id);
    }
    await reaches(runtime, takes, 'subagent.complete');
    runtime.interrupt(hangs);
    await results;
    const t = runtime.scoped.timeline(scope(o));
    expect(t.steers.map((m) => m.steer_id)).toEqual(ids.slice(5));
    for (const m of t.steers) expect(m.fate).toBe(m.subagent_id === takes ? 'delivered' : 'missed');
    expect(t.steers.every((m) => m.at !== null)).toBe(true);
  });
});
