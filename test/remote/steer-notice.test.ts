// The notice that tells a worker steers wait for a receipt is sent once until the worker asks:
// one receipt takes every waiting steer, so a notice per steer only woke the worker (and cost a
// NATS write on the control plane) while its child was busy. Every steer still reaches the child,
// in order, at its next delivery point. Real processes: nats-server -js, `serve --ws --nats`,
// `subrun worker`; the test reads the notices off the child's inbound subject itself.
import { connect } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { subjects } from '../../src/remote/wire.ts';
import { startNats, startWorker, type Nats } from '../helpers/nats.ts';
import { call, connectWs, isEvent, killAll, nextEvent, scriptedTask, startWsServer, type Msg, type WireEvent } from '../helpers/process.ts';

let nats: Nats;
beforeAll(async () => {
  nats = await startNats();
});
afterAll(async () => {
  await nats?.dispose();
});
afterEach(async () => {
  await killAll();
});

it('wakes the worker of a busy child once for a run of steers, and each of them is delivered in order', async () => {
  // Heartbeats re-send a notice while steers wait; slow them so that only the steers' own count.
  const srv = await startWsServer(['--nats', nats.url, '--worker-loss-ms', '120000']);
  await startWorker(nats.url, ['--worker-heartbeat-ms', '60000']);
  const { peer } = await connectWs(srv);
  const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
  const STEERS = 12;
  // Busy in a tool while the steers come; its delivery point is after the tool.
  const r = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', {
    session_id,
    tasks: [scriptedTask('busy', [{ op: 'say', text: 'up' }, { op: 'wait_steer' }, { op: 'tool', name: 'long', ms: 4000 }, { op: 'hang' }])],
  });
  const id = r.subagent_ids[0] as string;
  await nextEvent(peer, (e) => e.type === 'subagent.text' && e.payload.subagent_id === id);

  const nc = await connect({ servers: nats.url });
  const notices: string[] = [];
  const sub = nc.subscribe(subjects.inbound(id), {
    callback: (_err, m) => {
      notices.push(m.string());
    },
  });
  await nc.flush();
  try {
    // The first steer ends the wait_steer (one notice, one receipt); the child is then in its tool.
    const first = await call<{ status: string; steer_id: string }>(peer, 'subagent.steer', { session_id, subagent_id: id, text: 'first' });
    await nextEvent(peer, (e) => e.type === 'subagent.steer.delivered' && e.payload.steer_id === first.steer_id, 15_000, 'the first delivery');
    await nextEvent(peer, (e) => e.type === 'subagent.tool' && e.payload.subagent_id === id, 15_000, 'the tool');
    const ids: string[] = [];
    for (let i = 0; i < STEERS; i++) {
      const s = await call<{ status: string; steer_id: string }>(peer, 'subagent.steer', { session_id, subagent_id: id, text: `during the tool ${i}` });
      expect(s.status).toBe('queued');
      ids.push(s.steer_id);
    }
    await nc.flush();
    const steerNotices = () => notices.filter((n) => (JSON.parse(n) as { type: string }).type === 'steer').length;
    // One for the first steer, one for the run during the tool (a notice per steer: 13).
    expect(steerNotices()).toBe(2);
    for (const steer_id of ids)
      await nextEvent(peer, (ev) => ev.type === 'subagent.steer.delivered' && ev.payload.steer_id === steer_id, 15_000, `delivery of ${steer_id}`);
    const wanted = new Set(ids);
    const order = peer.inbox.all
      .filter(isEvent)
      .map((m) => (m as Msg).params as WireEvent)
      .filter((e) => e.type === 'subagent.steer.delivered' && wanted.has(String(e.payload.steer_id)))
      .map((e) => String(e.payload.steer_id));
    expect(order).toEqual(ids);
  } finally {
    sub.unsubscribe();
    await nc.close();
  }
});
