// Children on workers through NATS JetStream, end to end: a real nats-server -js, a real
// `serve --ws --nats` control plane and real `subrun worker` processes, over real sockets on
// 127.0.0.1. The host's side is the usual JSON-RPC: nothing in these tests knows about workers
// except the processes they start and stop. Every wait is on an event, a line or an exit.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
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
import { resume, suspend } from '../helpers/suspend.ts';
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

async function controlPlane(extra: readonly string[] = []): Promise<Host> {
  const srv = await startWsServer(['--nats', nats.url, '--max-spawn-depth', '2', ...extra]);
  const { peer } = await connectWs(srv);
  const s = await call<{ session_id: string }>(peer, 'session.create');
  return { peer, session_id: s.session_id };
}

async function spawn(h: Host, tasks: unknown[]): Promise<string[]> {
  const r = await call<{ subagent_ids: string[] }>(h.peer, 'delegation.spawn', { session_id: h.session_id, tasks });
  return r.subagent_ids;
}

const steer = (h: Host, subagent_id: string, text: string) =>
  call<{ status: string; steer_id?: string }>(h.peer, 'subagent.steer', { session_id: h.session_id, subagent_id, text });
const eventsOf = (h: Host): WireEvent[] => h.peer.inbox.all.filter(isEvent).map((m) => (m as Msg).params as WireEvent);
const completeOf = async (h: Host, id: string) => {
  const e = await nextEvent(h.peer, (x) => x.type === 'subagent.complete' && x.payload.subagent_id === id, 20_000, `the entry of ${id}`);
  return completionEntrySchema.parse(wireEntry(e.payload));
};

describe('children on workers', () => {
  it('delivers a remote steer at the child’s delivery point, and tail shows it', async () => {
    const h = await controlPlane();
    await startWorker(nats.url);
    const [id] = (await spawn(h, [scriptedTask('remote', [{ op: 'say', text: 'ready' }, { op: 'wait_steer' }, { op: 'finish', summary: 'done' }])])) as [
      string,
    ];
    await nextEvent(h.peer, (e) => e.type === 'subagent.text' && e.payload.subagent_id === id);
    const r = await steer(h, id, 'go left');
    expect(r.status).toBe('queued');
    const delivered = await nextEvent(h.peer, (e) => e.type === 'subagent.steer.delivered');
    expect(delivered.payload).toMatchObject({ subagent_id: id, steer_id: r.steer_id, text: 'go left' });
    const entry = await completeOf(h, id);
    expect(entry).toMatchObject({ status: 'completed', summary: 'done' });
    expect(entry.missed_steer).toBeUndefined();
    const tail = await call<{ text: string }>(h.peer, 'subagent.tail', { session_id: h.session_id, subagent_id: id });
    expect(tail.text).toBe('[start] remote\n[text] ready\n[steer] go left\n[completed] done\n');
  });

  it('lists a steer the child could not take as missed (with its detail), and rejects one after the end', async () => {
    const h = await controlPlane();
    await startWorker(nats.url);
    const [id] = (await spawn(h, [scriptedTask('late', [{ op: 'wait_steer' }, { op: 'hang' }])])) as [string];
    await nextEvent(h.peer, (e) => e.type === 'subagent.start' && e.payload.subagent_id === id);
    const first = await steer(h, id, 'first');
    await nextEvent(h.peer, (e) => e.type === 'subagent.steer.delivered' && e.payload.steer_id === first.steer_id);
    // The child hangs with no delivery point left: this steer is accepted and can only be missed.
    const late = await steer(h, id, 'too late');
    expect(late.status).toBe('queued');
    await call(h.peer, 'subagent.interrupt', { session_id: h.session_id, subagent_id: id });
    const entry = await completeOf(h, id);
    expect(entry.status).toBe('interrupted');
    expect(entry.missed_steer).toBe('too late');
    expect(entry.missed_steer_detail).toEqual([{ steer_id: late.steer_id, text: 'too late', maybe_delivered: false }]);
    expect((await steer(h, id, 'after the end')).status).toBe('rejected');
  });

  it('interrupts a remote subtree, entries in post-order', async () => {
    const h = await controlPlane();
    await startWorker(nats.url, ['--max-children', '4']);
    const hang = { goal: 'grandchild', agent: { kind: 'scripted', steps: [{ op: 'hang' }] } };
    const [parent] = (await spawn(h, [
      scriptedTask('parent', [
        { op: 'spawn', tasks: [hang, hang] },
        { op: 'finish', summary: 'never' },
      ]),
    ])) as [string];
    const started = new Set<string>();
    while (started.size < 3) started.add((await nextEvent(h.peer, (e) => e.type === 'subagent.start')).payload.subagent_id as string);
    const r = await call<{ found: boolean; interrupted: string[] }>(h.peer, 'subagent.interrupt', { session_id: h.session_id, subagent_id: parent });
    expect(r.found).toBe(true);
    const entries = [];
    for (let i = 0; i < 3; i++) entries.push((await nextEvent(h.peer, (e) => e.type === 'subagent.complete')).payload);
    expect(entries.map((e) => e.status)).toEqual(['interrupted', 'interrupted', 'interrupted']);
    // Post-order: both grandchildren (whose parent is the child) before the child itself.
    expect(entries.slice(0, 2).every((e) => e.parent_id === parent)).toBe(true);
    expect(entries[2]?.subagent_id).toBe(parent);
  });

  it('answers list and tail from the control plane while the worker is stopped', async () => {
    const h = await controlPlane(['--worker-loss-ms', '600000']);
    const w = await startWorker(nats.url);
    const [id] = (await spawn(h, [scriptedTask('watched', [{ op: 'say', text: 'visible' }, { op: 'wait_steer' }])])) as [string];
    await nextEvent(h.peer, (e) => e.type === 'subagent.text' && e.payload.subagent_id === id);
    await suspend(w.proc.child);
    try {
      const list = await call<{ subagents: Array<{ subagent_id: string; status: string }> }>(h.peer, 'subagent.list', { session_id: h.session_id });
      expect(list.subagents.find((s) => s.subagent_id === id)?.status).toBe('running');
      const tail = await call<{ text: string }>(h.peer, 'subagent.tail', { session_id: h.session_id, subagent_id: id });
      expect(tail.text).toContain('[text] visible');
      const replay = await call<{ events: Array<{ type: string }> }>(h.peer, 'session.events.since', { session_id: h.session_id, after_seq: 0 });
      expect(replay.events.map((e) => e.type)).toContain('subagent.text');
    } finally {
      resume(w.proc.child);
    }
  });

  it('keeps children queued while no worker exists, and runs them once one starts', async () => {
    const h = await controlPlane();
    const [id] = (await spawn(h, [
      scriptedTask('patient', [
        { op: 'say', text: 'ran' },
        { op: 'finish', summary: 'ok' },
      ]),
    ])) as [string];
    const list = await call<{ subagents: Array<{ subagent_id: string; status: string }> }>(h.peer, 'subagent.list', { session_id: h.session_id });
    expect(list.subagents.find((s) => s.subagent_id === id)?.status).toBe('queued');
    expect(eventsOf(h).some((e) => e.type === 'subagent.start')).toBe(false);
    await startWorker(nats.url);
    expect(await completeOf(h, id)).toMatchObject({ status: 'completed', summary: 'ok' });
  });

  it('fences a worker that comes back after it was declared lost', async () => {
    const h = await controlPlane(['--worker-loss-ms', '500']);
    const w = await startWorker(nats.url, ['--worker-heartbeat-ms', '100']);
    const [id] = (await spawn(h, [
      scriptedTask('fenced', [
        { op: 'say', text: 'before' },
        { op: 'sleep', ms: 5000 },
        { op: 'wait_steer' },
        { op: 'say', text: 'after' },
        { op: 'finish', summary: 'late' },
      ]),
    ])) as [string];
    await nextEvent(h.peer, (e) => e.type === 'subagent.text' && e.payload.subagent_id === id);
    const s = await steer(h, id, 'wake up');
    await suspend(w.proc.child);
    const entry = await completeOf(h, id);
    resume(w.proc.child);
    expect(entry).toMatchObject({ status: 'error', exit_reason: 'worker_lost' });
    // The steer was queued and never acknowledged as delivered: it is missed, exactly once.
    expect(entry.missed_steer_detail?.map((d) => d.steer_id)).toEqual([s.steer_id]);
    // Back again, the worker is told to drop the child; nothing it sends reaches the host.
    await w.proc.stderr.take((l) => l.includes(`dropped ${id} (epoch`), 20_000, 'the drop line');
    const tail = await call<{ text: string }>(h.peer, 'subagent.tail', { session_id: h.session_id, subagent_id: id });
    expect(tail.text).not.toContain('after');
    expect(eventsOf(h).filter((e) => e.payload.subagent_id === id && e.type === 'subagent.complete')).toHaveLength(1);
    // And it takes new children again.
    const [next] = (await spawn(h, [scriptedTask('next', [{ op: 'finish', summary: 'fine' }])])) as [string];
    expect(await completeOf(h, next)).toMatchObject({ status: 'completed' });
  });

  it('keeps authority over the wire: another session cannot steer a remote child', async () => {
    const h = await controlPlane();
    await startWorker(nats.url);
    const [id] = (await spawn(h, [scriptedTask('owned', [{ op: 'wait_steer' }])])) as [string];
    const other = await call<{ session_id: string }>(h.peer, 'session.create');
    const r = await request(h.peer, 'subagent.steer', { session_id: other.session_id, subagent_id: id, text: 'not yours' });
    expect(r.result ?? r.error).toMatchObject({ status: 'rejected' });
  });
});
