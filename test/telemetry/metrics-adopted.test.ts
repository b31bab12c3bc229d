// The metrics' steer accounting for a child this process did not spawn (one adopted after a
// restart): the steers queued to it here leave the queue-depth gauge at its end, and the ones it
// missed count as missed, though the child itself counts neither spawned nor finished here.
import { describe, expect, it } from 'vitest';
import { Metrics } from '../../src/telemetry/metrics.ts';
import { buildCompletionEntry } from '../../src/delegation/completion.ts';
import { parseMetrics, valueOf } from '../helpers/prometheus.ts';

const child = { subagent_id: 'sa_adopted', parent_id: null, depth: 0, delegation_id: 'dl_1', task_index: 0, goal: 'g', model: 'scripted' };

describe('Metrics, a child adopted after a restart', () => {
  it('settles the steers queued to it here when it ends: missed counted, queue depth back to none', async () => {
    const m = new Metrics({ defaults: false });
    m.steerQueued(child.subagent_id, 'st_1', 4, 1000);
    m.steerQueued(child.subagent_id, 'st_2', 4, 1001);
    m.steerDelivered(child.subagent_id, 'st_1', 1500);
    const before = parseMetrics(await m.scrape());
    expect(valueOf(before, 'subrun_steer_queue_depth')).toBe(1);
    const entry = buildCompletionEntry({
      task_index: 0,
      subagent_id: child.subagent_id,
      status: 'interrupted',
      duration_seconds: 1,
      model: 'scripted',
      missed: ['b', 'from before the restart'],
      missed_detail: [
        { steer_id: 'st_2', text: 'b', maybe_delivered: false },
        { steer_id: 'st_old', text: 'from before the restart', maybe_delivered: false },
      ],
    });
    m.finished(child, entry);
    const after = parseMetrics(await m.scrape());
    expect(valueOf(after, 'subrun_steer_queue_depth')).toBe(0);
    expect(valueOf(after, 'subrun_steers_total', { fate: 'missed' })).toBe(1);
    expect(valueOf(after, 'subrun_steers_total', { fate: 'delivered' })).toBe(1);
    expect(valueOf(after, 'subrun_children_finished_total', { status: 'interrupted', exit_reason: 'interrupted' })).toBeUndefined();
  });
});
