// A worker's heartbeat lists every child it holds, and the control plane goes through that list
// and through the worker's children each time. A heartbeat sent for each child let go made that
// work grow with the square of a busy worker's children; now a child let go says so at once only
// when the worker refused an assignment as full (the control plane skips such a worker until it
// hears from it), and the periodic heartbeat carries the rest. Real processes: nats-server -js,
// `serve --ws --nats`, `subrun worker` with its periodic heartbeat slowed to a minute.
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { subjects } from '../../src/remote/wire.ts';
import { startNats, startWorker, type Nats } from '../helpers/nats.ts';
import { call, connectWs, killAll, nextEvent, scriptedTask, startWsServer } from '../helpers/process.ts';

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

/** Counts the heartbeats on NATS from now on. */
async function countHeartbeats(): Promise<{ nc: NatsConnection; count: () => number }> {
  const nc = await connect({ servers: nats.url });
  let n = 0;
  nc.subscribe(subjects.heartbeats, {
    callback: () => {
      n++;
    },
  });
  await nc.flush();
  return { nc, count: () => n };
}

it('sends no heartbeat per child let go while the control plane has room for it', async () => {
  const srv = await startWsServer(['--nats', nats.url, '--worker-loss-ms', '120000', '--max-concurrent-children', '16']);
  await startWorker(nats.url, ['--worker-heartbeat-ms', '60000', '--max-children', '16']);
  const { peer } = await connectWs(srv);
  const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
  // The worker's first heartbeat is in: the first child placed proves it.
  const warm = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', { session_id, tasks: [scriptedTask('warm', [{ op: 'finish' }])] });
  await nextEvent(peer, (e) => e.type === 'subagent.complete' && e.payload.subagent_id === warm.subagent_ids[0], 20_000, 'the first child');
  const hb = await countHeartbeats();
  try {
    const CHILDREN = 12;
    const r = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', {
      session_id,
      tasks: Array.from({ length: CHILDREN }, (_, i) => scriptedTask(`quick ${i}`, [{ op: 'say', text: `child ${i}` }, { op: 'finish' }])),
    });
    for (const id of r.subagent_ids) await nextEvent(peer, (e) => e.type === 'subagent.complete' && e.payload.subagent_id === id, 20_000, `${id} to complete`);
    await hb.nc.flush();
    // One per child let go before: 12.
    expect(hb.count()).toBe(0);
  } finally {
    await hb.nc.close();
  }
});

it('a worker that refused a child as full says at once when a slot is free, and the waiting children run', async () => {
  const srv = await startWsServer(['--nats', nats.url, '--worker-loss-ms', '120000', '--max-concurrent-children', '16']);
  // One slot, and no periodic heartbeat within the test: only the let-go heartbeat can unblock it.
  await startWorker(nats.url, ['--worker-heartbeat-ms', '60000', '--max-children', '1']);
  const { peer } = await connectWs(srv);
  const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
  const r = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', {
    session_id,
    tasks: Array.from({ length: 4 }, (_, i) => scriptedTask(`one at a time ${i}`, [{ op: 'say', text: `child ${i}` }, { op: 'finish' }])),
  });
  const statuses: unknown[] = [];
  for (const id of r.subagent_ids) {
    const e = await nextEvent(peer, (ev) => ev.type === 'subagent.complete' && ev.payload.subagent_id === id, 20_000, `${id} to complete`);
    statuses.push(e.payload.status);
  }
  expect(statuses).toEqual(['completed', 'completed', 'completed', 'completed']);
});
