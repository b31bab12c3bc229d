import { describe, expect, it } from 'vitest';
import {
  createRuntime,
  ErrorCode,
  isSubrunError,
  type SubrunError,
  type CompletionEntry,
  type Owner,
  type RunOutcome,
  type Runner,
  type RunnerContext,
  type RuntimeOptions,
  type Step,
  type SteerResult,
  type TaskSpec,
} from '../../src/index.ts';
import { flush } from '../helpers/manual-clock.ts';
import { runtimeHarness } from '../helpers/runtime-harness.ts';

const OWNER: Owner = { session_id: 'sess_1', transport: 'tr_1', generation: 1 };
const OTHER: Owner = { session_id: 'sess_2', transport: 'tr_2', generation: 1 };
const IDENTITY = ['subagent_id', 'parent_id', 'depth', 'delegation_id', 'task_index', 'task_count', 'goal'] as const;

function setup(options: RuntimeOptions = {}) {
  const { clock, rt, events, find } = runtimeHarness(options);
  const running = () => rt.list().filter((s) => s.status === 'running').length;
  const of = (type: string) => events.filter((e) => e.type === type);
  return { clock, rt, events, find, running, of };
}

const task = (goal: string, ...steps: Step[]): TaskSpec => ({ goal, agent: { kind: 'scripted', steps } });
const HANG: Step = { op: 'hang' };

/** The SubrunError `fn` throws (fails the test if it does not throw one). */
function errorOf(fn: () => unknown): SubrunError {
  try {
    fn();
  } catch (err) {
    if (isSubrunError(err)) return err;
    throw err;
  }
  throw new Error('expected a SubrunError, nothing was thrown');
}

/** The steer_id of a `queued` answer (fails the test on any other). */
function idOf(r: SteerResult): string {
  if (r.status !== 'queued') throw new Error(`expected queued, got ${JSON.stringify(r)}`);
  return r.steer_id;
}

/** A runner the test drives by hand; it never looks at its signal. */
function manualRunner(model = 'manual') {
  const state: { ctx?: RunnerContext; resolve?: (o: RunOutcome) => void; reject?: (e: unknown) => void } = {};
  const runner: Runner = {
    model,
    run: (ctx) =>
      new Promise<RunOutcome>((resolve, reject) => {
        state.ctx = ctx;
        state.resolve = resolve;
        state.reject = reject;
      }),
  };
  return { runner, state };
}

describe('validation', () => {
  it('an empty batch is tasks_required', () => {
    const { rt } = setup();
    const err = errorOf(() => rt.delegate([]));
    expect(err.code).toBe(ErrorCode.TasksRequired);
    expect(err.code).toBe('tasks_required');
    expect(err.issues).toEqual([{ path: 'tasks', message: 'must not be empty' }]);
  });

  it.each([
    ['a string', 'do stuff'],
    ['null', null],
    ['undefined', undefined],
    ['an object', { goal: 'x' }],
  ])('a non-array batch (%s) is tasks_required', (_n, value) => {
    const { rt } = setup();
    const err = errorOf(() => rt.delegate(value as unknown as TaskSpec[]));
    expect(err.code).toBe('tasks_required');
    expect(err.issues[0]?.message).toBe('must be an array');
  });

  it.each([
    ['a string', 'goal text'],
    ['null', null],
    ['an array', [{ goal: 'x' }]],
    ['a number', 3],
  ])('a non-object task (%s) is invalid_tasks at tasks.N', (_n, bad) => {
    const { rt } = setup();
    const err = errorOf(() => rt.delegate([{ goal: 'fine' }, bad] as unknown as TaskSpec[]));
    expect(err.code).toBe('invalid_tasks');
    expect(err.issues.map((i) => i.path)).toEqual(['tasks.1']);
  });

  it.each([
    ['empty', ''],
    ['whitespace', '  \n\t '],
  ])('an %s goal is invalid_tasks naming tasks.N.goal', (_n, goal) => {
    const { rt } = setup();
    const err = errorOf(() => rt.delegate([{ goal: 'ok' }, { goal: 'ok too' }, { goal }]));
    expect(err.code).toBe('invalid_tasks');
    expect(err.issues.map((i) => i.path)).toEqual(['tasks.2.goal']);
    expect(err.message).toContain('tasks.2.goal');
  });

  it('a missing or non-string goal is invalid_tasks naming tasks.N.goal', () => {
    const { rt } = setup();
    const err = errorOf(() => rt.delegate([{} as TaskSpec, { goal: 42 } as unknown as TaskSpec]));
    expect(err.code).toBe('invalid_tasks');
    expect(err.issues.map((i) => i.path)).toEqual(['tasks.0.goal', 'tasks.1.goal']);
  });

  it('a batch larger than max_concurrent_children is too_many_tasks, saying so (never a silent cut)', () => {
    const { rt } = setup({ max_concurrent_children: 2 });
    const err = errorOf(() => rt.delegate([{ goal: 'a' }, { goal: 'b' }, { goal: 'c' }]));
    expect(err.code).toBe('too_many_tasks');
    expect(err.message).toContain('too many tasks');
    expect(err.message).toContain('3 given');
    expect(err.message).toContain('at most 2');
    expect(err.message).toContain('max_concurrent_children');
    expect(rt.list({ include_finished: true })).toEqual([]);
  });

  it('a batch of exactly max_concurrent_children is fine', async () => {
    const { rt } = setup({ max_concurrent_children: 2 });
    const h = rt.delegate([{ goal: 'a' }, { goal: 'b' }]);
    expect(h.subagent_ids).toHaveLength(2);
    await h.results;
  });

  it('an unknown agent kind is invalid_tasks at tasks.N.agent.kind, listing the known kinds', () => {
    const { rt } = setup();
    const err = errorOf(() => rt.delegate([{ goal: 'x', agent: { kind: 'gpt-9000' } }]));
    expect(err.code).toBe('invalid_tasks');
    expect(err.issues).toHaveLength(1);
    expect(err.issues[0]?.path).toBe('tasks.0.agent.kind');
    expect(err.issues[0]?.message).toContain('gpt-9000');
    expect(err.issues[0]?.message).toContain('scripted');
  });

  it.each([
    ['a kind that is an inherited property name', { kind: 'toString' }, 'tasks.0.agent.kind'],
    ['an agent that is not an object', 'scripted', 'tasks.0.agent'],
  ])('%s is invalid_tasks', (_n, agent, path) => {
    const { rt } = setup();
    const err = errorOf(() => rt.delegate([{ goal: 'x', agent }]));
    expect(err.code).toBe('invalid_tasks');
    expect(err.issues[0]?.path).toBe(path);
  });

  it.each([
    ['a tool step without a name', { op: 'tool' }, 'tasks.0.agent.steps.1'],
    ['an unknown op', { op: 'dance' }, 'tasks.0.agent.steps.1'],
    ['a negative sleep', { op: 'sleep', ms: -5 }, 'tasks.0.agent.steps.1.ms'],
    ['a fail step without error', { op: 'fail' }, 'tasks.0.agent.steps.1.error'],
  ])('a bad scripted step (%s) is invalid_tasks naming the step', (_n, step, pathPrefix) => {
    const { rt } = setup();
    const err = errorOf(() => rt.delegate([{ goal: 'x', agent: { kind: 'scripted', steps: [{ op: 'say', text: 'ok' }, step] } }]));
    expect(err.code).toBe('invalid_tasks');
    expect(err.issues.length).toBeGreaterThan(0);
    for (const i of err.issues) expect(i.path.startsWith(pathPrefix)).toBe(true);
  });

  it('every bad task in the batch is reported', () => {
    const { rt } = setup();
    const err = errorOf(() => rt.delegate([{ goal: '' }, { goal: 'ok' }, { goal: 'x', agent: { kind: 'nope' } }]));
    expect(err.issues.map((i) => i.path)).toEqual(['tasks.0.goal', 'tasks.2.agent.kind']);
  });

  it.each([0, -1, 1.5, 'soon'])('a bad timeout_ms (%j) is invalid_options', (timeout_ms) => {
    const { rt } = setup();
    const err = errorOf(() => rt.delegate([{ goal: 'x' }], { timeout_ms: timeout_ms as number }));
    expect(err.code).toBe('invalid_options');
  });

  it('a refused batch creates nothing and emits nothing', () => {
    const { rt, events } = setup();
    errorOf(() => rt.delegate([{ goal: 'ok' }, { goal: ' ' }]));
    expect(rt.list({ include_finished: true })).toEqual([]);
    expect(events).toEqual([]);
    expect(rt.liveCount).toBe(0);
  });

  it('bad runtime options are refused at construction', () => {
    expect(errorOf(() => createRuntime({ max_concurrent_children: 0 })).code).toBe('invalid_options');
    expect(errorOf(() => createRuntime({ max_spawn_depth: 1.5 })).code).toBe('invalid_options');
    expect(errorOf(() => createRuntime({ interrupt_grace_ms: -1 })).code).toBe('invalid_options');
    expect(createRuntime({ interrupt_grace_ms: 0, retain_finished: 0 }).limits.interrupt_grace_ms).toBe(0);
  });
});

describe('dispatch and results', () => {
  it('returns at once with the delegation id and one id per task', async () => {
    const { rt, find } = setup();
    let settled = false;
    const h = rt.delegate([task('a', HANG), task('b', HANG)]);
    void h.results.then(() => {
      settled = true;
    });
    expect(h.delegation_id).toBe('dg_1');
    expect(h.subagent_ids).toEqual(['sa_2', 'sa_3']);
    expect(find('sa_2')?.goal).toBe('a');
    expect(find('sa_3')?.goal).toBe('b');
    await flush();
    expect(settled).toBe(false);
    expect(rt.liveCount).toBe(2);
    rt.interrupt('sa_2');
    rt.interrupt('sa_3');
    await h.results;
    expect(settled).toBe(true);
  });

  it('results are ordered by task_index, whatever order the children finish in', async () => {
    const { rt, clock, of } = setup();
    const h = rt.delegate([
      task('slow', { op: 'sleep', ms: 300 }, { op: 'finish', summary: 'slow done' }),
      task('mid', { op: 'sleep', ms: 200 }, { op: 'finish', summary: 'mid done' }),
      task('fast', { op: 'sleep', ms: 100 }, { op: 'finish', summary: 'fast done' }),
    ]);
    await flush();
    await clock.advance(300);
    const results = await h.results;
    expect(results.map((e) => e.task_index)).toEqual([0, 1, 2]);
    expect(results.map((e) => e.subagent_id)).toEqual(h.subagent_ids);
    expect(results.map((e) => e.summary)).toEqual(['slow done', 'mid done', 'fast done']);
    // ...although they completed in reverse.
    expect(of('subagent.complete').map((e) => e.goal)).toEqual(['fast', 'mid', 'slow']);
    expect(results.map((e) => e.duration_seconds)).toEqual([0.3, 0.2, 0.1]);
  });

  it('a task without runner or agent uses the default runner', async () => {
    const { runner, state } = manualRunner('default-model');
    const { rt } = setup({ default_runner: runner });
    const h = rt.delegate([{ goal: 'plain', context: 'some context' }]);
    await flush();
    expect(state.ctx?.goal).toBe('plain');
    expect(state.ctx?.context).toBe('some context');
    state.resolve?.({ status: 'completed', summary: 'via default' });
    const [entry] = await h.results;
    expect(entry).toMatchObject({ status: 'completed', summary: 'via default', model: 'default-model' });
  });

  it('a runner object in the task wins over agent', async () => {
    const { runner, state } = manualRunner('explicit');
    const { rt } = setup();
    const h = rt.delegate([{ goal: 'x', runner, agent: { kind: 'scripted', steps: [] } }]);
    await flush();
    state.resolve?.({ status: 'completed', summary: 'explicit runner ran', api_calls: 3, tokens: { input: 5, output: 7 } });
    const [entry] = await h.results;
    expect(entry).toMatchObject({ model: 'explicit', summary: 'explicit runner ran', api_calls: 3, tokens: { input: 5, output: 7 } });
  });

  it('delegation.dispatched comes first, delegation.complete after every child entry, with the results', async () => {
    const { rt, events } = setup();
    const h = rt.delegate([task('a', { op: 'say', text: 'A' }), task('b', { op: 'say', text: 'B' })]);
    const results = await h.results;
    await flush();
    const dispatched = events.filter((e) => e.type === 'delegation.dispatched');
    expect(dispatched).toHaveLength(1);
    expect(dispatched[0]).toMatchObject({ delegation_id: h.delegation_id, subagent_ids: h.subagent_ids, count: 2, src: h.delegation_id });
    const types = events.map((e) => e.type);
    const iDispatched = types.indexOf('delegation.dispatched');
    const iComplete = types.indexOf('delegation.complete');
    expect(types.filter((t) => t === 'subagent.spawn_requested')).toHaveLength(2);
    expect(types.lastIndexOf('subagent.spawn_requested')).toBeLessThan(iDispatched);
    expect(types.indexOf('subagent.start')).toBeGreaterThan(iDispatched);
    expect(iComplete).toBe(types.length - 1);
    expect(types.lastIndexOf('subagent.complete')).toBeLessThan(iComplete);
    const complete = events[iComplete]!;
    expect(complete).toMatchObject({ delegation_id: h.delegation_id, src: h.delegation_id });
    expect(complete.results).toEqual(results);
  });

  it('every subagent.* event carries the identity fields of the child it is about', async () => {
    const { rt, events } = setup({ max_spawn_depth: 2 });
    const h = rt.delegate([
      task(
        'parent-0',
        { op: 'think', text: 'plan' },
        { op: 'tool', name: 'search', args: { q: 'x' } },
        { op: 'spawn', tasks: [{ goal: 'grandchild', agent: { kind: 'scripted', steps: [{ op: 'say', text: 'gc' }] } }] },
        { op: 'say', text: 'done' },
      ),
      task('sibling-1', { op: 'wait_steer' }),
    ]);
    await flush();
    rt.steer(h.subagent_ids[1]!, 'go on');
    await h.results;
    await flush();
    const snaps = new Map(rt.list({ include_finished: true }).map((s) => [s.subagent_id, s]));
    const sub = events.filter((e) => e.type.startsWith('subagent.'));
    const types = new Set<string>(sub.map((e) => e.type));
    for (const t of [
      'subagent.spawn_requested',
      'subagent.start',
      'subagent.thinking',
      'subagent.tool',
      'subagent.text',
      'subagent.steer.delivered',
      'subagent.complete',
    ]) {
      expect(types.has(t)).toBe(true);
    }
    const gc = [...snaps.values()].find((s) => s.goal === 'grandchild')!;
    const expectedIdentity = (id: string) => {
      const s = snaps.get(id)!;
      const isGc = id === gc.subagent_id;
      return {
        subagent_id: id,
        parent_id: s.parent_id,
        depth: s.depth,
        delegation_id: s.delegation_id,
        task_index: isGc ? 0 : h.subagent_ids.indexOf(id),
        task_count: isGc ? 1 : 2,
        goal: s.goal,
      };
    };
    for (const e of sub) {
      for (const k of IDENTITY) expect(k in e).toBe(true);
      const picked = Object.fromEntries(IDENTITY.map((k) => [k, e[k]]));
      expect(picked).toEqual(expectedIdentity(e.subagent_id as string));
      expect(e.src).toBe(e.subagent_id);
    }
    expect(gc.parent_id).toBe(h.subagent_ids[0]);
    expect(gc.depth).toBe(1);
    expect(gc.delegation_id).not.toBe(h.delegation_id);
    expect(sub.filter((e) => e.subagent_id === gc.subagent_id).map((e) => e.type)).toEqual([
      'subagent.spawn_requested',
      'subagent.start',
      'subagent.text',
      'subagent.complete',
    ]);
    const tool = sub.find((e) => e.type === 'subagent.tool')!;
    expect(tool).toMatchObject({ tool_name: 'search', preview: '{"q":"x"}', tool_count: 1 });
    const done = sub.filter((e) => e.type === 'subagent.complete');
    for (const e of done) expect((e.entry as CompletionEntry).subagent_id).toBe(e.subagent_id);
  });
});

describe('concurrency', () => {
  it('at most max_concurrent_children run at once per parent; the rest wait as queued', async () => {
    const { rt, clock, running, of, events } = setup({ max_concurrent_children: 2 });
    const d1 = rt.delegate([task('a', { op: 'tool', name: 'w', ms: 100 }), task('b', { op: 'tool', name: 'w', ms: 300 })]);
    const d2 = rt.delegate([task('c', { op: 'tool', name: 'w', ms: 100 }), task('d', { op: 'tool', name: 'w', ms: 100 })]);
    await flush();
    const statusOf = () => Object.fromEntries(rt.list({ include_finished: true }).map((s) => [s.goal, s.status]));
    expect(statusOf()).toEqual({ a: 'running', b: 'running', c: 'queued', d: 'queued' });
    let max = running();
    for (let t = 0; t < 8; t++) {
      await clock.advance(50);
      max = Math.max(max, running());
      expect(running()).toBeLessThanOrEqual(2);
    }
    expect(max).toBe(2);
    await Promise.all([d1.results, d2.results]);
    expect(statusOf()).toEqual({ a: 'completed', b: 'completed', c: 'completed', d: 'completed' });
    // Replay the recorded starts and completes in emission order: the running count never exceeds the cap.
    let live = 0;
    let peak = 0;
    for (const e of events) {
      if (e.type === 'subagent.start') peak = Math.max(peak, ++live);
      if (e.type === 'subagent.complete') live--;
    }
    expect(peak).toBe(2);
    expect(live).toBe(0);
    expect(of('subagent.start').map((e) => e.goal)).toEqual(['a', 'b', 'c', 'd']);
  });

  it('a waiting parent holds no slot its children need (cap 1, nested spawn does not deadlock)', async () => {
    const { rt } = setup({ max_concurrent_children: 1, max_spawn_depth: 2 });
    const h = rt.delegate([
      task(
        'parent',
        { op: 'spawn', tasks: [{ goal: 'child', agent: { kind: 'scripted', steps: [{ op: 'say', text: 'child ran' }] } }] },
        { op: 'say', text: 'parent done' },
      ),
    ]);
    const [entry] = await h.results;
    expect(entry).toMatchObject({ status: 'completed', summary: 'parent done' });
    expect(rt.tail(h.subagent_ids[0]!).text).toMatch(/\[child sa_\d+\] completed: child ran/);
  });

  it('sessions have separate queues', async () => {
    const { rt } = setup({ max_concurrent_children: 1 });
    rt.delegate([task('a', HANG)], { owner: OWNER });
    rt.delegate([task('b', HANG)], { owner: OTHER });
    rt.delegate([task('c', HANG)], { owner: OWNER });
    await flush();
    expect(Object.fromEntries(rt.list().map((s) => [s.goal, s.status]))).toEqual({ a: 'running', b: 'running', c: 'queued' });
    await rt.shutdown();
  });
});

describe('depth limit', () => {
  it('default 1: a spawn step is refused, the transcript says why, and the child goes on', async () => {
    const { rt, of } = setup();
    const h = rt.delegate([
      task('leaf', { op: 'spawn', tasks: [{ goal: 'too deep' }] }, { op: 'say', text: 'carried on' }, { op: 'finish', summary: 'done anyway' }),
    ]);
    const [entry] = await h.results;
    expect(entry).toMatchObject({ status: 'completed', summary: 'done anyway' });
    const text = rt.tail(h.subagent_ids[0]!).text;
    expect(text).toContain('[spawn refused] spawn depth limit reached');
    expect(text).toContain('max_spawn_depth is 1');
    expect(text.indexOf('[spawn refused]')).toBeLessThan(text.indexOf('[text] carried on'));
    expect(of('subagent.spawn_requested')).toHaveLength(1);
    expect(rt.list({ include_finished: true })).toHaveLength(1);
  });

  it('a runner calling ctx.delegate past the limit gets depth_exceeded', async () => {
    const { runner, state } = manualRunner();
    const { rt } = setup();
    const h = rt.delegate([{ goal: 'x', runner }]);
    await flush();
    const err = errorOf(() => state.ctx!.delegate([{ goal: 'y' }]));
    expect(err.code).toBe(ErrorCode.DepthExceeded);
    state.resolve?.({ status: 'completed' });
    await h.results;
  });

  it('max_spawn_depth 2 allows exactly one more level', async () => {
    const { rt } = setup({ max_spawn_depth: 2 });
    const grandchildSpawn: Step = { op: 'spawn', tasks: [{ goal: 'great-grandchild' }] };
    const h = rt.delegate([
      task('child', {
        op: 'spawn',
        tasks: [{ goal: 'grandchild', agent: { kind: 'scripted', steps: [grandchildSpawn, { op: 'say', text: 'gc went on' }] } }],
      }),
    ]);
    await h.results;
    const all = rt.list({ include_finished: true });
    expect(all.map((s) => [s.goal, s.depth, s.status]).sort()).toEqual([
      ['child', 0, 'completed'],
      ['grandchild', 1, 'completed'],
    ]);
    const gc = all.find((s) => s.goal === 'grandchild')!;
    expect(gc.parent_id).toBe(h.subagent_ids[0]);
    const gcText = rt.tail(gc.subagent_id).text;
    expect(gcText).toContain('[spawn refused] spawn depth limit reached: this subagent is at depth 1 and max_spawn_depth is 2');
    expect(gcText).toContain('[text] gc went on');
  });
});

describe('timeouts', () => {
  it('a child still running at timeout_ms ends with status timeout', async () => {
    const { rt, clock, find } = setup();
    const h = rt.delegate([task('slow', { op: 'say', text: 'partial' }, HANG)], { timeout_ms: 1000 });
    const id = h.subagent_ids[0]!;
    await flush();
    await clock.advance(999);
    expect(find(id)?.status).toBe('running');
    await clock.advance(1);
    const [entry] = await h.results;
    expect(entry).toMatchObject({ status: 'timeout', error: 'timed out after 1000 ms', summary: 'partial', duration_seconds: 1 });
  });

  it('the timeout counts from when the child starts running, not from when it was queued', async () => {
    const { rt, clock, find } = setup({ max_concurrent_children: 1 });
    const first = rt.delegate([task('first', { op: 'sleep', ms: 500 })]);
    const second = rt.delegate([task('second', HANG)], { timeout_ms: 1000 });
    const id = second.subagent_ids[0]!;
    await flush();
    await clock.advance(500);
    await first.results;
    expect(find(id)?.status).toBe('running');
    await clock.advance(999);
    expect(find(id)?.status).toBe('running');
    await clock.advance(1);
    const [entry] = await second.results;
    expect(entry?.status).toBe('timeout');
  });

  it('a child that finishes before its timeout is completed and leaves no timer behind', async () => {
    const { rt, clock } = setup();
    const h = rt.delegate([task('quick', { op: 'sleep', ms: 10 }, { op: 'finish', summary: 'in time' })], { timeout_ms: 1000 });
    await flush();
    await clock.advance(10);
    const [entry] = await h.results;
    expect(entry?.status).toBe('completed');
    expect(clock.pendingTimers).toBe(0);
  });

  it('a runner ignoring its signal past a timeout is abandoned after the grace and still reports timeout', async () => {
    const { runner } = manualRunner();
    const { rt, clock, find } = setup({ interrupt_grace_ms: 200 });
    const h = rt.delegate([{ goal: 'stubborn', runner }], { timeout_ms: 100 });
    const id = h.subagent_ids[0]!;
    await flush();
    await clock.advance(100);
    await clock.advance(199);
    expect(find(id)?.status).toBe('running');
    await clock.advance(1);
    const [entry] = await h.results;
    expect(entry?.status).toBe('timeout');
  });
});

describe('runner outcomes', () => {
  it('an async throw becomes status error with the message', async () => {
    const { rt } = setup();
    const boom: Runner = {
      model: 'boom',
      run: async (ctx) => {
        ctx.text('got this far');
        throw new Error('kaput');
      },
    };
    const [entry] = await rt.delegate([{ goal: 'x', runner: boom }]).results;
    expect(entry).toMatchObject({ status: 'error', error: 'kaput', summary: 'got this far', model: 'boom' });
  });

  it('a synchronous throw from run() becomes status error', async () => {
    const { rt } = setup();
    const boom: Runner = {
      model: 'sync-boom',
      run: () => {
        throw new TypeError('sync kaput');
      },
    };
    const [entry] = await rt.delegate([{ goal: 'x', runner: boom }]).results;
    expect(entry).toMatchObject({ status: 'error', error: 'sync kaput' });
  });

  it('an invalid outcome becomes status error', async () => {
    const { rt } = setup();
    const weird: Runner = { model: 'weird', run: async () => ({ status: 'great' }) as unknown as RunOutcome };
    const [entry] = await rt.delegate([{ goal: 'x', runner: weird }]).results;
    expect(entry?.status).toBe('error');
    expect(entry?.error).toContain('invalid outcome');
  });

  it('a runner reporting failed gives status failed with its error and exit_reason', async () => {
    const { rt } = setup();
    const r: Runner = {
      model: 'm',
      run: async () => ({ status: 'failed', error: 'could not find the file', exit_reason: 'max_iterations', summary: 'tried' }),
    };
    const [entry] = await rt.delegate([{ goal: 'x', runner: r }]).results;
    expect(entry).toMatchObject({ status: 'failed', error: 'could not find the file', exit_reason: 'max_iterations', summary: 'tried' });
  });

  it('a runner reporting interrupted without being stopped is failed, never completed', async () => {
    const { rt } = setup();
    const r: Runner = { model: 'm', run: async () => ({ status: 'interrupted' }) };
    const [entry] = await rt.delegate([{ goal: 'x', runner: r }]).results;
    expect(entry?.status).toBe('failed');
  });

  it('an interrupted child keeps its last say as summary', async () => {
    const { rt } = setup();
    const h = rt.delegate([task('t', { op: 'say', text: 'first thought' }, { op: 'say', text: 'best answer so far' }, HANG)]);
    await flush();
    rt.interrupt(h.subagent_ids[0]!);
    const [entry] = await h.results;
    expect(entry).toMatchObject({ status: 'interrupted', summary: 'best answer so far', error: 'interrupted' });
  });

  it('an interrupted custom runner that returns no summary keeps its last ctx.text', async () => {
    const { rt } = setup();
    const r: Runner = {
      model: 'm',
      run: async (ctx) => {
        ctx.text('streamed answer');
        await ctx.sleep(1_000_000);
        return { status: 'interrupted' };
      },
    };
    const h = rt.delegate([{ goal: 'x', runner: r }]);
    await flush();
    rt.interrupt(h.subagent_ids[0]!);
    const [entry] = await h.results;
    expect(entry).toMatchObject({ status: 'interrupted', summary: 'streamed answer' });
  });

  it('a runner that ignores its signal is abandoned after interrupt_grace_ms; its late effects are ignored', async () => {
    const { runner, state } = manualRunner('stubborn');
    const { rt, clock, find, events } = setup({ interrupt_grace_ms: 5000, max_spawn_depth: 2 });
    const h = rt.delegate([{ goal: 'stubborn', runner }]);
    const id = h.subagent_ids[0]!;
    await flush();
    state.ctx!.text('last words');
    state.ctx!.startTool('before').finish('ok');
    expect(rt.interrupt(id).found).toBe(true);
    expect(state.ctx!.signal.aborted).toBe(true);
    await clock.advance(4999);
    expect(find(id)?.status).toBe('running');
    await clock.advance(1);
    const [entry] = await h.results;
    expect(entry).toMatchObject({ status: 'interrupted', summary: 'last words', tool_trace: [{ tool: 'before', status: 'ok' }] });

    const tailBefore = rt.tail(id);
    const eventsBefore = events.length;
    const ctx = state.ctx!;
    ctx.text('late text');
    ctx.thinking('late thought');
    ctx.write('late write');
    const late = ctx.startTool('late_tool');
    late.finish('late result');
    expect(ctx.deliverSteers()).toEqual([]);
    expect(ctx.takeSteers()).toEqual([]);
    expect(errorOf(() => ctx.delegate([{ goal: 'orphan' }])).code).toBe(ErrorCode.RuntimeClosed);
    state.resolve?.({ status: 'completed', summary: 'too late' });
    await flush();
    expect(rt.tail(id)).toEqual(tailBefore);
    expect(events.length).toBe(eventsBefore);
    expect(find(id)).toMatchObject({ status: 'interrupted', tool_count: 1, last_tool: 'before' });
    expect(rt.list({ include_finished: true })).toHaveLength(1);
  });

  it('a runner that finished normally cannot delegate afterwards (no orphan after its entry)', async () => {
    const { runner, state } = manualRunner();
    const { rt, events } = setup({ max_spawn_depth: 2 });
    const h = rt.delegate([{ goal: 'done early', runner }]);
    await flush();
    state.resolve?.({ status: 'completed', summary: 'fine' });
    await h.results;
    await flush();
    const n = events.length;
    expect(errorOf(() => state.ctx!.delegate([{ goal: 'late child' }])).code).toBe(ErrorCode.RuntimeClosed);
    await flush();
    expect(events.length).toBe(n);
    expect(rt.liveCount).toBe(0);
  });

  it("an abandoned runner's taken, unconfirmed steers are missed with maybe_delivered; queued ones without", async () => {
    // The runner ignores its stop: a steer it took into a model request may still reach the model.
    const { runner, state } = manualRunner('stubborn');
    const { rt, clock } = setup({ interrupt_grace_ms: 100 });
    const h = rt.delegate([{ goal: 'stubborn', runner }]);
    const id = h.subagent_ids[0]!;
    await flush();
    const first = rt.steer(id, 'taken into a request');
    const second = rt.steer(id, 'also taken, then confirmed');
    const taken = state.ctx!.takeSteers();
    expect(taken.map((s) => s.text)).toEqual(['taken into a request', 'also taken, then confirmed']);
    state.ctx!.confirmDelivered(taken.slice(1));
    const third = rt.steer(id, 'still queued');
    rt.interrupt(id);
    await clock.advance(100);
    const [entry] = await h.results;
    expect(entry?.status).toBe('interrupted');
    expect(entry?.missed_steer).toBe('taken into a request\nstill queued');
    expect(entry?.missed_steer_detail).toEqual([
      { steer_id: idOf(first), text: 'taken into a request', maybe_delivered: true },
      { steer_id: idOf(third), text: 'still queued', maybe_delivered: false },
    ]);
    expect(second.status).toBe('queued');
  });

  it('a runner that returns with a steer taken and unconfirmed: missed without maybe_delivered (a runner that returns confirms what it delivered)', async () => {
    const { runner, state } = manualRunner();
    const { rt } = setup();
    const h = rt.delegate([{ goal: 'returns', runner }]);
    const id = h.subagent_ids[0]!;
    await flush();
    const s = rt.steer(id, 'taken, request failed');
    state.ctx!.takeSteers();
    state.resolve?.({ status: 'failed', error: 'model request failed' });
    const [entry] = await h.results;
    expect(entry?.missed_steer_detail).toEqual([{ steer_id: idOf(s), text: 'taken, request failed', maybe_delivered: false }]);
  });

  it('with interrupt_grace_ms 0 a stubborn runner is abandoned on the next clock turn', async () => {
    const { runner } = manualRunner();
    const { rt, clock } = setup({ interrupt_grace_ms: 0 });
    const h = rt.delegate([{ goal: 'x', runner }]);
    await flush();
    rt.interrupt(h.subagent_ids[0]!);
    await clock.advance(0);
    const [entry] = await h.results;
    expect(entry?.status).toBe('interrupted');
  });
});

describe('stopped parents', () => {
  it('a child spawned under an interrupted parent starts stopped and never runs', async () => {
    const { rt, events, clock } = setup({ max_spawn_depth: 2, interrupt_grace_ms: 1000 });
    let childEntry: CompletionEntry | undefined;
    const parent: Runner = {
      model: 'late-spawner',
      run: async (ctx) => {
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
        // Already stopping, and delegating anyway.
        const h = ctx.delegate([{ goal: 'born stopped', agent: { kind: 'scripted', steps: [{ op: 'say', text: 'must not run' }] } }]);
        [childEntry] = await h.results;
        return { status: 'interrupted' };
      },
    };
    const h = rt.delegate([{ goal: 'parent', runner: parent }]);
    await flush();
    rt.interrupt(h.subagent_ids[0]!);
    await flush();
    const [entry] = await h.results;
    expect(entry?.status).toBe('interrupted');
    expect(childEntry).toMatchObject({ status: 'interrupted', error: 'interrupted before it started', duration_seconds: 0 });
    const child = rt.list({ include_finished: true }).find((s) => s.goal === 'born stopped')!;
    expect(child.started_at).toBeNull();
    expect(events.some((e) => e.type === 'subagent.start' && e.subagent_id === child.subagent_id)).toBe(false);
    expect(events.some((e) => e.type === 'subagent.text')).toBe(false);
    // Post-order: the child's entry before the parent's.
    const completes = events.filter((e) => e.type === 'subagent.complete').map((e) => e.subagent_id);
    expect(completes).toEqual([child.subagent_id, h.subagent_ids[0]]);
    expect(clock.pendingTimers).toBe(0);
  });

  it('a finishing parent stops children it did not wait for, and its entry comes after theirs', async () => {
    const { rt, events } = setup({ max_spawn_depth: 2 });
    const parent: Runner = {
      model: 'fire-and-forget',
      run: async (ctx) => {
        ctx.delegate([{ goal: 'forgotten', agent: { kind: 'scripted', steps: [HANG] } }]);
        return { status: 'completed', summary: 'left early' };
      },
    };
    const h = rt.delegate([{ goal: 'parent', runner: parent }]);
    const [entry] = await h.results;
    expect(entry?.status).toBe('completed');
    const forgotten = rt.list({ include_finished: true }).find((s) => s.goal === 'forgotten')!;
    expect(forgotten.status).toBe('interrupted');
    const completes = events.filter((e) => e.type === 'subagent.complete').map((e) => e.subagent_id);
    expect(completes).toEqual([forgotten.subagent_id, h.subagent_ids[0]]);
    expect(rt.liveCount).toBe(0);
  });
});

describe('pause', () => {
  it('setPaused blocks spawn for that session only (spawn_paused), and unpausing restores it', async () => {
    const { rt } = setup();
    rt.setPaused('sess_1', true);
    expect(rt.isPaused('sess_1')).toBe(true);
    expect(rt.isPaused('sess_2')).toBe(false);
    const err = errorOf(() => rt.delegate([{ goal: 'x' }], { owner: OWNER }));
    expect(err.code).toBe(ErrorCode.SpawnPaused);
    expect(err.message).toBe('spawning is paused');
    expect(rt.list({ include_finished: true })).toEqual([]);
    // Another session and in-process callers are untouched.
    await rt.delegate([{ goal: 'other' }], { owner: OTHER }).results;
    await rt.delegate([{ goal: 'local' }]).results;
    rt.setPaused('sess_1', false);
    expect(rt.isPaused('sess_1')).toBe(false);
    const [entry] = await rt.delegate([{ goal: 'x' }], { owner: OWNER }).results;
    expect(entry?.status).toBe('completed');
  });

  it('a nested spawn step fails while its session is paused; running children go on', async () => {
    const { rt, of } = setup({ max_spawn_depth: 2 });
    const h = rt.delegate([task('nester', { op: 'wait_steer' }, { op: 'spawn', tasks: [{ goal: 'nested' }] }, { op: 'say', text: 'went on' })], {
      owner: OWNER,
    });
    await flush();
    rt.setPaused('sess_1', true);
    rt.steer(h.subagent_ids[0]!, 'now spawn');
    const [entry] = await h.results;
    expect(entry).toMatchObject({ status: 'completed', summary: 'went on' });
    expect(rt.tail(h.subagent_ids[0]!).text).toContain('[spawn refused] spawning is paused');
    expect(of('subagent.spawn_requested')).toHaveLength(1);
  });
});

describe('the runner context', () => {
  it('ctx.signal read before a stop aborts with the reason; read only after the stop it comes already aborted', async () => {
    const { rt } = setup();
    const early = manualRunner();
    const late = manualRunner();
    const h = rt.delegate(
      [
        { goal: 'reads its signal first', runner: early.runner },
        { goal: 'reads it only after', runner: late.runner },
      ],
      { owner: OWNER },
    );
    await flush();
    const before = early.state.ctx?.signal as AbortSignal;
    expect(before.aborted).toBe(false);
    for (const id of h.subagent_ids) expect(rt.interrupt(id).found).toBe(true);
    expect(before.aborted).toBe(true);
    expect(before.reason).toBe('interrupt');
    const after = late.state.ctx?.signal as AbortSignal;
    expect(after.aborted).toBe(true);
    expect(after.reason).toBe('interrupt');
    early.state.resolve?.({ status: 'interrupted' });
    late.state.resolve?.({ status: 'interrupted' });
    expect((await h.results).map((e) => e.status)).toEqual(['interrupted', 'interrupted']);
  });

  it('ctx.sleep and ctx.steerArrived take any signal-like cancel (aborted + addEventListener), not only an AbortSignal of this realm', async () => {
    const { rt } = setup();
    const m = manualRunner();
    const h = rt.delegate([{ goal: 'waits on a polyfilled signal', runner: m.runner }], { owner: OWNER });
    await flush();
    const ctx = m.state.ctx as RunnerContext;
    const polyfill = Object.assign(new EventTarget(), { aborted: false }) as unknown as AbortSignal;
    let slept = false;
    let arrived = false;
    void ctx.sleep(60_000, polyfill).then(() => (slept = true));
    void ctx.steerArrived(polyfill).then(() => (arrived = true));
    await flush();
    expect([slept, arrived]).toEqual([false, false]);
    (polyfill as unknown as { aborted: boolean }).aborted = true;
    (polyfill as unknown as EventTarget).dispatchEvent(new Event('abort'));
    await flush();
    expect([slept, arrived]).toEqual([true, true]);
    m.state.resolve?.({ status: 'completed', summary: 'ok' });
    await h.results;
  });

  it('its functions are methods of one object per child: called on the context they work, each child its own', async () => {
    const { rt } = setup();
    const a = manualRunner();
    const b = manualRunner();
    const h = rt.delegate(
      [
        { goal: 'a', runner: a.runner },
        { goal: 'b', runner: b.runner },
      ],
      { owner: OWNER },
    );
    await flush();
    const [ca, cb] = [a.state.ctx as RunnerContext, b.state.ctx as RunnerContext];
    expect(ca).not.toBe(cb);
    expect(ca.write).toBe(cb.write);
    ca.write('from a');
    cb.text('from b');
    expect(rt.tail(h.subagent_ids[0] as string).text).toContain('from a');
    expect(rt.tail(h.subagent_ids[0] as string).text).not.toContain('from b');
    expect(rt.tail(h.subagent_ids[1] as string).text).toContain('[text] from b');
    expect([ca.subagent_id, ca.goal, cb.subagent_id, cb.goal]).toEqual([h.subagent_ids[0], 'a', h.subagent_ids[1], 'b']);
    a.state.resolve?.({ status: 'completed', summary: 'a' });
    b.state.resolve?.({ status: 'completed', summary: 'b' });
    await h.results;
  });
});

describe('faults of the runtime itself', () => {
  it('a test seam that throws after the seal still gives the child its one entry (error) and frees its slot for the next', async () => {
    const { rt } = setup({
      max_concurrent_children: 1,
      checkpoint: (label) => (label === 'complete' ? Promise.reject(new Error('seam broke')) : Promise.resolve()),
    });
    const first = rt.delegate([task('faulted', { op: 'say', text: 'hi' }, { op: 'finish', summary: 'done' })], { owner: OWNER });
    const second = rt.delegate([task('waits for the slot', { op: 'finish', summary: 'ran' })], { owner: OWNER });
    const [entry] = await first.results;
    expect(entry).toMatchObject({ status: 'error', error: 'internal error: seam broke' });
    // The next child got the slot, and met the same broken seam: the queue moved on regardless.
    const [next] = await second.results;
    expect(next).toMatchObject({ status: 'error', error: 'internal error: seam broke' });
    expect(rt.list()).toEqual([]);
  });
});
