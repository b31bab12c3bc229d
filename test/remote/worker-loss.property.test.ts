// SIGKILL of a worker in the middle of steers: whatever the kill point and however the steers
// interleave with it and with the children's delivery points, every steer a host was told `queued`
// ends exactly once (a `subagent.steer.delivered` event, or the entry's missed_steer_detail), FIFO
// per child (never missed while a later one to the same child was delivered), and maybe_delivered
// only where a taken receipt can have been granted: on the lost worker's child, for a steer
// accepted before the kill, that had a delivery point after it. The other worker's child loses
// nothing. Real processes: nats-server -js, one control plane, two fresh workers per run.
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { completionEntrySchema, type CompletionEntry } from '../../src/contract/wire.ts';
import { startNats, startWorker, type Nats, type WorkerProc } from '../helpers/nats.ts';
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
let peer: WsPeer;
let session_id: string;

beforeAll(async () => {
  nats = await startNats();
  const srv = await startWsServer(['--nats', nats.url, '--worker-loss-ms', '400']);
  peer = (await connectWs(srv)).peer;
  session_id = (await call<{ session_id: string }>(peer, 'session.create')).session_id;
}, 30_000);

afterAll(async () => {
  await killAll();
  await nats?.dispose();
});

const plan = fc.record({
  /** Delivery points each child has before it hangs (each delivers everything granted by then). */
  deliveries: fc.integer({ min: 0, max: 3 }),
  steers: fc.integer({ min: 1, max: 6 }),
  /** Steers sent before the kill (the rest go while the worker is dead, before the loss is noticed). */
  killAfter: fc.nat(),
  /** Which child each steer goes to (0: on the worker that is killed, 1: on the one that lives). */
  to: fc.array(fc.integer({ min: 0, max: 1 }), { minLength: 6, maxLength: 6 }),
  /** Before each steer, whether to wait for the previous one's reply (else they are in flight together). */
  awaitReply: fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }),
});

interface Sent {
  readonly child: 0 | 1;
  readonly afterKill: boolean;
  readonly reply: Promise<Msg>;
}

const eventsOf = (id: string): WireEvent[] =>
  peer.inbox.all
    .filter(isEvent)
    .map((m) => (m as Msg).params as WireEvent)
    .filter((e) => e.payload.subagent_id === id);

async function entryOf(id: string): Promise<CompletionEntry> {
  const e = await nextEvent(peer, (x) => x.type === 'subagent.complete' && x.payload.subagent_id === id, 15_000, `the entry of ${id}`);
  return completionEntrySchema.parse(wireEntry(e.payload));
}

async function startChild(goal: string, steps: unknown[]): Promise<string> {
  const { subagent_ids } = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', { session_id, tasks: [scriptedTask(goal, steps)] });
  const id = subagent_ids[0] as string;
  await nextEvent(peer, (e) => e.type === 'subagent.text' && e.payload.subagent_id === id, 15_000, `${goal} up`);
  return id;
}

it('accounts every queued steer exactly once, in FIFO order, with exact fates, across a worker SIGKILL', async () => {
  await fc.assert(
    fc.asyncProperty(plan, async (p) => {
      const steps = [{ op: 'say', text: 'up' }, ...Array.from({ length: p.deliveries }, () => ({ op: 'wait_steer' })), { op: 'hang' }];
      // One worker at a time, so each child lands where the plan says.
      const doomed: WorkerProc = await startWorker(nats.url, ['--worker-heartbeat-ms', '100', '--max-children', '1']);
      const victim = await startChild('victim', steps);
      const survivor_worker = await startWorker(nats.url, ['--worker-heartbeat-ms', '100', '--max-children', '1']);
      // The doomed worker is full (1 of 1): the survivor can only run on the new one.
      const survivor = await startChild('survivor', steps);
      const ids = [victim, survivor] as const;

      const killAt = p.killAfter % (p.steers + 1);
      const sent: Sent[] = [];
      let killed: Promise<void> | undefined;
      let dead = false;
      for (let i = 0; i < p.steers; i++) {
        if (i === killAt) killed = doomed.proc.kill().then(() => void (dead = true));
        if (p.awaitReply[i] && sent.length > 0) await sent[sent.length - 1]?.reply;
        const child = (p.to[i] ?? 0) as 0 | 1;
        sent.push({ child, afterKill: dead, reply: request(peer, 'subagent.steer', { session_id, subagent_id: ids[child], text: `steer ${i}` }) });
      }
      killed ??= doomed.proc.kill();
      await killed;
      const answered = await Promise.all(sent.map((s) => s.reply));
      const lost = await entryOf(victim);
      await call(peer, 'subagent.interrupt', { session_id, subagent_id: survivor });
      const kept = await entryOf(survivor);
      await survivor_worker.proc.kill();

      expect(lost).toMatchObject({ status: 'error', exit_reason: 'worker_lost' });
      expect(kept.status, JSON.stringify(kept)).toBe('interrupted');
      for (const [c, entry] of [lost, kept].entries()) {
        const id = ids[c] as string;
        // This child's queued steers, in acceptance order (one connection: the order they were sent).
        const queued = sent.flatMap((s, i) => {
          const r = answered[i]?.result as { status?: string; steer_id?: string } | undefined;
          return s.child === c && r?.status === 'queued' && r.steer_id ? [{ steer_id: r.steer_id, afterKill: s.afterKill }] : [];
        });
        const delivered = eventsOf(id)
          .filter((e) => e.type === 'subagent.steer.delivered')
          .map((e) => e.payload.steer_id as string);
        const detail = entry.missed_steer_detail ?? [];
        const missed = detail.map((d) => d.steer_id);
        // Exactly once: none both delivered and missed, none twice, none lost, none invented.
        expect(new Set(delivered).size).toBe(delivered.length);
        expect(new Set(missed).size).toBe(missed.length);
        expect([...delivered, ...missed].sort()).toEqual(queued.map((q) => q.steer_id).sort());
        // FIFO: once a steer is missed, no steer accepted after it was delivered.
        const order = queued.map((q) => q.steer_id);
        const firstMissed = order.findIndex((s) => missed.includes(s));
        if (firstMissed >= 0) expect(order.slice(firstMissed).filter((s) => delivered.includes(s))).toEqual([]);
        // maybe_delivered only on the lost worker's child, for a steer accepted before the kill,
        // when the child had a delivery point it could reach.
        for (const d of detail) {
          if (!d.maybe_delivered) continue;
          expect(c).toBe(0);
          expect(p.deliveries).toBeGreaterThan(0);
          expect(queued.find((q) => q.steer_id === d.steer_id)?.afterKill).toBe(false);
        }
        // The plain text keeps its meaning: the missed texts in acceptance order.
        if (missed.length > 0) expect(entry.missed_steer).toBe(detail.map((d) => d.text).join('\n'));
        else expect(entry.missed_steer).toBeUndefined();
      }
      // Every reply was an answer: queued, rejected (the child had finished), never a silent drop.
      for (const r of answered) expect(r.result ?? r.error).toBeDefined();
    }),
    { numRuns: 12, endOnFailure: true },
  );
}, 300_000);
