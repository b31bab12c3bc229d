// Malformed and hostile messages on every subject of the NATS wire: each is dropped (and logged on
// stderr) at the boundary, the receiving process keeps reading NATS, and stdout stays protocol.
// Real processes: nats-server -js, a `serve --stdio --nats` control plane, one `subrun worker`,
// and a rogue NATS client publishing on the subjects both sides listen to.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { epochOf, startNats, startWorker, type Nats, type WorkerProc } from '../helpers/nats.ts';
import { call, killAll, nextEvent, scriptedTask, startStdio, type Proc } from '../helpers/process.ts';

let nats: Nats;
let rogue: NatsConnection;
beforeAll(async () => {
  nats = await startNats();
  rogue = await connect({ servers: nats.url });
});
afterAll(async () => {
  await rogue?.close();
  await killAll();
  await nats?.dispose();
});

const bytes = (v: unknown) => new TextEncoder().encode(typeof v === 'string' ? v : JSON.stringify(v));
const huge = 'x'.repeat(900_000);

it('drops malformed messages on every subject and keeps both sides serving, stdout clean', async () => {
  const { proc, peer } = await startStdio(['--nats', nats.url]);
  const w: WorkerProc = await startWorker(nats.url);
  const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
  const steps = [{ op: 'say', text: 'ready' }, ...Array.from({ length: 40 }, () => ({ op: 'wait_steer' })), { op: 'finish', summary: 'done' }];
  const { subagent_ids } = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', { session_id, tasks: [scriptedTask('target', steps)] });
  const id = subagent_ids[0] as string;
  await nextEvent(peer, (e) => e.type === 'subagent.text' && e.payload.subagent_id === id);
  const epoch = await epochOf(rogue, w.id, id);
  const from = { epoch, worker: w.id };

  const hostile: Array<[string, unknown]> = [
    // The control plane's subjects.
    ['sr.hb.evil', { worker: 'evil', capacity: 1, children: [null] }],
    ['sr.hb.evil', { worker: 'evil', capacity: 'many', children: 'none' }],
    ['sr.hb.evil', 'not json {'],
    ['sr.hb.evil', { worker: 'evil', capacity: 1, children: [{ child: huge, epoch: 1 }] }],
    [`sr.hb.${w.id}`, { worker: w.id, capacity: 4, children: [{ child: 7, epoch: 'x' }] }],
    [`sr.ev.${id}`, { ...from, type: 'write', line: { not: 'a line' } }],
    [`sr.ev.${id}`, { ...from, type: 'tool', i: 'one', name: null }],
    [`sr.ev.${id}`, { ...from, type: 'delivered', steer_ids: null }],
    [`sr.ev.${id}`, { ...from, type: 'finish', outcome: null }],
    [`sr.ev.${id}`, { ...from, type: 'text', text: 5, padding: huge }],
    [`sr.ev.${id}`, { epoch: 'x', worker: null, type: 'write', line: 'forged' }],
    [`sr.ev.${id}`, null],
    [`sr.ev.${id}`, 'garbage'],
    [`sr.cp.${id}.spawn`, { ...from, delegation_id: 'dg_x', subagent_ids: null, tasks: [null] }],
    // The worker's subjects.
    [`sr.w.${w.id}.drop`, { children: [null] }],
    [`sr.w.${w.id}.drop`, { children: 'all' }],
    [`sr.w.${w.id}.drop`, huge],
    [`sr.w.${w.id}.assign`, { child: 'sa_x', epoch: 1, goal: 'g', agent: null }],
    [`sr.w.${w.id}.assign`, 'nope'],
    [`sr.ctl.${id}`, { op: 'interrupt', epoch: 'now' }],
    [`sr.ctl.${id}`, '{'],
    [`sr.in.${id}`, { type: 'results', delegation_id: 'dg_x', entries: null }],
  ];
  for (const [n, [subject, body]] of hostile.entries()) {
    rogue.publish(subject, bytes(body));
    await rogue.flush();
    // Right after: a steer is answered `queued` and delivered by the worker (both sides read NATS).
    const r = await call<{ status: string; steer_id: string }>(peer, 'subagent.steer', { session_id, subagent_id: id, text: `after ${n}` });
    expect(r.status, `steer after a hostile message on ${subject}`).toBe('queued');
    await nextEvent(
      peer,
      (e) => e.type === 'subagent.steer.delivered' && e.payload.steer_id === r.steer_id,
      15_000,
      `delivery after a hostile message on ${subject}`,
    );
  }
  const list = await call<{ subagents: Array<{ subagent_id: string; status: string }> }>(peer, 'subagent.list', { session_id });
  expect(list.subagents.find((s) => s.subagent_id === id)?.status).toBe('running');
  expectCleanStdout(proc, w);
  // Logged on stderr, not silently ignored.
  expect(proc.stderr.all.some((l) => l.includes('dropped a malformed NATS message'))).toBe(true);
  expect(w.proc.stderr.all.some((l) => l.includes('dropped a malformed NATS message'))).toBe(true);
}, 120_000);

function expectCleanStdout(proc: Proc, w: WorkerProc): void {
  for (const line of proc.stdout.all) expect(() => JSON.parse(line), `a stdout line of serve --stdio: ${line.slice(0, 200)}`).not.toThrow();
  expect(w.proc.stdout.all).toEqual([]);
}
