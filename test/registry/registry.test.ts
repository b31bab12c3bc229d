import { describe, expect, it } from 'vitest';
import { type CompletionEntry, type Owner, type Runner, type RuntimeOptions, type Step, type TaskSpec } from '../../src/index.ts';
import { scripted } from '../../src/delegation/runners/scripted.ts';
import { flush } from '../helpers/manual-clock.ts';
import { runtimeHarness } from '../helpers/runtime-harness.ts';

const SNAPSHOT_KEYS = [
  'subagent_id',
  'parent_id',
  'depth',
  'goal',
  'delegation_id',
  'model',
  'started_at',
  'status',
  'tool_count',
  'last_tool',
  'accepting_steer',
];

const OWNER_A: Owner = { session_id: 'sess_A', transport: 'transport_secret_A', generation: 1 };
const OWNER_B: Owner = { session_id: 'sess_B', transport: 'transport_secret_B', generation: 1 };
const SCOPE_A = { session_id: 'sess_A', generation: 1 };

function setup(options: RuntimeOptions = {}) {
  const { clock, rt, events, find } = runtimeHarness(options);
  const completes = () => events.filter((e) => e.type === 'subagent.complete').map((e) => e.subagent_id);
  const entryOf = (id: string) => events.find((e) => e.type === 'subagent.complete' && e.subagent_id === id)?.entry as CompletionEntry | undefined;
  const delivered = (id: string) => events.filter((e) => e.type === 'subagent.steer.delivered' && e.subagent_id === id).map((e) => e.text);
  return { clock, rt, events, find, completes, entryOf, delivered };
}

const task = (goal: string, ...steps: Step[]): TaskSpec => ({ goal, agent: { kind: 'scripted', steps } });
const HANG: Step = { op: 'hang' };

describe('snapshots', () => {
  it('list() fields are exactly the allow-list; nothing private leaks', async () => {
    const { rt, clock } = setup();
    const h = rt.delegate([task('watch me', { op: 'tool', name: 'grep', ms: 50 }, HANG)], { owner: OWNER_A });
    await flush();
    const [snap] = rt.list();
    expect(Object.keys(snap!).sort()).toEqual([...SNAPSHOT_KEYS].sort());
    expect(snap).toEqual({
      subagent_id: h.subagent_ids[0],
      parent_id: null,
      depth: 0,
      goal: 'watch me',
      delegation_id: h.delegation_id,
      model: 'scripted',
      started_at: clock.now() / 1000,
      status: 'running',
      tool_count: 1,
      last_tool: 'grep',
      accepting_steer: true,
    });
    const json = JSON.stringify([rt.list(), rt.scoped.list(SCOPE_A)]);
    expect(json).not.toContain('transport_secret');
    expect(json).not.toContain('sess_A');
    expect(json).not.toContain('"runner"');
    expect(json).not.toContain('"owner"');
  });

  it('events never carry the owner, transport or runner', async () => {
    const { rt, events } = setup();
    const h = rt.delegate([task('t', { op: 'think', text: 'hm' }, { op: 'tool', name: 'x' }, { op: 'say', text: 's' })], { owner: OWNER_A });
    await h.results;
    await flush();
    expect(events.length).toBeGreaterThan(4);
    const json = JSON.stringify(events);
    expect(json).not.toContain('transport_secret');
    expect(json).not.toContain('sess_A');
    expect(json).not.toContain('"runner"');
    expect(json).not.toContain('"owner"');
  });

  it('a queued child has started_at null and status queued', async () => {
    const { rt } = setup({ max_concurrent_children: 1 });
    rt.delegate([task('first', HANG)]);
    const h2 = rt.delegate([task('second', HANG)]);
    await flush();
    const snap = rt.list().find((s) => s.subagent_id === h2.subagent_ids[0]);
    expect(snap?.status).toBe('queued');
    expect(snap?.started_at).toBeNull();
    expect(snap?.accepting_steer).toBe(true);
    expect(Object.keys(snap!).sort()).toEqual([...SNAPSHOT_KEYS].sort());
  });

  it('a finished snapshot adds exactly finished_at', async () => {
    const { rt, clock } = setup();
    const h = rt.delegate([task('quick', { op: 'sleep', ms: 1500 }, { op: 'finish', summary: 'done' })], { owner: OWNER_A });
    const start = clock.now();
    await flush();
    await clock.advance(1500);
    await h.results;
    const [snap] = rt.list({ include_finished: true });
    expect(Object.keys(snap!).sort()).toEqual([...SNAPSHOT_KEYS, 'finished_at'].sort());
    expect(snap?.status).toBe('completed');
    expect(snap?.accepting_steer).toBe(false);
    expect(snap?.started_at).toBe(start / 1000);
    expect(snap?.finished_at).toBe((start + 1500) / 1000);
    const [scoped] = rt.scoped.list(SCOPE_A, { include_finished: true });
    expect(Object.keys(scoped!).sort()).toEqual([...SNAPSHOT_KEYS, 'finished_at'].sort());
  });
});

describe('steer', () => {
  it('queues trimmed text and returns its steer_id; the reply carries no delivered key', async () => {
    const { rt, delivered, events } = setup();
    const h = rt.delegate([task('t', { op: 'wait_steer' }, { op: 'finish', summary: 'ok' })]);
    const id = h.subagent_ids[0]!;
    await flush();
    const r = rt.steer(id, '  \n  use the cache\t ');
    expect(r).toEqual({ status: 'queued', subagent_id: id, text: 'use the cache', steer_id: expect.stringMatching(/^st_/) });
    expect(Object.keys(r).sort()).toEqual(['status', 'steer_id', 'subagent_id', 'text']);
    const [entry] = await h.results;
    expect(delivered(id)).toEqual(['use the cache']);
    const ev = events.find((e) => e.type === 'subagent.steer.delivered');
    expect(r.status === 'queued' && ev?.steer_id === r.steer_id).toBe(true);
    expect(entry?.missed_steer).toBeUndefined();
    expect(rt.tail(id).text).toContain('[steer] use the cache\n');
  });

  it('answers queued for a steer to a running child', async () => {
    const { rt } = setup();
    const h = rt.delegate([task('t', HANG)]);
    await flush();
    expect(rt.steer(h.subagent_ids[0]!, 'hello').status).toBe('queued');
  });

  it('refuses an unknown id', () => {
    const { rt } = setup();
    expect(rt.steer('sa_nope', 'hi').status).toBe('rejected');
    expect(rt.steer('sa_nope', 'hi')).toMatchObject({ status: 'rejected', subagent_id: 'sa_nope', text: 'hi', reason: 'not_found' });
  });

  it('refuses empty and whitespace-only text', async () => {
    const { rt } = setup();
    const h = rt.delegate([task('t', HANG)]);
    await flush();
    const id = h.subagent_ids[0]!;
    expect(rt.steer(id, '').status).toBe('rejected');
    expect(rt.steer(id, ' \n\t  ').status).toBe('rejected');
    expect(rt.steer(id, '   ')).toMatchObject({ status: 'rejected', reason: 'empty', text: '' });
  });

  it('counts UTF-8 bytes of the trimmed text: 32768 accepted, 32769 refused', async () => {
    const { rt } = setup();
    const h = rt.delegate([task('t', HANG)]);
    await flush();
    const id = h.subagent_ids[0]!;
    expect(rt.steer(id, 'a'.repeat(32768)).status).toBe('queued');
    expect(rt.steer(id, 'a'.repeat(32769))).toMatchObject({ status: 'rejected', reason: 'too_long' });
    // Surrounding whitespace is trimmed before counting.
    expect(rt.steer(id, `   ${'b'.repeat(32768)}\n\n`).status).toBe('queued');
    // Multi-byte characters count as bytes: 10923 × '€' is 32769 bytes in 10923 UTF-16 units.
    expect('€'.repeat(10923).length).toBeLessThan(32768);
    expect(rt.steer(id, '€'.repeat(10923)).status).toBe('rejected');
    // 10922 × '€' + 2 ASCII = 32768 bytes: accepted.
    expect(rt.steer(id, `${'€'.repeat(10922)}ab`).status).toBe('queued');
    // 8192 emoji = 32768 bytes accepted; one more ASCII byte refused.
    expect(rt.steer(id, '😀'.repeat(8192)).status).toBe('queued');
    expect(rt.steer(id, `${'😀'.repeat(8192)}x`).status).toBe('rejected');
  });

  it('refuses a finished child', async () => {
    const { rt } = setup();
    const h = rt.delegate([task('t', { op: 'finish', summary: 'done' })]);
    await h.results;
    const id = h.subagent_ids[0]!;
    expect(rt.steer(id, 'too late')).toMatchObject({ status: 'rejected', reason: 'finished' });
  });

  it('refuses a finishing child (sealed, entry not yet published: accepting_steer false)', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let finishing = '';
    const { rt, entryOf, delivered } = setup({
      checkpoint: (label, id) => {
        if (label === 'complete' && id === finishing) return gate;
        return Promise.resolve();
      },
    });
    const h = rt.delegate([task('t', { op: 'say', text: 'answer' }, { op: 'finish' })]);
    const id = h.subagent_ids[0]!;
    finishing = id;
    await flush();
    const snap = rt.list().find((s) => s.subagent_id === id);
    expect(snap?.status).toBe('running');
    expect(snap?.accepting_steer).toBe(false);
    expect(rt.steer(id, 'in the gap')).toMatchObject({ status: 'rejected', reason: 'finished' });
    release();
    await h.results;
    await flush();
    expect(entryOf(id)?.status).toBe('completed');
    expect(entryOf(id)?.missed_steer).toBeUndefined();
    expect(entryOf(id)?.summary).toBe('answer');
    expect(delivered(id)).toEqual([]);
  });

  it("refuses a steer the runner's onSteer hook vetoes, and the refusal leaves no trace", async () => {
    const base = scripted([
      { op: 'tool', name: 'work', ms: 100 },
      { op: 'finish', summary: 'done' },
    ]);
    const seen: string[] = [];
    const picky: Runner = {
      ...base,
      onSteer(steer) {
        seen.push(steer.text);
        if (steer.text.includes('forbidden')) throw new Error('not allowed');
      },
    };
    const { rt, clock, delivered } = setup();
    const h = rt.delegate([{ goal: 'picky', runner: picky }]);
    const id = h.subagent_ids[0]!;
    await flush();
    expect(rt.steer(id, 'forbidden move')).toMatchObject({ status: 'rejected', reason: 'vetoed' });
    expect(rt.steer(id, 'fine move').status).toBe('queued');
    expect(seen).toEqual(['forbidden move', 'fine move']);
    await clock.advance(100);
    const [entry] = await h.results;
    expect(delivered(id)).toEqual(['fine move']);
    expect(entry?.missed_steer).toBeUndefined();
    expect(rt.tail(id).text).not.toContain('forbidden');
  });

  it('a veto that stops its own child while it is queued: the steer is refused, never queued into a sealed inbox and lost', async () => {
    const s = setup({ max_concurrent_children: 1 });
    const { rt } = s;
    const stopper: Runner = {
      ...scripted([{ op: 'finish', summary: 'never runs' }]),
      onSteer(steer) {
        if (steer.text === 'stop yourself') rt.interrupt(queuedId);
      },
    };
    const blocker = rt.delegate([{ goal: 'holds the slot', agent: { kind: 'scripted', steps: [{ op: 'hang' }] } }]);
    const h = rt.delegate([{ goal: 'queued', runner: stopper }]);
    const queuedId = h.subagent_ids[0]!;
    await flush();
    expect(s.find(queuedId)?.status).toBe('queued');
    expect(rt.steer(queuedId, 'stop yourself')).toMatchObject({ status: 'rejected', reason: 'finished' });
    const [entry] = await h.results;
    expect(entry?.status).toBe('interrupted');
    expect(entry?.missed_steer).toBeUndefined();
    expect(s.delivered(queuedId)).toEqual([]);
    rt.interrupt(blocker.subagent_ids[0]!);
    await blocker.results;
  });

  it('a vetoed steer does not wake a runner waiting for a steer', async () => {
    const base = scripted([{ op: 'wait_steer' }, { op: 'say', text: 'woke up' }, { op: 'finish' }]);
    const picky: Runner = {
      ...base,
      onSteer(steer) {
        if (steer.text === 'no') throw new Error('vetoed');
      },
    };
    const { rt, find, events } = setup();
    const h = rt.delegate([{ goal: 'waiting', runner: picky }]);
    const id = h.subagent_ids[0]!;
    await flush();
    expect(rt.steer(id, 'no').status).toBe('rejected');
    await flush();
    // Nothing was queued, so wait_steer must still be waiting.
    expect(find(id)?.status).toBe('running');
    expect(events.some((e) => e.type === 'subagent.text')).toBe(false);
    expect(rt.steer(id, 'yes').status).toBe('queued');
    const [entry] = await h.results;
    expect(entry?.summary).toBe('woke up');
  });

  it('refused steers of every kind change nothing: not delivered, not missed, not in the transcript', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let gated = '';
    const { rt, clock, delivered, entryOf } = setup({
      checkpoint: (label, id) => (label === 'complete' && id === gated ? gate : Promise.resolve()),
    });
    const h = rt.delegate([task('t', { op: 'tool', name: 'w', ms: 10 }, { op: 'sleep', ms: 10 }, { op: 'finish', summary: 'S' })]);
    const id = h.subagent_ids[0]!;
    gated = id;
    await flush();
    rt.steer(id, '   ');
    rt.steer(id, 'x'.repeat(40000));
    rt.steer(id, 'accepted-one'); // positive control: queued, delivered after the tool
    await clock.advance(10);
    rt.steer(id, 'accepted-two'); // queued during the sleep before finish: missed
    await clock.advance(10);
    expect(rt.steer(id, 'during-seal').status).toBe('rejected');
    release();
    await h.results;
    await flush();
    expect(rt.steer(id, 'after-finish').status).toBe('rejected');
    const entry = entryOf(id)!;
    expect(delivered(id)).toEqual(['accepted-one']);
    expect(entry.missed_steer).toBe('accepted-two');
    const tail = rt.tail(id).text;
    expect(tail).not.toContain('xxxx');
    expect(tail).not.toContain('during-seal');
    expect(tail).not.toContain('after-finish');
  });

  it('accepts steers for a queued child; they wait for its first delivery point', async () => {
    const { rt, clock, delivered, events } = setup({ max_concurrent_children: 1 });
    rt.delegate([task('first', { op: 'sleep', ms: 100 }, { op: 'finish' })]);
    const second = rt.delegate([task('second', { op: 'think', text: 'no delivery here' }, { op: 'tool', name: 't' }, { op: 'finish' })]);
    const id = second.subagent_ids[0]!;
    await flush();
    expect(rt.list().find((s) => s.subagent_id === id)?.status).toBe('queued');
    expect(rt.steer(id, 'early word').status).toBe('queued');
    await flush();
    expect(delivered(id)).toEqual([]);
    await clock.advance(100);
    const [entry] = await second.results;
    expect(delivered(id)).toEqual(['early word']);
    expect(entry?.missed_steer).toBeUndefined();
    // Delivered right after the tool step, not before it.
    const types = events.filter((e) => e.subagent_id === id).map((e) => e.type);
    expect(types.indexOf('subagent.steer.delivered')).toBeGreaterThan(types.indexOf('subagent.tool'));
  });
});

describe('scoped calls', () => {
  it('see only their own session and generation', async () => {
    const { rt } = setup();
    const a = rt.delegate([task('a', HANG)], { owner: OWNER_A });
    const b = rt.delegate([task('b', HANG)], { owner: OWNER_B });
    await flush();
    expect(rt.scoped.list(SCOPE_A).map((s) => s.subagent_id)).toEqual(a.subagent_ids);
    expect(rt.scoped.list({ session_id: 'sess_B', generation: 1 }).map((s) => s.subagent_id)).toEqual(b.subagent_ids);
    expect(rt.scoped.list({ session_id: 'sess_A', generation: 2 })).toEqual([]);
    expect(
      rt
        .list()
        .map((s) => s.subagent_id)
        .sort(),
    ).toEqual([...a.subagent_ids, ...b.subagent_ids].sort());
  });

  const NOT_FOUND_TAIL = (id: string) => ({ subagent_id: id, available: false, text: '', truncated: false, offset: 0 });

  it.each([
    ['a foreign child (other session)', OWNER_B, SCOPE_A],
    ['a child of a retired generation', OWNER_A, { session_id: 'sess_A', generation: 2 }],
    ['an in-process child (no owner)', undefined, SCOPE_A],
  ] as const)('refuse %s as not found, and change nothing', async (_name, owner, scope) => {
    const { rt, delivered, find } = setup();
    const h = rt.delegate([task('t', { op: 'wait_steer' }, { op: 'say', text: 'after' }, HANG)], owner ? { owner } : {});
    const id = h.subagent_ids[0]!;
    await flush();
    rt.steer(id, 'warm up'); // make the transcript non-empty via an unscoped delivery
    await flush();
    expect(rt.tail(id).available).toBe(true);
    expect(rt.tail(id).offset).toBeGreaterThan(0);

    expect(rt.scoped.list(scope)).toEqual([]);
    expect(rt.scoped.list(scope, { include_finished: true })).toEqual([]);
    expect(rt.scoped.tail(scope, id)).toEqual(NOT_FOUND_TAIL(id));
    expect(rt.scoped.tail(scope, id, 0)).toEqual(NOT_FOUND_TAIL(id));
    expect(rt.scoped.steer(scope, id, 'sneaky')).toMatchObject({ status: 'rejected', subagent_id: id, reason: 'not_found' });
    expect(rt.scoped.interrupt(scope, id)).toEqual({ found: false, subagent_id: id, interrupted: [] });

    // Nothing changed: still running, the foreign steer is nowhere, and a real interrupt works.
    expect(find(id)?.status).toBe('running');
    expect(rt.interrupt(id).found).toBe(true);
    const [entry] = await h.results;
    expect(entry?.status).toBe('interrupted');
    expect(entry?.missed_steer).toBeUndefined();
    expect(delivered(id)).toEqual(['warm up']);
    expect(rt.tail(id).text).not.toContain('sneaky');
  });

  it('the owning scope can list, tail, steer and interrupt', async () => {
    const { rt, delivered } = setup();
    const h = rt.delegate([task('mine', { op: 'wait_steer' }, HANG)], { owner: OWNER_A });
    const id = h.subagent_ids[0]!;
    await flush();
    expect(rt.scoped.list(SCOPE_A).map((s) => s.subagent_id)).toEqual([id]);
    const st = rt.scoped.steer(SCOPE_A, id, ' go ');
    expect(st).toMatchObject({ status: 'queued', text: 'go' });
    await flush();
    expect(delivered(id)).toEqual(['go']);
    expect(rt.scoped.tail(SCOPE_A, id)).toMatchObject({ subagent_id: id, available: true, truncated: false });
    expect(rt.scoped.tail(SCOPE_A, id).text).toContain('[steer] go');
    expect(rt.scoped.interrupt(SCOPE_A, id)).toEqual({ found: true, subagent_id: id, interrupted: [id] });
    await h.results;
    const [snap] = rt.scoped.list(SCOPE_A, { include_finished: true });
    expect(snap?.status).toBe('interrupted');
    expect(rt.scoped.tail(SCOPE_A, id).available).toBe(true);
  });
});

describe('interrupt', () => {
  it('stops a 3-level subtree: target first, then every descendant; entries complete post-order', async () => {
    const { rt, events, completes, find } = setup({ max_spawn_depth: 3 });
    const leaf = (g: string) => ({ goal: g, agent: { kind: 'scripted', steps: [HANG] } });
    const h = rt.delegate([
      task(
        'root',
        {
          op: 'spawn',
          tasks: [
            { goal: 'mid-1', agent: { kind: 'scripted', steps: [{ op: 'spawn', tasks: [leaf('leaf-1a'), leaf('leaf-1b')] }] } },
            { goal: 'mid-2', agent: { kind: 'scripted', steps: [{ op: 'spawn', tasks: [leaf('leaf-2')] }] } },
          ],
        },
        { op: 'say', text: 'never' },
      ),
    ]);
    const root = h.subagent_ids[0]!;
    await flush();
    const live = rt.list();
    expect(live).toHaveLength(6);
    expect(live.every((s) => s.status === 'running')).toBe(true);
    const byGoal = (g: string) => live.find((s) => s.goal === g)!;
    expect(byGoal('leaf-1a').depth).toBe(2);
    expect(byGoal('leaf-1a').parent_id).toBe(byGoal('mid-1').subagent_id);
    expect(byGoal('mid-2').parent_id).toBe(root);

    const r = rt.interrupt(root);
    expect(r.found).toBe(true);
    expect(r.subagent_id).toBe(root);
    expect(r.interrupted[0]).toBe(root);
    expect([...r.interrupted].sort()).toEqual(live.map((s) => s.subagent_id).sort());
    expect(new Set(r.interrupted).size).toBe(6);

    const [entry] = await h.results;
    await flush();
    expect(entry?.status).toBe('interrupted');
    const order = completes();
    expect(order).toHaveLength(6);
    expect(order[order.length - 1]).toBe(root);
    // Each child's entry before its parent's.
    for (const s of live) {
      if (s.parent_id) expect(order.indexOf(s.subagent_id)).toBeLessThan(order.indexOf(s.parent_id));
    }
    for (const s of live) expect(find(s.subagent_id)?.status).toBe('interrupted');
    expect(events.some((e) => e.type === 'subagent.text' && e.text === 'never')).toBe(false);

    // A second interrupt finds nothing and adds no second entry.
    expect(rt.interrupt(root)).toEqual({ found: false, subagent_id: root, interrupted: [] });
    expect(rt.interrupt(byGoal('leaf-2').subagent_id).found).toBe(false);
    await flush();
    expect(completes()).toHaveLength(6);
  });

  it('a second interrupt before the child stopped is refused and adds no second entry', async () => {
    const { rt, completes } = setup();
    const h = rt.delegate([task('t', HANG)]);
    const id = h.subagent_ids[0]!;
    await flush();
    expect(rt.interrupt(id).found).toBe(true);
    expect(rt.interrupt(id).found).toBe(false);
    await h.results;
    await flush();
    expect(rt.interrupt(id).found).toBe(false);
    expect(completes()).toEqual([id]);
  });

  it('interrupting a mid-level child stops only its subtree', async () => {
    const { rt, find } = setup({ max_spawn_depth: 3 });
    rt.delegate([
      task('root', {
        op: 'spawn',
        tasks: [
          { goal: 'mid', agent: { kind: 'scripted', steps: [{ op: 'spawn', tasks: [{ goal: 'leaf', agent: { kind: 'scripted', steps: [HANG] } }] }] } },
          { goal: 'sibling', agent: { kind: 'scripted', steps: [HANG] } },
        ],
      }),
    ]);
    await flush();
    const g = (goal: string) => rt.list().find((s) => s.goal === goal)!.subagent_id;
    const [root, mid, leaf, sibling] = [g('root'), g('mid'), g('leaf'), g('sibling')];
    expect(rt.interrupt(mid)).toEqual({ found: true, subagent_id: mid, interrupted: [mid, leaf] });
    await flush();
    expect(find(mid)?.status).toBe('interrupted');
    expect(find(leaf)?.status).toBe('interrupted');
    expect(find(root)?.status).toBe('running');
    expect(find(sibling)?.status).toBe('running');
  });

  it('an unknown id is not found', () => {
    const { rt } = setup();
    expect(rt.interrupt('sa_404')).toEqual({ found: false, subagent_id: 'sa_404', interrupted: [] });
    expect(rt.interrupt('sa_404').found).toBe(false);
  });

  it('a queued child completes at once as interrupted and never starts', async () => {
    const { rt, events, find, entryOf, clock } = setup({ max_concurrent_children: 1 });
    const first = rt.delegate([task('first', { op: 'sleep', ms: 100 }, { op: 'finish', summary: 'first done' })]);
    const second = rt.delegate([task('second', { op: 'say', text: 'should never run' }, { op: 'finish' })]);
    const id = second.subagent_ids[0]!;
    await flush();
    expect(find(id)?.status).toBe('queued');
    expect(rt.steer(id, 'queued steer').status).toBe('queued');

    expect(rt.interrupt(id)).toEqual({ found: true, subagent_id: id, interrupted: [id] });
    // At once: no flush needed.
    expect(find(id)?.status).toBe('interrupted');
    expect(find(id)?.started_at).toBeNull();
    expect(find(id)?.accepting_steer).toBe(false);
    const entry = entryOf(id)!;
    expect(entry.status).toBe('interrupted');
    expect(entry.duration_seconds).toBe(0);
    expect(entry.missed_steer).toBe('queued steer');
    expect(entry.error).toContain('[steer did not land before the subagent stopped: queued steer]');

    await clock.advance(100);
    const [firstEntry] = await first.results;
    expect(firstEntry?.status).toBe('completed');
    await second.results;
    await flush();
    expect(events.filter((e) => e.type === 'subagent.start').map((e) => e.subagent_id)).toEqual(first.subagent_ids);
    expect(events.some((e) => e.type === 'subagent.text' && e.subagent_id === id)).toBe(false);
    expect(events.filter((e) => e.type === 'subagent.complete' && e.subagent_id === id)).toHaveLength(1);
  });
});

describe('retention', () => {
  it('include_finished lists finished children with finished_at; list() does not', async () => {
    const { rt } = setup();
    const h = rt.delegate([task('a', { op: 'finish', summary: 'A' }), task('b', HANG)]);
    await flush();
    const [a, b] = h.subagent_ids as [string, string];
    expect(rt.list().map((s) => s.subagent_id)).toEqual([b]);
    const all = rt.list({ include_finished: true });
    expect(all.map((s) => s.subagent_id).sort()).toEqual([a, b].sort());
    const fa = all.find((s) => s.subagent_id === a)!;
    expect(fa.status).toBe('completed');
    expect(typeof fa.finished_at).toBe('number');
    expect('finished_at' in all.find((s) => s.subagent_id === b)!).toBe(false);
    rt.interrupt(b);
    await h.results;
  });

  it('is bounded by retain_finished per owner, dropping the oldest', async () => {
    const { rt } = setup({ retain_finished: 2 });
    const runOne = async (goal: string, owner?: Owner) => {
      const h = rt.delegate([task(goal, { op: 'finish', summary: goal })], owner ? { owner } : {});
      await h.results;
      return h.subagent_ids[0]!;
    };
    const local = [await runOne('l1'), await runOne('l2'), await runOne('l3')];
    const inA = [await runOne('a1', OWNER_A), await runOne('a2', OWNER_A), await runOne('a3', OWNER_A)];
    const inB = [await runOne('b1', OWNER_B)];
    const listed = rt
      .list({ include_finished: true })
      .map((s) => s.subagent_id)
      .sort();
    expect(listed).toEqual([local[1], local[2], inA[1], inA[2], inB[0]].sort());
    expect(rt.scoped.list(SCOPE_A, { include_finished: true }).map((s) => s.subagent_id)).toEqual([inA[1], inA[2]]);
    // A dropped child is gone for tail too.
    expect(rt.tail(local[0]!).available).toBe(false);
    expect(rt.scoped.tail(SCOPE_A, inA[0]!).available).toBe(false);
  });

  it('retain_finished 0 keeps nothing', async () => {
    const { rt } = setup({ retain_finished: 0 });
    const h = rt.delegate([task('x', { op: 'finish' })]);
    await h.results;
    expect(rt.list({ include_finished: true })).toEqual([]);
    expect(rt.tail(h.subagent_ids[0]!).available).toBe(false);
  });

  it('tail of a retained child still gives its final window, and since still works', async () => {
    const { rt } = setup();
    const h = rt.delegate([task('talker', { op: 'say', text: 'first words' }, { op: 'think', text: 'pondering' }, { op: 'finish', summary: 'the end' })], {
      owner: OWNER_A,
    });
    await h.results;
    const id = h.subagent_ids[0]!;
    const t = rt.tail(id);
    expect(t.available).toBe(true);
    expect(t.truncated).toBe(false);
    expect(t.text).toBe('[start] talker\n[text] first words\n[thinking] pondering\n[completed] the end\n');
    expect(t.offset).toBe(Buffer.byteLength(t.text));
    const scopedTail = rt.scoped.tail(SCOPE_A, id, t.offset - '[completed] the end\n'.length);
    expect(scopedTail).toEqual({ subagent_id: id, available: true, text: '[completed] the end\n', truncated: false, offset: t.offset });
  });
});
