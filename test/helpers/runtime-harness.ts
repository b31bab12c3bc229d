// The runtime most unit tests start from: a manual clock, deterministic ids, and a log of every
// event the runtime publishes.
import { counterIds, createRuntime, type EventEnvelope, type RuntimeOptions, type Snapshot } from '../../src/index.ts';
import { ManualClock } from './manual-clock.ts';

export function runtimeHarness(options: RuntimeOptions = {}) {
  const clock = new ManualClock();
  const rt = createRuntime({ clock, ids: counterIds(), ...options });
  const events: EventEnvelope[] = [];
  rt.events.subscribe('**', (e) => {
    events.push(e);
  });
  /** A child's snapshot, live or retained. */
  const find = (id: string): Snapshot | undefined => rt.list({ include_finished: true }).find((s) => s.subagent_id === id);
  return { clock, rt, events, find };
}
