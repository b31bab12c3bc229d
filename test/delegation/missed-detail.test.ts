// missed_steer_detail on in-process entries: every missed steer with its id, maybe_delivered false
// (only a lost worker makes a steer "maybe delivered").
import { expect, it } from 'vitest';
import { createRuntime, scripted } from '../../src/index.ts';

it('an in-process entry lists each missed steer with its id, never maybe_delivered', async () => {
  const rt = createRuntime();
  const { subagent_ids, results } = rt.delegate([{ goal: 'g', runner: scripted([{ op: 'hang' }]) }]);
  const id = subagent_ids[0] as string;
  const a = rt.steer(id, 'first');
  const b = rt.steer(id, 'second');
  rt.interrupt(id);
  const [entry] = await results;
  expect(entry?.missed_steer).toBe('first\nsecond');
  expect(entry?.missed_steer_detail).toEqual([
    { steer_id: a.status === 'queued' ? a.steer_id : '', text: 'first', maybe_delivered: false },
    { steer_id: b.status === 'queued' ? b.steer_id : '', text: 'second', maybe_delivered: false },
  ]);
});
