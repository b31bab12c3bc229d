// A child adopted after a restart (it runs on elsewhere, e.g. on a remote worker) that waits for a
// slot in its parent's queue and is stopped there: its entry lists the steers it had taken (they
// hold receipts: the run elsewhere may still deliver them) with maybe_delivered, and what its run
// holds elsewhere is let go (the runner's abandon), since no run of it here will ever stop it.
import { describe, expect, it } from 'vitest';
import { createRuntime, type CompletionEntry, type Runner, type StoredChild } from '../../src/index.ts';
import { memoryStore } from '../../src/store/memory.ts';
import { flush } from '../helpers/manual-clock.ts';

const OWNER = { session_id: 'ses_a', transport: 'tr_a', generation: 1 };

function stored(subagent_id: string, task_index: number, steers: StoredChild['steers']): StoredChild {
  return {
    subagent_id,
    parent_id: null,
    depth: 0,
    delegation_id: 'dl_1',
    task_index,
    task_count: 2,
    goal: `goal ${task_index}`,
    context: undefined,
    agent: 'object',
    model: 'elsewhere',
    owner: OWNER,
    timeout_ms: undefined,
    revived_from: undefined,
    status: 'running',
    started_at: 1_000,
    entry: undefined,
    tail: '',
    checkpoint: undefined,
    revived_to: undefined,
    steers,
  };
}

describe('an adopted child stopped while it waits for a slot', () => {
  it('lists its taken steers as maybe_delivered and lets go of its run elsewhere', async () => {
    const running = stored('sa_running', 0, []);
    const waiting = stored('sa_waiting', 1, [
      { steer_id: 'st_taken', seq: 1, text: 'held a receipt', state: 'taken', requeued_from: undefined },
      { steer_id: 'st_queued', seq: 2, text: 'never taken', state: 'queued', requeued_from: undefined },
    ]);
    const abandoned: string[] = [];
    const runner: Runner = {
      model: 'elsewhere',
      run: () => new Promise(() => undefined),
      abandon: (id) => abandoned.push(id),
    };
    const rt = createRuntime({
      max_concurrent_children: 1,
      // The journal lists the unfinished deepest (and latest) first; adoption takes them in reverse.
      store: { ...memoryStore(), unfinished: () => [waiting, running], delegationChildren: () => [running, waiting] },
      adopt: () => ({ runner, restored: () => undefined, delegation: () => undefined, delegations: [] }),
    });
    const entries: CompletionEntry[] = [];
    rt.events.subscribe('subagent.complete', (e) => {
      if (e.type === 'subagent.complete') entries.push(e.entry);
    });
    await flush();
    // One slot: the first adopted child holds it, the second waits in the line.
    expect(rt.scoped.list({ session_id: OWNER.session_id, generation: 1 }).map((s) => [s.subagent_id, s.status])).toEqual([
      ['sa_running', 'running'],
      ['sa_waiting', 'queued'],
    ]);
    expect(rt.scoped.interrupt({ session_id: OWNER.session_id, generation: 1 }, 'sa_waiting').found).toBe(true);
    await flush();
    const entry = entries.find((e) => e.subagent_id === 'sa_waiting');
    expect(entry).toMatchObject({ status: 'interrupted', error: expect.stringMatching(/^interrupted before it was resumed after a restart/) as unknown });
    expect(entry?.missed_steer_detail).toEqual([
      { steer_id: 'st_taken', text: 'held a receipt', maybe_delivered: true },
      { steer_id: 'st_queued', text: 'never taken', maybe_delivered: false },
    ]);
    expect(abandoned).toEqual(['sa_waiting']);
  });
});
