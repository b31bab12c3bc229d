// The runner's context on a worker, in process: its time is the injected clock, its batch check
// is the in-process one, and a steer wait ends when the mailbox closes or the child is stopped.
import { describe, expect, it } from 'vitest';
import { ErrorCode, isSubrunError } from '../../src/errors.ts';
import { validateTasks } from '../../src/delegation/delegate.ts';
import { builtinRunnerKinds } from '../../src/delegation/runners/kinds.ts';
import type { Assign } from '../../src/remote/wire.ts';
import { Mailbox } from '../../src/remote/worker/mailbox.ts';
import { WorkerContext } from '../../src/remote/worker/worker-context.ts';
import { flush, ManualClock } from '../helpers/manual-clock.ts';

const assign: Assign = {
  child: 'sa_000000000001',
  epoch: 1,
  goal: 'g',
  agent: { kind: 'scripted' },
  limits: { parent_id: null, depth: 0, can_delegate: true, max_batch: 2 },
};

function rig() {
  const clock = new ManualClock();
  const sent: unknown[] = [];
  const mailbox = new Mailbox({ clock, ask: () => Promise.resolve(undefined) });
  const ctx = new WorkerContext(assign, { clock, send: (ev) => void sent.push(ev), spawn: () => Promise.resolve([]) }, mailbox);
  return { clock, ctx, mailbox, sent };
}

/** The SubrunError `fn` throws. */
function thrown(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (err) {
    if (isSubrunError(err)) return { code: err.code, message: err.message };
    throw err;
  }
  throw new Error('expected a throw');
}

describe('a worker child’s context', () => {
  it('reads and waits on the injected clock', async () => {
    const { clock, ctx } = rig();
    expect(ctx.now()).toBe(clock.now());
    let slept = false;
    void ctx.sleep(1000).then(() => (slept = true));
    await clock.advance(999);
    expect(slept).toBe(false);
    await clock.advance(1);
    expect(slept).toBe(true);
    expect(clock.pendingTimers).toBe(0);
  });

  it('ends a sleep when the child is stopped, leaving no timer', async () => {
    const { clock, ctx } = rig();
    let slept = false;
    void ctx.sleep(60_000).then(() => (slept = true));
    ctx.abort('interrupt');
    await flush();
    expect(slept).toBe(true);
    expect(clock.pendingTimers).toBe(0);
  });

  it('checks a batch as the in-process runtime does', () => {
    const { ctx } = rig();
    const tooMany = [{ goal: 'a' }, { goal: 'b' }, { goal: 'c' }];
    expect(thrown(() => ctx.delegate(tooMany))).toEqual(thrown(() => validateTasks(tooMany, 2, builtinRunnerKinds)));
    expect(thrown(() => ctx.delegate(tooMany)).code).toBe(ErrorCode.TooManyTasks);
    expect(thrown(() => ctx.delegate([])).code).toBe(ErrorCode.TasksRequired);
  });

  it('ends a steer wait when the mailbox closes or the child is stopped', async () => {
    const a = rig();
    let arrived = false;
    void a.ctx.steerArrived().then(() => (arrived = true));
    await flush();
    expect(arrived).toBe(false);
    a.mailbox.close();
    await flush();
    expect(arrived).toBe(true);

    const b = rig();
    let stopped = false;
    void b.ctx.steerArrived().then(() => (stopped = true));
    b.ctx.abort('interrupt');
    await flush();
    expect(stopped).toBe(true);
    expect(b.ctx.takeSteers()).toEqual([]);
  });
});
