// Scale-out that is exact: remote children spawn at every depth the server allows, each steer's
// fate is decided by the worker's `taken` receipt (never by what JetStream handed a dead worker's
// pull), a delivery the worker reports is never lost, and an interrupt that finds nobody settles
// at once. Real processes: nats-server -js, a `serve --ws --nats` control plane, `subrun worker`s.
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { completionEntrySchema } from '../../src/contract/wire.ts';
import { startNats, startWorker, type Nats } from '../helpers/nats.ts';
import {
  call,
  connectWs,
  isEvent,
  killAll,
  nextEvent,
  request,
  scriptedTask,
  startWsServer,
  type Msg,
  type WireEvent,
  type WsPeer,
} from '../helpers/process.ts';
import { wireEntry } from '../helpers/wire-entry.ts';

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

interface Host {
  peer: WsPeer;
  session_id: string;
}

async function host(extra: readonly string[] = []): Promise<Host> {
  const srv = await startWsServer(['--nats', nats.url, ...extra]);
  const { peer } = await connectWs(srv);
  const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
  return { peer, session_id };
}

async function spawnOne(h: Host, goal: string, steps: unknown[]): Promise<string> {
  const r = await call<{ subagent_ids: string[] }>(h.peer, 'delegation.spawn', { session_id: h.session_id, tasks: [scriptedTask(goal, steps)] });
  return r.subagent_ids[0] as string;
}

const events = (h: Host): WireEvent[] => h.peer.inbox.all.filter(isEvent).map((m) => (m as Msg).params as WireEvent);
const entryOf = async (h: Host, id: string, ms = 20_000) =>
  completionEntrySchema.parse(
    wireEntry((await nextEvent(h.peer, (e) => e.type === 'subagent.complete' && e.payload.subagent_id === id, ms, `the entry of ${id}`)).payload),
  );
const steer = (h: Host, id: string, text: string) =>
  call<{ status: string; steer_id: string; uncertain?: boolean }>(h.peer, 'subagent.steer', { session_id: h.session_id, subagent_id: id, text });
const tailOf = async (h: Host, id: string) => (await call<{ text: string }>(h.peer, 'subagent.tail', { session_id: h.session_id, subagent_id: id })).text;

const leaf = (summary: string) => ({ goal: 'leaf', agent: { kind: 'scripted', steps: [{ op: 'finish', summary }] } });

it('spawns from remote children at every depth the server allows, and each spawning step goes on', async () => {
  const h = await host(['--max-spawn-depth', '3']);
  await startWorker(nats.url, ['--max-children', '4']);
  const middle = {
    goal: 'middle',
    agent: {
      kind: 'scripted',
      steps: [
        { op: 'say', text: 'middle up' },
        { op: 'spawn', tasks: [leaf('l1'), leaf('l2')] },
        { op: 'finish', summary: 'middle done' },
      ],
    },
  };
  const top = await spawnOne(h, 'top', [
    { op: 'spawn', tasks: [middle, leaf('sibling')] },
    { op: 'finish', summary: 'top done' },
  ]);
  const entry = await entryOf(h, top, 30_000);
  expect(entry).toMatchObject({ status: 'completed', summary: 'top done' });
  const done = events(h).filter((e) => e.type === 'subagent.complete');
  // The top child, its two children and the middle one's two leaves: five entries, all completed.
  expect(done).toHaveLength(5);
  expect(done.every((e) => e.payload.status === 'completed')).toBe(true);
  const mid = done.find((e) => e.payload.summary === 'middle done');
  expect(mid?.payload.parent_id).toBe(top);
  const leaves = done.filter((e) => e.payload.parent_id === mid?.payload.subagent_id).map((e) => e.payload.summary);
  expect(leaves.sort()).toEqual(['l1', 'l2']);
  // Each spawning step saw its children's entries (the ids the worker made are the ones that ran).
  expect(await tailOf(h, mid?.payload.subagent_id as string)).toMatch(/\[child sa_\w+\] completed: l1/);
  expect(await tailOf(h, top)).toMatch(/\[child sa_\w+\] completed: middle done/);
});

it('fails a spawn past the depth limit visibly, in the spawning child’s transcript', async () => {
  const h = await host(['--max-spawn-depth', '1']);
  await startWorker(nats.url);
  const id = await spawnOne(h, 'too deep', [
    { op: 'spawn', tasks: [leaf('x')] },
    { op: 'finish', summary: 'went on' },
  ]);
  expect(await entryOf(h, id)).toMatchObject({ status: 'completed', summary: 'went on' });
  expect(await tailOf(h, id)).toMatch(/\[spawn refused\] spawn depth limit reached/);
});

it('confirms every steer the worker delivered, however the steers pair up', async () => {
  const h = await host();
  await startWorker(nats.url);
  const pairs = 6;
  const id = await spawnOne(h, 'paired', [{ op: 'say', text: 'up' }, ...Array.from({ length: 2 * pairs }, () => ({ op: 'wait_steer' })), { op: 'hang' }]);
  await nextEvent(h.peer, (e) => e.type === 'subagent.text' && e.payload.subagent_id === id);
  const ids: string[] = [];
  for (let i = 0; i < pairs; i++) {
    const both = await Promise.all([steer(h, id, `a${i}`), steer(h, id, `b${i}`)]);
    for (const r of both) {
      expect(r.status).toBe('queued');
      ids.push(r.steer_id);
    }
    for (const r of both) await nextEvent(h.peer, (e) => e.type === 'subagent.steer.delivered' && e.payload.steer_id === r.steer_id, 15_000, `delivery ${i}`);
  }
  await call(h.peer, 'subagent.interrupt', { session_id: h.session_id, subagent_id: id });
  const entry = await entryOf(h, id);
  expect(entry.missed_steer).toBeUndefined();
  const delivered = events(h)
    .filter((e) => e.type === 'subagent.steer.delivered')
    .map((e) => e.payload.steer_id);
  // Each exactly once, and all of them.
  expect([...delivered].sort()).toEqual([...ids].sort());
});

it('never calls a steer maybe_delivered without a taken receipt: queued during a long tool, or sent after the kill', async () => {
  const h = await host(['--worker-loss-ms', '800']);
  const w = await startWorker(nats.url, ['--worker-heartbeat-ms', '100']);
  const id = await spawnOne(h, 'busy', [{ op: 'say', text: 'up' }, { op: 'tool', name: 'slow', ms: 60_000 }, { op: 'wait_steer' }, { op: 'hang' }]);
  await nextEvent(h.peer, (e) => e.type === 'subagent.tool' && e.payload.subagent_id === id);
  const during = [await steer(h, id, 'one'), await steer(h, id, 'two')];
  // The worker's background pull has these messages: JetStream handed them over. Not "taken".
  await w.proc.kill();
  const after = await request(h.peer, 'subagent.steer', { session_id: h.session_id, subagent_id: id, text: 'after the kill' });
  const entry = await entryOf(h, id);
  expect(entry).toMatchObject({ status: 'error', exit_reason: 'worker_lost' });
  const afterResult = after.result as { status: string; steer_id?: string } | undefined;
  const expected = [
    { steer_id: during[0]?.steer_id, text: 'one', maybe_delivered: false },
    { steer_id: during[1]?.steer_id, text: 'two', maybe_delivered: false },
    ...(afterResult?.status === 'queued' ? [{ steer_id: afterResult.steer_id, text: 'after the kill', maybe_delivered: false }] : []),
  ];
  expect(entry.missed_steer_detail).toEqual(expected);
});

it('settles a child whose interrupt finds no responders at once, before the loss bound settles its siblings', async () => {
  const h = await host(['--worker-loss-ms', '1500']);
  const w = await startWorker(nats.url, ['--worker-heartbeat-ms', '100']);
  const a = await spawnOne(h, 'a', [{ op: 'say', text: 'a up' }, { op: 'hang' }]);
  const b = await spawnOne(h, 'b', [{ op: 'say', text: 'b up' }, { op: 'hang' }]);
  for (const id of [a, b]) await nextEvent(h.peer, (e) => e.type === 'subagent.text' && e.payload.subagent_id === id);
  await w.proc.kill();
  const r = await call<{ found: boolean }>(h.peer, 'subagent.interrupt', { session_id: h.session_id, subagent_id: a });
  expect(r.found).toBe(true);
  const first = await nextEvent(h.peer, (e) => e.type === 'subagent.complete', 20_000, 'the first entry');
  expect(first.payload).toMatchObject({ subagent_id: a, status: 'error', exit_reason: 'child_lost' });
  expect(await entryOf(h, b)).toMatchObject({ status: 'error', exit_reason: 'worker_lost' });
});

it('frees the worker slot of a remote child the runtime abandoned, on both sides', async () => {
  const h = await host(['--interrupt-grace-ms', '300']);
  await startWorker(nats.url, ['--max-children', '1']);
  const stuck = await spawnOne(h, 'stuck', [
    { op: 'say', text: 'stuck up' },
    { op: 'hang', stubborn: true },
  ]);
  await nextEvent(h.peer, (e) => e.type === 'subagent.text' && e.payload.subagent_id === stuck);
  await call(h.peer, 'subagent.interrupt', { session_id: h.session_id, subagent_id: stuck });
  expect((await entryOf(h, stuck)).status).toBe('interrupted');
  // The only slot there is: the next child runs only if the abandoned one let it go.
  const next = await spawnOne(h, 'next', [{ op: 'finish', summary: 'ran' }]);
  expect(await entryOf(h, next)).toMatchObject({ status: 'completed', summary: 'ran' });
});
