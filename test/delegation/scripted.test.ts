import { describe, expect, it } from 'vitest';
import { scripted, stepSchema, type RuntimeOptions, type Snapshot, type Step } from '../../src/index.ts';
import { flush } from '../helpers/manual-clock.ts';
import { runtimeHarness } from '../helpers/runtime-harness.ts';

function setup(options: RuntimeOptions = {}) {
  const { clock, rt, events } = runtimeHarness(options);
  /** Delegates one scripted child and lets it run to its first wait. */
  const run = async (...steps: Step[]) => {
    const h = rt.delegate([{ goal: 'scripted child', agent: { kind: 'scripted', steps } }]);
    await flush();
    const id = h.subagent_ids[0]!;
    return { id, results: h.results, entry: async () => (await h.results)[0]! };
  };
  const snap = (id: string): Snapshot | undefined => rt.list({ include_finished: true }).find((s) => s.subagent_id === id);
  const delivered = (id: string) => events.filter((e) => e.type === 'subagent.steer.delivered' && e.subagent_id === id);
  /** Event types of one child, in emission order. */
  const typesOf = (id: string) => events.filter((e) => e.subagent_id === id).map((e) => e.type);
  return { clock, rt, events, run, snap, delivered, typesOf };
}

const NOTE_COMPLETED = (t: string) => `[steer did not land — the subagent finished before it could be delivered: ${t}]`;
const NOTE_STOPPED = (t: string) => `[steer did not land before the subagent stopped: ${t}]`;

describe('scripted runner: delivery points', () => {
  it('a steer queued during a tool is delivered right after that tool', async () => {
    const { rt, clock, run, delivered, typesOf } = setup();
    const c = await run({ op: 'tool', name: 'build', ms: 100 }, { op: 'say', text: 'after build' }, { op: 'finish' });
    const st = rt.steer(c.id, 'use -O2');
    expect(st.status).toBe('queued');
    await flush();
    expect(delivered(c.id)).toEqual([]);
    await clock.advance(100);
    const entry = await c.entry();
    expect(delivered(c.id).map((e) => e.text)).toEqual(['use -O2']);
    expect(delivered(c.id)[0]?.steer_id).toBe(st.status === 'queued' ? st.steer_id : 'none');
    expect(entry.missed_steer).toBeUndefined();
    expect(entry.status).toBe('completed');
    const types = typesOf(c.id);
    expect(types.indexOf('subagent.steer.delivered')).toBeGreaterThan(types.indexOf('subagent.tool'));
    expect(types.indexOf('subagent.steer.delivered')).toBeLessThan(types.indexOf('subagent.text'));
    // In the transcript too, after the tool's result.
    const text = rt.tail(c.id).text;
    expect(text.indexOf('[steer] use -O2')).toBeGreaterThan(text.indexOf('[result] ok'));
    expect(text.indexOf('[steer] use -O2')).toBeLessThan(text.indexOf('[text] after build'));
  });

  it('a steer queued during a sleep that precedes finish is missed, with the note; status stays completed', async () => {
    const { rt, clock, run, delivered } = setup();
    const c = await run({ op: 'say', text: 'my answer' }, { op: 'sleep', ms: 100 }, { op: 'finish' });
    expect(rt.steer(c.id, 'check the tests too').status).toBe('queued');
    await clock.advance(100);
    const entry = await c.entry();
    expect(entry.status).toBe('completed');
    expect(entry.missed_steer).toBe('check the tests too');
    expect(entry.summary).toBe(`my answer\n\n${NOTE_COMPLETED('check the tests too')}`);
    expect(entry).not.toHaveProperty('error');
    expect(delivered(c.id)).toEqual([]);
  });

  it('think, say and sleep are not delivery points; a later tool is', async () => {
    const { rt, clock, run, delivered, typesOf } = setup();
    const c = await run(
      { op: 'sleep', ms: 10 },
      { op: 'think', text: 'hmm' },
      { op: 'say', text: 'hello' },
      { op: 'sleep', ms: 10 },
      { op: 'tool', name: 'late_tool' },
      { op: 'finish' },
    );
    rt.steer(c.id, 'wait for the tool');
    await clock.advance(10);
    expect(delivered(c.id)).toEqual([]);
    await clock.advance(10);
    await c.entry();
    expect(delivered(c.id).map((e) => e.text)).toEqual(['wait for the tool']);
    const types = typesOf(c.id);
    expect(types.indexOf('subagent.steer.delivered')).toBeGreaterThan(types.indexOf('subagent.tool'));
    expect(types.indexOf('subagent.steer.delivered')).toBeGreaterThan(types.indexOf('subagent.text'));
  });

  it('several queued steers are delivered together, in acceptance order, one event each with its steer_id', async () => {
    const { rt, clock, run, delivered } = setup();
    const c = await run({ op: 'tool', name: 't', ms: 50 }, { op: 'finish' });
    const ids = ['one', 'two', 'three'].map((t) => {
      const r = rt.steer(c.id, t);
      return r.status === 'queued' ? r.steer_id : '';
    });
    await clock.advance(50);
    await c.entry();
    const evs = delivered(c.id);
    expect(evs.map((e) => [e.steer_id, e.text])).toEqual([
      [ids[0], 'one'],
      [ids[1], 'two'],
      [ids[2], 'three'],
    ]);
    expect(new Set(ids).size).toBe(3);
    expect(rt.tail(c.id).text).toContain('[steer] one\n[steer] two\n[steer] three\n');
  });

  it('a steer after the last delivery point is missed; earlier ones were delivered', async () => {
    const { rt, clock, run, delivered } = setup();
    const c = await run({ op: 'tool', name: 't', ms: 10 }, { op: 'sleep', ms: 10 }, { op: 'say', text: 'final' });
    rt.steer(c.id, 'early');
    await clock.advance(10);
    rt.steer(c.id, 'late-1');
    rt.steer(c.id, 'late-2');
    await clock.advance(10);
    const entry = await c.entry();
    expect(delivered(c.id).map((e) => e.text)).toEqual(['early']);
    expect(entry.missed_steer).toBe('late-1\nlate-2');
    expect(entry.summary).toBe(`final\n\n${NOTE_COMPLETED('late-1\nlate-2')}`);
  });
});

describe('scripted runner: wait_steer', () => {
  it('waits until a steer is queued, then delivers it', async () => {
    const { rt, clock, run, snap, delivered } = setup();
    const c = await run({ op: 'wait_steer' }, { op: 'say', text: 'got it' }, { op: 'finish' });
    await clock.advance(1_000_000);
    expect(snap(c.id)?.status).toBe('running');
    const r = rt.steer(c.id, 'here you go');
    const entry = await c.entry();
    expect(entry).toMatchObject({ status: 'completed', summary: 'got it' });
    expect(entry.missed_steer).toBeUndefined();
    expect(delivered(c.id).map((e) => [e.steer_id, e.text])).toEqual([[r.status === 'queued' ? r.steer_id : '', 'here you go']]);
  });

  it('returns at once when a steer is already queued', async () => {
    const { rt, run, delivered } = setup({ max_concurrent_children: 1 });
    // Hold the only slot so the steer is queued before the child starts.
    const blocker = await run({ op: 'wait_steer' });
    const c = await run({ op: 'wait_steer' }, { op: 'finish', summary: 'fast' });
    expect(rt.steer(c.id, 'already here').status).toBe('queued');
    rt.steer(blocker.id, 'release');
    const entry = await c.entry();
    expect(entry.summary).toBe('fast');
    expect(delivered(c.id).map((e) => e.text)).toEqual(['already here']);
  });

  it('timeout_ms ends the wait without a steer', async () => {
    const { clock, run, snap, delivered } = setup();
    const c = await run({ op: 'wait_steer', timeout_ms: 1000 }, { op: 'say', text: 'gave up waiting' });
    await clock.advance(999);
    expect(snap(c.id)?.status).toBe('running');
    await clock.advance(1);
    const entry = await c.entry();
    expect(entry).toMatchObject({ status: 'completed', summary: 'gave up waiting' });
    expect(delivered(c.id)).toEqual([]);
  });

  it('a steer before timeout_ms is delivered at once', async () => {
    const { rt, clock, run, delivered } = setup();
    const c = await run({ op: 'wait_steer', timeout_ms: 1000 }, { op: 'say', text: 'steered' });
    await clock.advance(500);
    rt.steer(c.id, 'now');
    const entry = await c.entry();
    expect(entry.summary).toBe('steered');
    expect(delivered(c.id).map((e) => e.text)).toEqual(['now']);
  });

  it('a timed wait leaves no timer behind when the steer wins, and no waiter when the timeout wins', async () => {
    const { rt, clock, run } = setup();
    const c = await run({ op: 'wait_steer', timeout_ms: 60_000 }, ...Array.from({ length: 20 }, () => ({ op: 'wait_steer' as const, timeout_ms: 10 })), {
      op: 'hang',
    });
    rt.steer(c.id, 'first');
    await flush();
    // The 60 s timer lost the race to the steer: it must be gone, not pending until it fires.
    await clock.advance(20 * 10);
    expect(clock.pendingTimers).toBe(0);
    // Twenty timed-out waits left no abort listeners (Node warns past 10 on one signal).
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    rt.interrupt(c.id);
    await c.entry();
    await flush();
    process.off('warning', onWarning);
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  });

  it('an interrupt ends the wait; the child is interrupted', async () => {
    const { rt, run } = setup();
    const c = await run({ op: 'say', text: 'waiting...' }, { op: 'wait_steer' }, { op: 'say', text: 'never' });
    rt.interrupt(c.id);
    const entry = await c.entry();
    expect(entry).toMatchObject({ status: 'interrupted', summary: 'waiting...' });
  });
});

describe('scripted runner: end states', () => {
  it('hang runs until interrupted', async () => {
    const { rt, clock, run, snap } = setup();
    const c = await run({ op: 'say', text: 'hanging' }, { op: 'hang' }, { op: 'say', text: 'never' });
    await clock.advance(10_000_000);
    expect(snap(c.id)?.status).toBe('running');
    const st = rt.steer(c.id, 'unheard');
    expect(st.status).toBe('queued');
    expect(rt.interrupt(c.id)).toEqual({ found: true, subagent_id: c.id, interrupted: [c.id] });
    const entry = await c.entry();
    expect(entry.status).toBe('interrupted');
    expect(entry.summary).toBe('hanging');
    expect(entry.missed_steer).toBe('unheard');
    expect(entry.error).toBe(`interrupted ${NOTE_STOPPED('unheard')}`);
  });

  it('fail ends with status failed and the given error', async () => {
    const { run } = setup();
    const c = await run({ op: 'say', text: 'partial' }, { op: 'fail', error: 'disk full' }, { op: 'say', text: 'never' });
    const entry = await c.entry();
    expect(entry).toMatchObject({ status: 'failed', error: 'disk full', summary: 'partial' });
  });

  it('fail with a missed steer keeps status failed and appends the note to error', async () => {
    const { rt, clock, run } = setup();
    const c = await run({ op: 'sleep', ms: 5 }, { op: 'fail', error: 'gave up' });
    rt.steer(c.id, 'try harder');
    await clock.advance(5);
    const entry = await c.entry();
    expect(entry.status).toBe('failed');
    expect(entry.error).toBe(`gave up ${NOTE_STOPPED('try harder')}`);
  });

  it('steps past the end finish with the last say as summary', async () => {
    const { run } = setup();
    const c = await run({ op: 'say', text: 'one' }, { op: 'tool', name: 't' }, { op: 'say', text: 'two' }, { op: 'think', text: 'not a say' });
    expect(await c.entry()).toMatchObject({ status: 'completed', summary: 'two' });
  });

  it('no steps: completed with an empty summary', async () => {
    const { run } = setup();
    expect(await (await run()).entry()).toMatchObject({ status: 'completed', summary: '' });
  });

  it('finish uses its summary, else the last say; steps after finish never run', async () => {
    const { run, events } = setup();
    const a = await run({ op: 'say', text: 'said' }, { op: 'finish', summary: 'explicit' }, { op: 'say', text: 'after finish' });
    expect((await a.entry()).summary).toBe('explicit');
    const b = await run({ op: 'say', text: 'said' }, { op: 'finish' });
    expect((await b.entry()).summary).toBe('said');
    expect(events.some((e) => e.text === 'after finish')).toBe(false);
  });

  it('an interrupt during a sleep ends it early', async () => {
    const { rt, clock, run } = setup();
    const c = await run({ op: 'say', text: 'sleeping' }, { op: 'sleep', ms: 60_000 }, { op: 'say', text: 'never' });
    rt.interrupt(c.id);
    const entry = await c.entry();
    expect(entry).toMatchObject({ status: 'interrupted', summary: 'sleeping', duration_seconds: 0 });
    expect(clock.pendingTimers).toBe(0);
  });

  it('an interrupt during a tool marks that tool as error in the trace', async () => {
    const { rt, run } = setup();
    const c = await run({ op: 'tool', name: 'quick' }, { op: 'tool', name: 'slow', ms: 60_000 }, { op: 'tool', name: 'never' });
    rt.interrupt(c.id);
    const entry = await c.entry();
    expect(entry.status).toBe('interrupted');
    expect(entry.tool_trace).toEqual([
      { tool: 'quick', status: 'ok' },
      { tool: 'slow', status: 'error' },
    ]);
    expect(rt.tail(c.id).text).toContain('[result] error: interrupted');
  });
});

describe('scripted runner: transcript, counters and events', () => {
  it('think, say and tool go into the transcript in order', async () => {
    const { rt, run } = setup();
    const c = await run(
      { op: 'think', text: 'let me look' },
      { op: 'tool', name: 'read_file', args: { path: 'a.ts' }, result: 'contents of a' },
      { op: 'say', text: 'a.ts is fine' },
    );
    await c.entry();
    expect(rt.tail(c.id).text).toBe(
      [
        '[start] scripted child',
        '[thinking] let me look',
        '[tool] read_file {"path":"a.ts"}',
        '[result] contents of a',
        '[text] a.ts is fine',
        '[completed] a.ts is fine',
        '',
      ].join('\n'),
    );
  });

  it('a tool without args or result writes its name and "ok"', async () => {
    const { rt, run } = setup();
    const c = await run({ op: 'tool', name: 'ping' });
    await c.entry();
    expect(rt.tail(c.id).text).toContain('[tool] ping\n[result] ok\n');
  });

  it('tool_count and last_tool count tools as they start; tool_trace records each', async () => {
    const { clock, run, snap, events } = setup();
    const c = await run({ op: 'tool', name: 'grep' }, { op: 'tool', name: 'sed', ms: 100 }, { op: 'say', text: 'x' }, { op: 'tool', name: 'git', ms: 100 });
    // Mid-way through `sed`: it already counts as the last tool.
    expect(snap(c.id)).toMatchObject({ tool_count: 2, last_tool: 'sed', status: 'running' });
    await clock.advance(100);
    expect(snap(c.id)).toMatchObject({ tool_count: 3, last_tool: 'git' });
    await clock.advance(100);
    const entry = await c.entry();
    expect(entry.tool_trace).toEqual([
      { tool: 'grep', status: 'ok' },
      { tool: 'sed', status: 'ok' },
      { tool: 'git', status: 'ok' },
    ]);
    expect(snap(c.id)).toMatchObject({ tool_count: 3, last_tool: 'git', status: 'completed' });
    const tools = events.filter((e) => e.type === 'subagent.tool');
    expect(tools.map((e) => [e.tool_name, e.tool_count, e.preview])).toEqual([
      ['grep', 1, ''],
      ['sed', 2, ''],
      ['git', 3, ''],
    ]);
  });

  it('a long tool preview is cut to 200 characters', async () => {
    const { events, run } = setup();
    const c = await run({ op: 'tool', name: 'big', args: 'z'.repeat(500) });
    await c.entry();
    const preview = events.find((e) => e.type === 'subagent.tool')?.preview as string;
    expect(preview).toHaveLength(200);
    expect(preview.endsWith('…')).toBe(true);
  });

  it('think and say emit subagent.thinking and subagent.text with the text', async () => {
    const { run, typesOf, events } = setup();
    const c = await run({ op: 'think', text: 'reasoning' }, { op: 'say', text: 'answer' });
    await c.entry();
    expect(typesOf(c.id)).toEqual(['subagent.spawn_requested', 'subagent.start', 'subagent.thinking', 'subagent.text', 'subagent.complete']);
    expect(events.find((e) => e.type === 'subagent.thinking')?.text).toBe('reasoning');
    expect(events.find((e) => e.type === 'subagent.text')?.text).toBe('answer');
  });

  it('a spawn step writes each grandchild entry into the transcript', async () => {
    const { rt, run } = setup({ max_spawn_depth: 2 });
    const c = await run({
      op: 'spawn',
      tasks: [
        { goal: 'g1', agent: { kind: 'scripted', steps: [{ op: 'say', text: 'g1 says hi' }] } },
        { goal: 'g2', agent: { kind: 'scripted', steps: [{ op: 'fail', error: 'g2 broke' }] } },
      ],
    });
    await c.entry();
    const text = rt.tail(c.id).text;
    expect(text).toMatch(/\[child sa_\d+\] completed: g1 says hi/);
    expect(text).toMatch(/\[child sa_\d+\] failed: g2 broke/);
  });

  it('the scripted runner reports its model as "scripted"', async () => {
    expect(scripted([]).model).toBe('scripted');
    const { run } = setup();
    expect((await (await run()).entry()).model).toBe('scripted');
  });

  it('stepSchema accepts the documented steps and refuses malformed ones', () => {
    const good: unknown[] = [
      { op: 'think', text: 't' },
      { op: 'say', text: 's' },
      { op: 'tool', name: 'n', args: { a: 1 }, result: 'r', ms: 5 },
      { op: 'sleep', ms: 0 },
      { op: 'wait_steer' },
      { op: 'wait_steer', timeout_ms: 10 },
      { op: 'spawn', tasks: [{ goal: 'g' }] },
      { op: 'finish' },
      { op: 'finish', summary: 's' },
      { op: 'fail', error: 'e' },
      { op: 'hang' },
    ];
    for (const s of good) expect(stepSchema.safeParse(s).success).toBe(true);
    const bad: unknown[] = [
      { op: 'tool', name: '' },
      { op: 'sleep' },
      { op: 'sleep', ms: 1.5 },
      { op: 'wait_steer', timeout_ms: -1 },
      { op: 'say' },
      { op: 'fail' },
      { op: 'spawn' },
      { op: 'teleport' },
    ];
    for (const s of bad) expect(stepSchema.safeParse(s).success).toBe(false);
  });
});
