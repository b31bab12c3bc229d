// A control plane that stops (SIGKILL, or SIGTERM) and starts again on the same state directory and NATS
// (or, with --store jetstream, on another state directory: another machine) interrupts no remote child: the worker runs on through the gap (its events wait in JetStream, a
// spawn and a receipt are asked again), the new process adopts the child where it runs, the host
// re-binds with its key, replays exactly the gap, steers again, and the child finishes
// `completed` with every steer accounted. Real processes: nats-server -js, `serve --ws --nats
// --state-dir`, one `subrun worker`.
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { killAll, spawnSubrun, WAIT_MS } from '../helpers/process.ts';
import { startNats, startWorker, type Nats } from '../helpers/nats.ts';
import type { WireEvent } from '../helpers/rpc-client.ts';
import {
  connectHost,
  freshStateDir,
  lastSeen,
  mustCall,
  removeStateDir,
  serverArgs,
  sessionEvents,
  sigkill,
  sigterm,
  startServer,
  within,
  type Host,
  type Server,
} from '../durability/harness.ts';

let nats: Nats;
const dirs: string[] = [];
const hosts: Host[] = [];
beforeAll(async () => {
  nats = await startNats();
});
afterAll(async () => {
  await nats?.dispose();
});
afterEach(async () => {
  for (const h of hosts.splice(0)) await h.close();
  await killAll();
  for (const d of dirs.splice(0)) await removeStateDir(d);
});

/** A control plane on `dir` and the test's NATS; its progress written at most every 20 ms. */
function plane(dir: string, extra: readonly string[] = []): Promise<Server> {
  return startServer(dir, ['--nats', nats.url, '--checkpoint-ms', '20', ...extra]);
}

async function host(server: Server): Promise<Host> {
  const h = await connectHost(server, hosts.length);
  hosts.push(h);
  return h;
}

const waitFor = (h: Host, pred: (e: WireEvent) => boolean, what: string) => within(h.client.waitForEvent(pred), 20_000, what);
const is = (type: string, id: string) => (e: WireEvent) => e.type === type && e.payload.subagent_id === id;
const said = (id: string, text: string) => (e: WireEvent) => is('subagent.text', id)(e) && e.payload.text === text;

/** Where the second plane starts: the first one's directory (sqlite), or a directory of its own (jetstream). */
async function nextDir(dir: string, store: 'sqlite' | 'jetstream'): Promise<string> {
  if (store === 'sqlite') return dir;
  const other = await freshStateDir();
  dirs.push(other);
  return other;
}

it.each([
  ['SIGKILL', 'sqlite'],
  ['SIGTERM', 'sqlite'],
  ['SIGKILL', 'jetstream'],
  ['SIGTERM', 'jetstream'],
] as const)(
  'adopts a remote child across a %s of its control plane (--store %s): nothing interrupted, the gap replayed, every steer accounted',
  async (signal, store) => {
    const dir = await freshStateDir();
    dirs.push(dir);
    const storeFlags = ['--store', store];
    const first = await plane(dir, storeFlags);
    await startWorker(nats.url);
    const a = await host(first);
    const s = await mustCall<{ session_id: string; session_key: string }>(a, 'session.create', {});
    const leaf = { goal: 'leaf', agent: { kind: 'scripted', steps: [{ op: 'finish', summary: 'leaf done' }] } };
    const steps = [
      { op: 'say', text: 'up' },
      { op: 'wait_steer' },
      // Long enough for the progress naming its worker to be written (--checkpoint-ms 20).
      { op: 'tool', name: 'settle', ms: 200 },
      { op: 'say', text: 'took one' },
      // Runs while the control plane is down: its events wait in JetStream.
      { op: 'tool', name: 'through the gap', ms: 1500 },
      { op: 'say', text: 'in the gap' },
      { op: 'wait_steer' },
      { op: 'say', text: 'took two' },
      { op: 'spawn', tasks: [leaf] },
      { op: 'finish', summary: 'done' },
    ];
    const { subagent_ids } = await mustCall<{ subagent_ids: string[] }>(a, 'delegation.spawn', {
      session_id: s.session_id,
      tasks: [{ goal: 'survivor', agent: { kind: 'scripted', steps } }],
    });
    const id = subagent_ids[0] as string;
    await waitFor(a, said(id, 'up'), 'the child up');
    const one = await mustCall<{ status: string; steer_id: string }>(a, 'subagent.steer', { session_id: s.session_id, subagent_id: id, text: 'first' });
    expect(one.status).toBe('queued');
    await waitFor(a, (e) => is('subagent.steer.delivered', id)(e) && e.payload.steer_id === one.steer_id, 'the first delivery');
    await waitFor(a, (e) => is('subagent.tool', id)(e) && e.payload.tool_name === 'through the gap', 'the tool in the gap');
    const seen = lastSeen(a, s.session_id);
    if (signal === 'SIGKILL') await sigkill(first);
    // An orderly stop leaves the remote child running too (and settles nothing of it).
    else expect(await sigterm(first)).toMatchObject({ code: 0 });

    const second = await plane(await nextDir(dir, store), storeFlags);
    const b = await host(second);
    await mustCall(b, 'session.attach', { session_id: s.session_id, session_key: s.session_key });
    // Still running, not settled: the new process adopted it.
    const list = await mustCall<{ subagents: Array<{ subagent_id: string; status: string }> }>(b, 'subagent.list', { session_id: s.session_id });
    expect(list.subagents.find((x) => x.subagent_id === id)?.status).toBe('running');
    // Said while no control plane ran: the new one may have read it from the event feed before
    // this host attached (then it is in the ring), or reads it after (then it comes live).
    const ring = await mustCall<{ events: WireEvent[] }>(b, 'session.events.since', { session_id: s.session_id, last_seen: seen });
    if (!ring.events.some(said(id, 'in the gap'))) await waitFor(b, said(id, 'in the gap'), 'the line said in the gap');
    const two = await mustCall<{ status: string; steer_id: string }>(b, 'subagent.steer', { session_id: s.session_id, subagent_id: id, text: 'second' });
    expect(two.status).toBe('queued');
    const done = await waitFor(b, is('subagent.complete', id), 'the entry');
    expect(done.payload).toMatchObject({ status: 'completed', summary: 'done' });
    expect(done.payload.missed_steer).toBeUndefined();
    const events = sessionEvents(b, s.session_id);
    expect(events.filter((e) => is('subagent.steer.delivered', id)(e)).map((e) => e.payload.steer_id)).toEqual([two.steer_id]);
    // The child's spawn after the restart ran, and its entry reached the child on its worker.
    const leafDone = events.find((e) => e.type === 'subagent.complete' && e.payload.parent_id === id);
    expect(leafDone?.payload).toMatchObject({ status: 'completed', summary: 'leaf done' });
    const tail = await mustCall<{ text: string }>(b, 'subagent.tail', { session_id: s.session_id, subagent_id: id });
    expect(tail.text).toMatch(/\[steer\] first[\s\S]*\[text\] in the gap[\s\S]*\[steer\] second[\s\S]*\[child sa_\w+\] completed: leaf done/);
    // The gap, replayed exactly: from the last event the host saw before the crash, every event of
    // the child after it once, in order, starting with what the worker sent while nobody listened.
    const replay = await mustCall<{ events: WireEvent[] }>(b, 'session.events.since', { session_id: s.session_id, last_seen: seen });
    const seqs = replay.events.map((e) => e.seq);
    expect(seqs).toEqual([...new Set(seqs)].sort((x, y) => x - y));
    expect(seqs[0]).toBe(seen + 1);
    const texts = replay.events.filter((e) => is('subagent.text', id)(e)).map((e) => e.payload.text);
    expect(texts).toEqual(['in the gap', 'took two']);
    expect(replay.events.some((e) => is('subagent.complete', id)(e) && e.payload.status === 'completed')).toBe(true);
  },
  90_000,
);

it.each([
  ['the leader’s state directory', 'sqlite'],
  ['a directory of its own', 'jetstream'],
] as const)(
  'a warm standby on %s (--store %s) takes over when the leader is SIGKILLed, and adopts its remote child',
  async (_where, store) => {
    const dir = await freshStateDir();
    dirs.push(dir);
    const leader = await plane(dir, ['--store', store]);
    // Waits for the lease before it opens its store: the leader holds both.
    const standbyDir = await nextDir(dir, store);
    const standby = spawnSubrun([...serverArgs(standbyDir), '--store', store, '--nats', nats.url, '--standby', '--checkpoint-ms', '20']);
    await standby.stderr.take((l) => l.includes('standby: another control plane leads'), WAIT_MS, 'the standby waiting');
    await startWorker(nats.url);
    const a = await host(leader);
    const s = await mustCall<{ session_id: string; session_key: string }>(a, 'session.create', {});
    const steps = [
      { op: 'say', text: 'up' },
      { op: 'tool', name: 'settle', ms: 100 },
      { op: 'say', text: 'waiting' },
      { op: 'wait_steer' },
      { op: 'finish', summary: 'steered' },
    ];
    const { subagent_ids } = await mustCall<{ subagent_ids: string[] }>(a, 'delegation.spawn', {
      session_id: s.session_id,
      tasks: [{ goal: 'kept', agent: { kind: 'scripted', steps } }],
    });
    const id = subagent_ids[0] as string;
    await waitFor(a, said(id, 'waiting'), 'the child waiting');
    await sigkill(leader);
    const line = await standby.stderr.take((l) => l.startsWith('subrun listening on '), WAIT_MS, 'the standby listening');
    const b = await host({ proc: standby, url: line.slice('subrun listening on '.length).trim(), dir: standbyDir });
    await mustCall(b, 'session.attach', { session_id: s.session_id, session_key: s.session_key });
    const r = await mustCall<{ status: string; steer_id: string }>(b, 'subagent.steer', { session_id: s.session_id, subagent_id: id, text: 'go on' });
    expect(r.status).toBe('queued');
    const done = await waitFor(b, is('subagent.complete', id), 'the entry');
    expect(done.payload).toMatchObject({ status: 'completed', summary: 'steered' });
    expect(done.payload.missed_steer).toBeUndefined();
  },
  90_000,
);

it('an adopted child rides out a NATS restart after the control plane’s: its events and its steer arrive', async () => {
  const dir = await freshStateDir();
  dirs.push(dir);
  // Bounds longer than the outage: nobody is lost while NATS restarts.
  const bounds = ['--worker-loss-ms', '20000'];
  const first = await plane(dir, bounds);
  await startWorker(nats.url);
  const a = await host(first);
  const s = await mustCall<{ session_id: string; session_key: string }>(a, 'session.create', {});
  const steps = [
    { op: 'say', text: 'up' },
    { op: 'tool', name: 'settle', ms: 100 },
    { op: 'say', text: 'before' },
    { op: 'wait_steer' },
    { op: 'say', text: 'after' },
    { op: 'finish', summary: 'rode it out' },
  ];
  const { subagent_ids } = await mustCall<{ subagent_ids: string[] }>(a, 'delegation.spawn', {
    session_id: s.session_id,
    tasks: [{ goal: 'rider', agent: { kind: 'scripted', steps } }],
  });
  const id = subagent_ids[0] as string;
  await waitFor(a, said(id, 'before'), 'the child waiting');
  await sigkill(first);
  const second = await plane(dir, bounds);
  const b = await host(second);
  await mustCall(b, 'session.attach', { session_id: s.session_id, session_key: s.session_key });
  // NATS itself goes and comes back (its store kept): the control plane and the worker reconnect.
  await nats.stop('SIGTERM');
  await nats.restart();
  const r = await within(
    (async () => {
      // A steer during the reconnect may be answered uncertain or refused; once it is queued, it lands.
      for (;;) {
        const reply = await b.client.call('subagent.steer', { session_id: s.session_id, subagent_id: id, text: 'carry on' });
        const result = reply.result as { status?: string; steer_id?: string } | undefined;
        if (result?.status === 'queued') return result;
        await new Promise((res) => setTimeout(res, 200));
      }
    })(),
    20_000,
    'a queued steer after the NATS restart',
  );
  const done = await waitFor(b, is('subagent.complete', id), 'the entry');
  expect(done.payload).toMatchObject({ status: 'completed', summary: 'rode it out' });
  const delivered = sessionEvents(b, s.session_id).filter((e) => is('subagent.steer.delivered', id)(e));
  expect(delivered.map((e) => e.payload.steer_id)).toEqual([r.steer_id]);
}, 90_000);

it('adopts a remote child again after a SIGKILL and then a SIGTERM (its place survives the first adoption)', async () => {
  const dir = await freshStateDir();
  dirs.push(dir);
  let server = await plane(dir);
  await startWorker(nats.url);
  let h = await host(server);
  const s = await mustCall<{ session_id: string; session_key: string }>(h, 'session.create', {});
  const steps = [
    { op: 'say', text: 'up' },
    { op: 'tool', name: 'settle', ms: 100 },
    { op: 'say', text: 'waiting' },
    { op: 'wait_steer' },
    { op: 'say', text: 'steered' },
    { op: 'tool', name: 'settle again', ms: 300 },
    { op: 'finish', summary: 'twice' },
  ];
  const { subagent_ids } = await mustCall<{ subagent_ids: string[] }>(h, 'delegation.spawn', {
    session_id: s.session_id,
    tasks: [{ goal: 'twice', agent: { kind: 'scripted', steps } }],
  });
  const id = subagent_ids[0] as string;
  await waitFor(h, said(id, 'waiting'), 'the child waiting');
  await sigkill(server);
  server = await plane(dir);
  h = await host(server);
  await mustCall(h, 'session.attach', { session_id: s.session_id, session_key: s.session_key });
  await mustCall(h, 'subagent.steer', { session_id: s.session_id, subagent_id: id, text: 'go' });
  await waitFor(h, said(id, 'steered'), 'the child steered');
  // An orderly stop this time: it writes the adopted child's latest progress, which must still say where it runs.
  expect(await sigterm(server)).toMatchObject({ code: 0 });
  server = await plane(dir);
  h = await host(server);
  await mustCall(h, 'session.attach', { session_id: s.session_id, session_key: s.session_key });
  const replay = await mustCall<{ events: WireEvent[] }>(h, 'session.events.since', { session_id: s.session_id, last_seen: 0 });
  const done = replay.events.find(is('subagent.complete', id)) ?? (await waitFor(h, is('subagent.complete', id), 'the entry'));
  expect(done.payload).toMatchObject({ status: 'completed', summary: 'twice' });
}, 90_000);

it('lets go of an adopted child stopped while it waits for a slot in the new process: its entry at once, its worker drops it, its slot is free', async () => {
  const dir = await freshStateDir();
  dirs.push(dir);
  const first = await plane(dir);
  // Room for the two holders only: a child placed later runs only once one of their slots is free.
  const w = await startWorker(nats.url, ['--max-children', '2']);
  const a = await host(first);
  const s = await mustCall<{ session_id: string; session_key: string }>(a, 'session.create', {});
  // Long enough for the progress naming its worker to be written (--checkpoint-ms 20).
  const steps = [{ op: 'say', text: 'up' }, { op: 'tool', name: 'settle', ms: 200 }, { op: 'say', text: 'holding' }, { op: 'hang' }];
  const { subagent_ids } = await mustCall<{ subagent_ids: string[] }>(a, 'delegation.spawn', {
    session_id: s.session_id,
    tasks: [0, 1].map((i) => ({ goal: `holder ${i}`, agent: { kind: 'scripted', steps } })),
  });
  for (const id of subagent_ids) await waitFor(a, said(id, 'holding'), `${id} holding`);
  await sigkill(first);
  // One slot in the new process: one adopted child resumes, the other waits for it.
  const second = await plane(dir, ['--max-concurrent-children', '1']);
  const b = await host(second);
  await mustCall(b, 'session.attach', { session_id: s.session_id, session_key: s.session_key });
  const list = await mustCall<{ subagents: Array<{ subagent_id: string; status: string }> }>(b, 'subagent.list', { session_id: s.session_id });
  expect(list.subagents.map((c) => c.status).sort()).toEqual(['queued', 'running']);
  const waiting = list.subagents.find((c) => c.status === 'queued')?.subagent_id as string;
  const r = await mustCall<{ found: boolean }>(b, 'subagent.interrupt', { session_id: s.session_id, subagent_id: waiting });
  expect(r.found).toBe(true);
  const entry = await waitFor(b, is('subagent.complete', waiting), 'the waiting child’s entry');
  expect(entry.payload).toMatchObject({ status: 'interrupted', error: 'interrupted before it was resumed after a restart' });
  // It ran on, on its worker, unstopped by anything else: the worker is told to drop it.
  await w.proc.stderr.take((l) => l.includes(`dropped ${waiting}`), 20_000, 'the worker dropping the child');
  // Its slot is free on both sides: a child of another session (another queue) is placed and runs.
  const other = await mustCall<{ session_id: string }>(b, 'session.create', {});
  const next = await mustCall<{ subagent_ids: string[] }>(b, 'delegation.spawn', {
    session_id: other.session_id,
    tasks: [{ goal: 'after the drop', agent: { kind: 'scripted', steps: [{ op: 'finish', summary: 'ran' }] } }],
  });
  const ran = await waitFor(b, is('subagent.complete', next.subagent_ids[0] as string), 'the next child’s entry');
  expect(ran.payload).toMatchObject({ status: 'completed', summary: 'ran' });
}, 90_000);
