// The kill -9 oracle has teeth: on a small history of a round that a restart settled as
// durability.md says, no check complains; each single thing a broken store could do to that
// history (a second completion, a lost steer, a hole, a child run on after the restart, a wrong
// count) is named by the promise it breaks. Without this, a vacuous oracle would pass too.
import { describe, expect, it } from 'vitest';
import type { WireEvent } from '../helpers/rpc-client.ts';
import * as oracle from './oracle.ts';
import type { Ledger, Task } from './schedule.ts';

const SID = 'ses_a';
const task = (goal: string, steps: Task['agent']['steps']): Task => ({ goal, agent: { kind: 'scripted', steps } });
const TASKS = [task('g0', [{ op: 'hang' }]), task('g1', [{ op: 'wait_steer' }, { op: 'finish', summary: 'g1 done' }])];

function ledger(): Ledger {
  return {
    seed: 1,
    hosts: [],
    sessions: [{ session_id: SID, session_key: 'key', hosts: [0] }],
    createsLost: 0,
    spawns: [{ session_id: SID, host: 0, params: { session_id: SID, tasks: TASKS }, reply: { delegation_id: 'dg_1', subagent_ids: ['sa_0', 'sa_1'] } }],
    steers: [
      { session_id: SID, subagent_id: 'sa_0', text: 'never taken', reply: { status: 'queued', steer_id: 'st_1' } },
      { session_id: SID, subagent_id: 'sa_1', text: 'taken', reply: { status: 'queued', steer_id: 'st_2' } },
      { session_id: SID, subagent_id: 'sa_1', text: 'too late', reply: { status: 'rejected' } },
    ],
    interrupts: [],
    tasks: new Map(TASKS.map((t) => [t.goal, t])),
  };
}

const identity = (i: number) => ({ subagent_id: `sa_${i}`, parent_id: null, depth: 0, delegation_id: 'dg_1', task_index: i, task_count: 2, goal: `g${i}` });
const entry = (i: number, status: string, exit_reason: string, more: Record<string, unknown> = {}) => ({
  ...identity(i),
  status,
  exit_reason,
  summary: '',
  api_calls: 0,
  duration_seconds: 0.1,
  input_tokens: 0,
  output_tokens: 0,
  tool_trace: [],
  ...more,
});
const restartEntry = entry(0, 'error', 'server_restart', {
  error: `${oracle.RESTART_ERROR} (the missed-steer note follows)`,
  missed_steer: 'never taken',
  missed_steer_detail: [{ steer_id: 'st_1', text: 'never taken', maybe_delivered: false }],
});

/** The payloads of a round killed while sa_0 hung with a steer queued, after sa_1 finished. */
const GOOD: Array<[string, Record<string, unknown>]> = [
  ['subagent.spawn_requested', identity(0)],
  ['subagent.spawn_requested', identity(1)],
  ['delegation.dispatched', { delegation_id: 'dg_1', subagent_ids: ['sa_0', 'sa_1'], count: 2 }],
  ['subagent.start', identity(0)],
  ['subagent.start', identity(1)],
  ['subagent.steer.delivered', { ...identity(1), steer_id: 'st_2', text: 'taken' }],
  ['subagent.complete', entry(1, 'completed', 'completed', { summary: 'g1 done' })],
  // The kill; what follows is the restart's settlement.
  ['subagent.complete', restartEntry],
  ['delegation.complete', { delegation_id: 'dg_1', results: [] }],
  ['session.idle', { session_id: SID, generation: 1 }],
];

type Row = [string, Record<string, unknown>] | null;

/** Row i has seq i + 1; a null row is an event the ring lost (a hole). */
function history(rows: readonly Row[]): oracle.History {
  const events: WireEvent[] = rows.flatMap((row, i) => (row ? [{ type: row[0], session_id: SID, seq: i + 1, ts: 1 + i, payload: row[1] }] : []));
  return new Map([[SID, new Map(events.map((e) => [e.seq, e]))]]);
}

/** Every violation the oracle finds in `rows` (and in `recovered`, against this history's settlement). */
function violations(rows: readonly Row[], recovered: unknown = { sessions: 1, children_settled: 1, steers_missed: 1 }): string[] {
  const l = ledger();
  const h = history(rows);
  const v = new oracle.Violations('test');
  oracle.checkSeqs(h, v);
  oracle.checkChildren(l, h, v);
  oracle.checkSteers(l, h, v);
  oracle.checkQuiet(l, h, v);
  oracle.checkDelegationsComplete(l, h, v);
  const settled = oracle.settledByRestart(l, h);
  oracle.checkRecovered('gateway.ready', recovered, { min: 1, max: 1, children: settled.children, steers: settled.steers }, v);
  return v.found;
}

const replace = (at: number, row: Row): Row[] => GOOD.map((r, i) => (i === at ? row : r));
const ALL = [oracle.P1, oracle.P2, oracle.P3, oracle.P4, oracle.P5, oracle.P6, oracle.RECOVERED, oracle.QUIET];
/** The promises the violations name. */
const promises = (found: string[]) => ALL.filter((p) => found.some((f) => f.startsWith(`${p}: `)));

describe('the kill -9 oracle', () => {
  it('finds nothing wrong with a restart that kept every promise', () => {
    expect(violations(GOOD)).toEqual([]);
  });

  it.each([
    ['a second completion of a child', [...GOOD, ['subagent.complete', restartEntry]], oracle.P2],
    ['no completion of a child lost by the kill', GOOD.filter((_, i) => i !== 7), oracle.P2],
    ['a restart completion without its error', replace(7, ['subagent.complete', { ...restartEntry, error: 'gone' }]), oracle.P2],
    ['a hanging child that ended by itself', replace(7, ['subagent.complete', entry(0, 'completed', 'completed')]), oracle.P2],
    ['a queued steer that never ended', replace(7, ['subagent.complete', { ...restartEntry, missed_steer_detail: [] }]), oracle.P3],
    [
      'a delivered steer also missed',
      replace(6, ['subagent.complete', entry(1, 'completed', 'completed', { summary: 'g1 done', missed_steer_detail: [{ steer_id: 'st_2', text: 'taken' }] })]),
      oracle.P3,
    ],
    [
      'a rejected steer that left a trace',
      replace(6, [
        'subagent.complete',
        entry(1, 'completed', 'completed', { summary: 'g1 done', missed_steer_detail: [{ steer_id: 'st_9', text: 'too late' }] }),
      ]),
      oracle.P3,
    ],
    ['a hole in the seqs', replace(4, null), oracle.P4],
    ['a child that ran on after the restart', [...GOOD.slice(0, 8), ['subagent.text', { ...identity(1), text: 'still here' }], ...GOOD.slice(8)], oracle.QUIET],
    ['a delegation that never completed', GOOD.filter((_, i) => i !== 8), oracle.P5],
  ] as Array<[string, Row[], string]>)('names %s', (_what, rows, promise) => {
    expect(promises(violations(rows))).toContain(promise);
  });

  it('holds recovered to what the restart settled', () => {
    expect(promises(violations(GOOD, { sessions: 1, children_settled: 0, steers_missed: 1 }))).toEqual([oracle.RECOVERED]);
    expect(promises(violations(GOOD, { sessions: 2, children_settled: 1, steers_missed: 0 }))).toEqual([oracle.RECOVERED]);
    expect(promises(violations(GOOD, null))).toEqual([oracle.RECOVERED]);
  });
});
