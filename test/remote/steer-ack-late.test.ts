// A steer whose publish ack comes too late: the steer may be stored all the same (a stalled server
// catches up) and the worker may deliver it, so the host is told `queued` with `uncertain`, not an
// error; it ends delivered (event and transcript) or missed like any other. Real
// processes: nats-server -js (stalled with SIGSTOP, every thread stopped, no connection dropped), a control plane, a worker.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { completionEntrySchema } from '../../src/contract/wire.ts';
import { startNats, startWorker, type Nats } from '../helpers/nats.ts';
import { call, connectWs, killAll, nextEvent, request, scriptedTask, startWsServer } from '../helpers/process.ts';
import { wireEntry } from '../helpers/wire-entry.ts';

let nats: Nats;
beforeAll(async () => {
  nats = await startNats();
});
afterAll(async () => {
  nats?.resume();
  await killAll();
  await nats?.dispose();
});

it('answers a steer whose publish ack is late `queued` and `uncertain`, and accounts for it', async () => {
  // The outage bound sets the publish-ack bound (500 ms here): shorter than the stall.
  const srv = await startWsServer(['--nats', nats.url, '--nats-outage-ms', '100']);
  const { peer } = await connectWs(srv);
  const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
  await startWorker(nats.url);
  const steps = [{ op: 'say', text: 'hi' }, { op: 'wait_steer' }, { op: 'say', text: 'took a steer' }, { op: 'finish', summary: 'done' }];
  const { subagent_ids } = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', { session_id, tasks: [scriptedTask('stalled', steps)] });
  const id = subagent_ids[0] as string;
  await nextEvent(peer, (e) => e.type === 'subagent.text' && e.payload.subagent_id === id);

  // Every thread stopped before the steer is sent: a thread still running would ack it (suspend.ts).
  await nats.suspend();
  let r;
  try {
    r = await request(peer, 'subagent.steer', { session_id, subagent_id: id, text: 'turn left' });
  } finally {
    nats.resume();
  }
  expect(r.result).toMatchObject({ status: 'queued', uncertain: true, text: 'turn left' });
  const steer_id = (r.result as { steer_id: string }).steer_id;
  const entry = completionEntrySchema.parse(
    wireEntry((await nextEvent(peer, (e) => e.type === 'subagent.complete' && e.payload.subagent_id === id, 20_000, 'the entry')).payload),
  );
  const tail = await call<{ text: string }>(peer, 'subagent.tail', { session_id, subagent_id: id });
  const delivered = peer.inbox.all.some(
    (m) => !Array.isArray(m) && m.method === 'event' && (m.params as { type: string; payload: { text?: string } }).type === 'subagent.steer.delivered',
  );
  if (tail.text.includes('took a steer')) {
    // The worker delivered it: the control plane says so, exactly as for a `queued` steer.
    expect(delivered).toBe(true);
    expect(tail.text).toContain('[steer] turn left');
    expect(entry.missed_steer).toBeUndefined();
  } else {
    // Never delivered: it is listed as missed, not forgotten.
    expect(entry.missed_steer_detail?.map((d) => d.steer_id)).toEqual([steer_id]);
  }
}, 60_000);
