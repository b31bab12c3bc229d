import { describe, expect, it } from 'vitest';
import { buildCompletionEntry, type EntryInput } from '../../src/delegation/completion.ts';
import { FINAL_STATUSES, type FinalStatus } from '../../src/types.ts';

const base = {
  task_index: 2,
  subagent_id: 'sa_7',
  duration_seconds: 1.5,
  model: 'scripted',
} as const;

const input = (over: Partial<EntryInput> & { status: FinalStatus }): EntryInput => ({ ...base, ...over });

const COMPLETED_NOTE = (t: string) => `[steer did not land — the subagent finished before it could be delivered: ${t}]`;
const STOPPED_NOTE = (t: string) => `[steer did not land before the subagent stopped: ${t}]`;

describe('buildCompletionEntry: status rows', () => {
  it('completed: summary kept, no error key, exit_reason defaults to the status', () => {
    const e = buildCompletionEntry(input({ status: 'completed', summary: 'all done' }));
    expect(e).toEqual({
      task_index: 2,
      subagent_id: 'sa_7',
      status: 'completed',
      exit_reason: 'completed',
      summary: 'all done',
      api_calls: 0,
      duration_seconds: 1.5,
      model: 'scripted',
      tokens: { input: 0, output: 0 },
      tool_trace: [],
    });
    expect('error' in e).toBe(false);
    expect('missed_steer' in e).toBe(false);
  });

  it('completed ignores an error passed in', () => {
    const e = buildCompletionEntry(input({ status: 'completed', summary: 's', error: 'should vanish' }));
    expect('error' in e).toBe(false);
  });

  it.each([
    ['interrupted', 'interrupted'],
    ['failed', 'the subagent failed'],
    ['error', 'the runner crashed'],
    ['timeout', 'timed out'],
  ] as const)('%s without an error gets the default error %j', (status, defaultError) => {
    const e = buildCompletionEntry(input({ status }));
    expect(e.status).toBe(status);
    expect(e.exit_reason).toBe(status);
    expect(e.error).toBe(defaultError);
    expect(e.summary).toBe('');
  });

  it.each(['interrupted', 'failed', 'error', 'timeout'] as const)('%s keeps the given error and summary', (status) => {
    const e = buildCompletionEntry(input({ status, error: 'boom', summary: 'partial' }));
    expect(e.error).toBe('boom');
    expect(e.summary).toBe('partial');
  });

  it('passes exit_reason, api_calls, tokens and tool_trace through (trace items copied, only tool/status)', () => {
    const trace = [
      { tool: 'read', status: 'ok' as const, extra: 'x' },
      { tool: 'write', status: 'error' as const },
    ];
    const e = buildCompletionEntry(
      input({ status: 'failed', exit_reason: 'max_iterations', api_calls: 4, tokens: { input: 10, output: 20 }, tool_trace: trace }),
    );
    expect(e.exit_reason).toBe('max_iterations');
    expect(e.api_calls).toBe(4);
    expect(e.tokens).toEqual({ input: 10, output: 20 });
    expect(e.tool_trace).toEqual([
      { tool: 'read', status: 'ok' },
      { tool: 'write', status: 'error' },
    ]);
    expect(e.tool_trace[0]).not.toBe(trace[0]);
  });

  it('clamps a negative duration to 0', () => {
    expect(buildCompletionEntry(input({ status: 'completed', duration_seconds: -3 })).duration_seconds).toBe(0);
  });

  it('an empty missed list adds nothing', () => {
    const e = buildCompletionEntry(input({ status: 'completed', summary: 'ok', missed: [] }));
    expect(e.summary).toBe('ok');
    expect('missed_steer' in e).toBe(false);
  });
});

describe('buildCompletionEntry: missed_steer notes (protocol section 5)', () => {
  it('completed: summary gains a blank line and the note; no error', () => {
    const e = buildCompletionEntry(input({ status: 'completed', summary: 'the answer', missed: ['look at b.ts'] }));
    expect(e.summary).toBe(`the answer\n\n${COMPLETED_NOTE('look at b.ts')}`);
    expect(e.missed_steer).toBe('look at b.ts');
    expect('error' in e).toBe(false);
    expect(e.status).toBe('completed');
  });

  it('completed with an empty summary: the summary is the note alone', () => {
    const e = buildCompletionEntry(input({ status: 'completed', missed: ['hurry'] }));
    expect(e.summary).toBe(COMPLETED_NOTE('hurry'));
  });

  it.each(FINAL_STATUSES.filter((s) => s !== 'completed'))('%s: error gains one space and the note; summary untouched', (status) => {
    const e = buildCompletionEntry(input({ status, error: 'stopped by host', summary: 'partial', missed: ['stop now'] }));
    expect(e.error).toBe(`stopped by host ${STOPPED_NOTE('stop now')}`);
    expect(e.summary).toBe('partial');
    expect(e.missed_steer).toBe('stop now');
    expect(e.status).toBe(status);
  });

  it.each(FINAL_STATUSES.filter((s) => s !== 'completed'))('%s without an error: the note follows the default error', (status) => {
    const e = buildCompletionEntry(input({ status, missed: ['x'] }));
    expect(e.error).toMatch(/^\S.* \[steer did not land before the subagent stopped: x\]$/);
  });

  it('an empty-string error gets the note with no leading space', () => {
    const e = buildCompletionEntry(input({ status: 'failed', error: '', missed: ['m'] }));
    expect(e.error).toBe(STOPPED_NOTE('m'));
  });

  it('multiple missed steers are joined by "\\n" in the given (acceptance) order', () => {
    const missed = ['first', 'second', 'third'];
    const done = buildCompletionEntry(input({ status: 'completed', summary: 'S', missed }));
    expect(done.missed_steer).toBe('first\nsecond\nthird');
    expect(done.summary).toBe(`S\n\n${COMPLETED_NOTE('first\nsecond\nthird')}`);
    const stopped = buildCompletionEntry(input({ status: 'interrupted', error: 'E', missed }));
    expect(stopped.missed_steer).toBe('first\nsecond\nthird');
    expect(stopped.error).toBe(`E ${STOPPED_NOTE('first\nsecond\nthird')}`);
  });

  it.each(FINAL_STATUSES)('missed steers never change the status (%s)', (status) => {
    const without = buildCompletionEntry(input({ status, summary: 's', error: 'e' }));
    const withMissed = buildCompletionEntry(input({ status, summary: 's', error: 'e', missed: ['a', 'b'] }));
    expect(withMissed.status).toBe(status);
    expect(withMissed.exit_reason).toBe(without.exit_reason);
    // Only summary/error/missed_steer (and its detail) differ.
    const strip = (e: object) => {
      const { summary: _s, error: _e, missed_steer: _m, missed_steer_detail: _d, ...rest } = e as Record<string, unknown>;
      return rest;
    };
    expect(strip(withMissed)).toEqual(strip(without));
  });

  it('missed_steer_detail comes with missed_steer, one item per missed steer, and never alone', () => {
    const detail = [
      { steer_id: 'st_1', text: 'a', maybe_delivered: false },
      { steer_id: 'st_2', text: 'b', maybe_delivered: true },
    ];
    const e = buildCompletionEntry(input({ status: 'error', missed: ['a', 'b'], missed_detail: detail }));
    expect(e.missed_steer).toBe('a\nb');
    expect(e.missed_steer_detail).toEqual(detail);
    const none = buildCompletionEntry(input({ status: 'completed', missed: [], missed_detail: [] }));
    expect(none.missed_steer).toBeUndefined();
    expect(none.missed_steer_detail).toBeUndefined();
  });
});
