// A child that is no longer on its worker (it finished just as it was interrupted, or the worker
// dropped it) answers an interrupt with "no responders" on its own control subject. That says the
// child is gone from the worker, not that the worker is: its other children run on. Real
// processes: nats-server -js, a `serve --ws --nats` control plane, one `subrun worker`.
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { epochOf, startNats, startWorker, type Nats, type WorkerProc } from '../helpers/nats.ts';
import { call, connectWs, isEvent, killAll, nextEvent, scriptedTask, startWsServer, type Msg, type WireEvent, type WsPeer } from '../helpers/process.ts';

let nats: Nats;
let rogue: NatsConnection;
let peer: WsPeer;
let session_id: string;
let worker: WorkerProc;
let bystander: string;

beforeAll(async () => {
  nats = await startNats();
  rogue = await connect({ servers: nats.url });
  const srv = await startWsServer(['--nats', nats.url, '--max-concurrent-children', '8']);
  peer = (await connectWs(srv)).peer;
  session_id = (await call<{ session_id: string }>(peer, 'session.create')).session_id;
  worker = await startWorker(nats.url, ['--max-children', '64']);
  bystander = await spawnOne('bystander', [{ op: 'say', text: 'up' }, ...Array.from({ length: 5 }, () => ({ op: 'wait_steer' })), { op: 'hang' }]);
  await nextEvent(peer, (e) => e.type === 'subagent.text' && e.payload.subagent_id === bystander);
}, 30_000);

afterAll(async () => {
  await rogue?.close();
  await killAll();
  await nats?.dispose();
});

async function spawnOne(goal: string, steps: unknown[]): Promise<string> {
  const r = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', { session_id, tasks: [scriptedTask(goal, steps)] });
  return r.subagent_ids[0] as string;
}

const eventsOf = (id: string): WireEvent[] =>
  peer.inbox.all
    .filter(isEvent)
    .map((m) => (m as Msg).params as WireEvent)
    .filter((e) => e.payload.subagent_id === id);

/** The bystander still runs on its worker: a steer to it is queued and delivered. */
async function expectBystanderServed(text: string): Promise<void> {
  expect(eventsOf(bystander).filter((e) => e.type === 'subagent.complete')).toEqual([]);
  const r = await call<{ status: string; steer_id: string }>(peer, 'subagent.steer', { session_id, subagent_id: bystander, text });
  expect(r.status).toBe('queued');
  await nextEvent(peer, (e) => e.type === 'subagent.steer.delivered' && e.payload.steer_id === r.steer_id, 15_000, `the bystander's delivery of ${text}`);
}

it('settles only the child whose control subject has no responder; its worker and siblings run on', async () => {
  const victim = await spawnOne('victim', [{ op: 'say', text: 'up' }, { op: 'hang' }]);
  await nextEvent(peer, (e) => e.type === 'subagent.text' && e.payload.subagent_id === victim);
  const epoch = await epochOf(rogue, worker.id, victim);
  // The worker lets the child go without a word (as after a fence): its control subject is empty.
  rogue.publish(`sr.w.${worker.id}.drop`, new TextEncoder().encode(JSON.stringify({ children: [{ child: victim, epoch }] })));
  await worker.proc.stderr.take((l) => l.includes(`dropped ${victim} (epoch`), 15_000, 'the drop line');
  await call(peer, 'subagent.interrupt', { session_id, subagent_id: victim });
  const entry = (await nextEvent(peer, (e) => e.type === 'subagent.complete' && e.payload.subagent_id === victim, 15_000, 'the victim entry')).payload;
  expect(entry).toMatchObject({ status: 'error', exit_reason: 'child_lost' });
  await expectBystanderServed('still here');
}, 60_000);

it('keeps the bystander through many interrupts that race their child’s finish', async () => {
  await fc.assert(
    fc.asyncProperty(fc.integer({ min: 0, max: 12 }), async (ms) => {
      // The interrupt goes out as soon as the start is seen; the child finishes about then.
      const quick = await spawnOne('quick', [
        { op: 'sleep', ms },
        { op: 'finish', summary: 'ok' },
      ]);
      await nextEvent(peer, (e) => e.type === 'subagent.start' && e.payload.subagent_id === quick);
      await call(peer, 'subagent.interrupt', { session_id, subagent_id: quick });
      const entry = (await nextEvent(peer, (e) => e.type === 'subagent.complete' && e.payload.subagent_id === quick, 15_000, 'the quick entry')).payload;
      expect(['completed', 'interrupted']).toContain(entry.status);
      expect(eventsOf(bystander).filter((e) => e.type === 'subagent.complete')).toEqual([]);
    }),
    { numRuns: 40, endOnFailure: true },
  );
  await expectBystanderServed('after the races');
}, 180_000);
