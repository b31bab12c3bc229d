// A lost child's mailbox when NATS is down at its cleanup: removed once NATS is back (not leaked),
// with the server's own backstops set (an idle consumer is reaped, old mailbox messages expire).
// Real processes: nats-server -js (stopped and restarted on its store), a control plane, a worker.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { startNats, startWorker, type Nats } from '../helpers/nats.ts';
import { call, connectWs, killAll, nextEvent, scriptedTask, startWsServer } from '../helpers/process.ts';

let nats: Nats;
beforeAll(async () => {
  nats = await startNats();
});
afterAll(async () => {
  await killAll();
  await nats?.dispose();
});

async function inspect<T>(fn: (jsm: Awaited<ReturnType<typeof jetstreamManager>>) => Promise<T>): Promise<T> {
  const nc = await connect({ servers: nats.url });
  try {
    return await fn(await jetstreamManager(nc));
  } finally {
    await nc.close();
  }
}

it('removes a lost child’s steers once NATS is back, and sets the server-side backstop', async () => {
  const srv = await startWsServer(['--nats', nats.url, '--worker-loss-ms', '800', '--log-level', 'info']);
  const { peer } = await connectWs(srv);
  const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
  await startWorker(nats.url, ['--worker-heartbeat-ms', '100']);
  const { subagent_ids } = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', {
    session_id,
    tasks: [scriptedTask('long', [{ op: 'say', text: 'hi' }, { op: 'hang' }])],
  });
  const id = subagent_ids[0] as string;
  await nextEvent(peer, (e) => e.type === 'subagent.text' && e.payload.subagent_id === id);
  // A steer that sits in the mailbox (the child never takes it).
  expect((await call<{ status: string }>(peer, 'subagent.steer', { session_id, subagent_id: id, text: 'sits' })).status).toBe('queued');
  expect((await inspect((jsm) => jsm.streams.info('SUBRUN_STEER'))).config.max_age).toBeGreaterThan(0);

  await nats.stop('SIGTERM');
  const entry = (await nextEvent(peer, (e) => e.type === 'subagent.complete' && e.payload.subagent_id === id, 20_000, 'the lost entry')).payload;
  expect(entry).toMatchObject({ status: 'error', exit_reason: 'worker_lost' });
  await nats.restart();
  await srv.proc.stderr.take(
    (l) => l.includes('removed the mailbox of a finished child') && l.includes(id),
    20_000,
    'the mailbox cleanup after NATS came back',
  );
  const left = await inspect(async (jsm) => {
    const info = await jsm.streams.info('SUBRUN_STEER', { subjects_filter: `sr.steer.${id}` });
    // No consumer per child: the worker takes steers by receipt, never from the stream.
    const consumers: string[] = [];
    for await (const c of jsm.consumers.list('SUBRUN_STEER')) consumers.push(c.name);
    return { messages: Object.keys(info.state.subjects ?? {}), consumers };
  });
  expect(left.messages).toEqual([]);
  expect(left.consumers).toEqual([]);
}, 90_000);
