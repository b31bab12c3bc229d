// SIGKILL of a worker in the middle of steers: whatever the kill point and however the steers
// interleave with it and with the child's delivery points, every steer a host was told `queued`
// ends exactly once: delivered (a `subagent.steer.delivered` event) or in the entry's
// missed_steer_detail (maybe_delivered only if the worker had fetched it and never acked).
// Real processes: nats-server -js, one control plane, one fresh worker per run (bounded runs).
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
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
  /** Delivery points the child has before it hangs (each delivers everything fetched by then). */
  deliveries: fc.integer({ min: 0, max: 3 }),
  steers: fc.integer({ min: 1, max: 5 }),
  /** Steers sent before the kill (the rest go while the worker is dead, before the loss is noticed). */
  killAfter: fc.nat(),
  /** Before each steer, whether to wait for the previous one's reply (else they are in flight together). */
  awaitReply: fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }),
});

it('reconciles every accepted steer exactly once across a worker SIGKILL', async () => {
  await fc.assert(
    fc.asyncProperty(plan, async (p) => {
      const worker = await startWorker(nats.url, ['--worker-heartbeat-ms', '100']);
      const steps = [{ op: 'say', text: 'up' }, ...Array.from({ length: p.deliveries }, () => ({ op: 'wait_steer' })), { op: 'hang' }];
      const { subagent_ids } = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', { session_id, tasks: [scriptedTask('victim', steps)] });
      const id = subagent_ids[0] as string;
      await nextEvent(peer, (e) => e.type === 'subagent.text' && e.payload.subagent_id === id, 15_000, 'the child up');

      const killAt = p.killAfter % (p.steers + 1);
      const replies: Array<Promise<Msg>> = [];
      let killed: Promise<void> | undefined;
      for (let i = 0; i < p.steers; i++) {
        if (i === killAt) killed = worker.proc.kill();
        if (p.awaitReply[i] && replies.length > 0) await replies[replies.length - 1];
        replies.push(request(peer, 'subagent.steer', { session_id, subagent_id: id, text: `steer ${i}` }));
      }
      if (!killed) killed = worker.proc.kill();
      await killed;
      const answered = await Promise.all(replies);
      const entryEvent = await nextEvent(peer, (e) => e.type === 'subagent.complete' && e.payload.subagent_id === id, 15_000, 'the lost entry');
      const entry = completionEntrySchema.parse(wireEntry(entryEvent.payload));

      const queued = answered
        .filter((r) => (r.result as { status?: string } | undefined)?.status === 'queued')
        .map((r) => (r.result as { steer_id: string }).steer_id);
      const delivered = peer.inbox.all
        .filter(isEvent)
        .map((m) => (m as Msg).params as WireEvent)
        .filter((e) => e.type === 'subagent.steer.delivered' && e.payload.subagent_id === id)
        .map((e) => e.payload.steer_id as string);
      const missed = (entry.missed_steer_detail ?? []).map((d) => d.steer_id);

      expect(entry).toMatchObject({ status: 'error', exit_reason: 'worker_lost' });
      // Exactly once: no steer both delivered and missed, none twice, none lost, none invented.
      expect(new Set(delivered).size).toBe(delivered.length);
      expect(new Set(missed).size).toBe(missed.length);
      expect(delivered.filter((s) => missed.includes(s))).toEqual([]);
      expect([...delivered, ...missed].sort()).toEqual([...queued].sort());
      // The plain text keeps its meaning: the missed texts in acceptance order.
      if (missed.length > 0) expect(entry.missed_steer).toBe((entry.missed_steer_detail ?? []).map((d) => d.text).join('\n'));
      else expect(entry.missed_steer).toBeUndefined();
      // Every reply was an answer: queued, rejected (the child had finished), or never a silent drop.
      for (const r of answered) expect(r.result ?? r.error).toBeDefined();
    }),
    { numRuns: 10, endOnFailure: true },
  );
}, 240_000);
