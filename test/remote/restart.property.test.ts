// SIGKILL of the control plane at seeded random moments while remote children run and hosts
// steer them; restarted on the same state directory and NATS (--store sqlite), or on a directory of
// its own (--store jetstream: the state is read back from NATS, as on another machine). The oracle, over what the host was
// told: no child it saw start was interrupted (each ends `completed`, adopted by the new process);
// every steer answered `queued` ends exactly once (delivered, or in missed_steer_detail), FIFO per
// child; the replay from the start holds each child's events once, in order. Real processes:
// nats-server -js, `serve --ws --nats --state-dir`, one `subrun worker`.
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { killAll } from '../helpers/process.ts';
import { startNats, startWorker, type Nats } from '../helpers/nats.ts';
import type { RpcReply, WireEvent } from '../helpers/rpc-client.ts';
import {
  callOrLost,
  connectHost,
  freshStateDir,
  mustCall,
  removeStateDir,
  sigkill,
  startServer,
  within,
  type Host,
  type Server,
} from '../durability/harness.ts';

let nats: Nats;
let dir: string;
const others: string[] = [];
beforeAll(async () => {
  nats = await startNats();
  dir = await freshStateDir();
  await startWorker(nats.url, ['--max-children', '16']);
}, 30_000);
afterAll(async () => {
  await killAll();
  await removeStateDir(dir);
  for (const d of others) await removeStateDir(d);
  await nats?.dispose();
});

type StoreKind = 'sqlite' | 'jetstream';

/** The control plane on `at` (the shared directory) and NATS; its progress written at most every 20 ms. */
function plane(store: StoreKind, at = dir): Promise<Server> {
  return startServer(at, ['--nats', nats.url, '--checkpoint-ms', '20', '--store', store]);
}

/** Where the restarted plane runs: the same directory, or (jetstream) one that never saw the first. */
async function restartDir(store: StoreKind): Promise<string> {
  if (store === 'sqlite') return dir;
  const other = await freshStateDir();
  others.push(other);
  return other;
}

/** Three delivery points that end by themselves (timed waits), then an end: every child finishes. */
const STEPS = [
  { op: 'say', text: 'up' },
  { op: 'wait_steer', timeout_ms: 300 },
  { op: 'tool', name: 'work', ms: 200 },
  { op: 'wait_steer', timeout_ms: 300 },
  { op: 'wait_steer', timeout_ms: 300 },
  { op: 'say', text: 'end' },
  { op: 'finish', summary: 'done' },
];

const plan = fc.record({
  store: fc.constantFrom<StoreKind>('sqlite', 'jetstream'),
  children: fc.integer({ min: 1, max: 3 }),
  /** Steers, each to a child (by index), and whether the next waits for its reply. */
  steers: fc.array(fc.record({ to: fc.nat(), awaitReply: fc.boolean() }), { minLength: 0, maxLength: 6 }),
  /** When the control plane is killed, after the spawn: before the steer with this index. */
  killBefore: fc.nat(),
  /** And how long after the spawn at the earliest (the children run meanwhile). */
  killAfterMs: fc.integer({ min: 0, max: 900 }),
});

interface Sent {
  readonly child: string;
  readonly order: number;
  reply: RpcReply | undefined;
}

it('loses no remote child and accounts every steer exactly once across control-plane SIGKILLs', async () => {
  // What the runs exercised (asserted after them: a property that never adopted proves nothing).
  let adopted = 0;
  let queuedSteers = 0;
  await fc.assert(
    fc.asyncProperty(plan, async (p) => {
      let server = await plane(p.store);
      let host: Host = await connectHost(server, 0);
      const s = await mustCall<{ session_id: string; session_key: string }>(host, 'session.create', {});
      const tasks = Array.from({ length: p.children }, (_, i) => ({ goal: `child ${i}`, agent: { kind: 'scripted', steps: STEPS } }));
      const { subagent_ids: ids } = await mustCall<{ subagent_ids: string[] }>(host, 'delegation.spawn', { session_id: s.session_id, tasks });
      const t0 = Date.now();
      const sent: Sent[] = [];
      const inFlight: Array<Promise<void>> = [];
      const killAt = p.killBefore % (p.steers.length + 1);
      let killed = false;
      const kill = async () => {
        // The random moment: no earlier than killAfterMs after the spawn.
        const wait = p.killAfterMs - (Date.now() - t0);
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        await sigkill(server);
        killed = true;
      };
      for (const [i, st] of p.steers.entries()) {
        if (i === killAt) await kill();
        if (killed) break;
        const child = ids[st.to % ids.length] as string;
        const one: Sent = { child, order: i, reply: undefined };
        sent.push(one);
        const call = callOrLost(host, 'subagent.steer', { session_id: s.session_id, subagent_id: child, text: `steer ${i}` }).then((r) => {
          one.reply = r;
        });
        inFlight.push(call);
        if (st.awaitReply) await call;
      }
      if (!killed) await kill();
      await Promise.all(inFlight);
      await host.close();

      server = await plane(p.store, await restartDir(p.store));
      host = await connectHost(server, 1);
      await mustCall(host, 'session.attach', { session_id: s.session_id, session_key: s.session_key });
      const replay = async () => (await mustCall<{ events: WireEvent[] }>(host, 'session.events.since', { session_id: s.session_id, last_seen: 0 })).events;
      // Every child ends: its entry is in the replay (before the attach) or comes live (after it).
      const settled = await replay();
      for (const id of ids) {
        const done = (e: WireEvent) => e.type === 'subagent.complete' && e.payload.subagent_id === id;
        if (!settled.some(done)) await within(host.client.waitForEvent(done), 20_000, `the entry of ${id}`);
      }
      const events = await replay();
      const seqs = events.map((e) => e.seq);
      expect(seqs).toEqual([...new Set(seqs)].sort((a, b) => a - b));
      for (const id of ids) {
        const mine = events.filter((e) => e.payload.subagent_id === id);
        const of = (type: string) => mine.filter((e) => e.type === type);
        const entries = of('subagent.complete');
        expect(entries).toHaveLength(1);
        const entry = entries[0]?.payload ?? {};
        // Seen started (before or after the kill): never interrupted, never settled as lost.
        if (of('subagent.start').length > 0) expect(entry, JSON.stringify(entry)).toMatchObject({ status: 'completed', summary: 'done' });
        if (entry.status === 'completed') adopted++;
        expect(of('subagent.start').length).toBeLessThanOrEqual(1);
        // Each event once: none lost in the gap, none applied twice across the restart.
        if (entry.status === 'completed') for (const text of ['up', 'end']) expect(of('subagent.text').filter((e) => e.payload.text === text)).toHaveLength(1);
        // Steers: each queued one exactly once; one whose answer was lost at most once.
        const delivered = of('subagent.steer.delivered').map((e) => e.payload.steer_id as string);
        const detail = (entry.missed_steer_detail as Array<{ steer_id: string }> | undefined) ?? [];
        const missed = detail.map((d) => d.steer_id);
        expect(new Set(delivered).size).toBe(delivered.length);
        expect(delivered.filter((d) => missed.includes(d))).toEqual([]);
        const queued = sent.filter((x) => x.child === id && (x.reply?.result as { status?: string } | undefined)?.status === 'queued');
        const queuedIds = queued.map((x) => (x.reply?.result as { steer_id: string }).steer_id);
        queuedSteers += queuedIds.length;
        for (const q of queuedIds) expect(delivered.includes(q) !== missed.includes(q), `steer ${q} once`).toBe(true);
        // FIFO: no queued steer delivered after an earlier one was missed.
        const first = queuedIds.findIndex((q) => missed.includes(q));
        if (first >= 0) expect(queuedIds.slice(first).filter((q) => delivered.includes(q))).toEqual([]);
      }
      await host.close();
      await sigkill(server);
    }),
    { numRuns: 12, endOnFailure: true },
  );
  expect(adopted).toBeGreaterThan(0);
  expect(queuedSteers).toBeGreaterThan(0);
}, 300_000);
