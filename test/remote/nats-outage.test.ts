// NATS itself failing: unreachable at start (one line, exit 2, for serve and worker alike), and
// lost while running (a steer without its publish ack is `queued` with `uncertain`, never an
// error; new spawns fail after the outage bound; every queued steer is accounted exactly once).
import { afterEach, describe, expect, it } from 'vitest';
import { completionEntrySchema } from '../../src/contract/wire.ts';
import { freePort, startNats, startWorker } from '../helpers/nats.ts';
import { call, connectWs, isEvent, killAll, nextEvent, request, runSubrun, scriptedTask, startWsServer, type Msg, type WireEvent } from '../helpers/process.ts';
import { wireEntry } from '../helpers/wire-entry.ts';

afterEach(async () => {
  await killAll();
});

describe('NATS unreachable at start', () => {
  it.each([
    ['serve', ['serve', '--ws', '--port', '0', '--token', 't']],
    ['worker', ['worker']],
  ])('%s exits 2 with one line', async (_name, args) => {
    const port = await freePort();
    const r = await runSubrun([...args, '--nats', `nats://127.0.0.1:${port}`]);
    expect(r.code).toBe(2);
    const lines = r.stderr.split('\n').filter((l) => l !== '');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^subrun: cannot reach NATS at nats:\/\/127\.0\.0\.1:\d+/);
    expect(r.stdout).toBe('');
  });
});

describe('NATS lost while running', () => {
  it('answers steers uncertain, fails new spawns within the bound, and accounts for every queued steer', async () => {
    const nats = await startNats();
    try {
      const srv = await startWsServer(['--nats', nats.url, '--worker-loss-ms', '800', '--nats-outage-ms', '1000']);
      const { peer } = await connectWs(srv);
      const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
      await startWorker(nats.url, ['--worker-heartbeat-ms', '100']);
      const { subagent_ids } = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', {
        session_id,
        tasks: [scriptedTask('through the outage', [{ op: 'say', text: 'up' }, { op: 'wait_steer' }, { op: 'hang' }])],
      });
      const id = subagent_ids[0] as string;
      await nextEvent(peer, (e) => e.type === 'subagent.text' && e.payload.subagent_id === id);
      const first = await call<{ status: string; steer_id: string }>(peer, 'subagent.steer', { session_id, subagent_id: id, text: 'delivered one' });
      await nextEvent(peer, (e) => e.type === 'subagent.steer.delivered' && e.payload.steer_id === first.steer_id);
      const second = await call<{ status: string; steer_id: string }>(peer, 'subagent.steer', { session_id, subagent_id: id, text: 'queued one' });
      expect(second.status).toBe('queued');

      await nats.stop('SIGTERM');
      // No publish ack: the outcome is unknown, so not an error (it may take effect) but `queued`
      // with `uncertain`, accounted like any queued steer.
      const during = await request(peer, 'subagent.steer', { session_id, subagent_id: id, text: 'during the outage' });
      expect(during.result).toMatchObject({ status: 'queued', uncertain: true, text: 'during the outage' });
      const duringId = (during.result as { steer_id: string }).steer_id;
      // A new spawn waits for a worker, then fails once the outage passes its bound.
      const late = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', { session_id, tasks: [scriptedTask('new', [{ op: 'finish' }])] });
      const lateEntry = completionEntrySchema.parse(
        wireEntry(
          (await nextEvent(peer, (e) => e.type === 'subagent.complete' && e.payload.subagent_id === late.subagent_ids[0], 20_000, 'the new spawn failing'))
            .payload,
        ),
      );
      expect(lateEntry.status).toBe('error');
      expect(lateEntry.error).toContain('NATS unavailable');

      // The running child's worker is unreachable too: it is settled as lost, every steer accounted.
      const entry = completionEntrySchema.parse(
        wireEntry((await nextEvent(peer, (e) => e.type === 'subagent.complete' && e.payload.subagent_id === id, 20_000, 'the lost entry')).payload),
      );
      expect(entry).toMatchObject({ status: 'error', exit_reason: 'worker_lost' });
      const delivered = peer.inbox.all
        .filter(isEvent)
        .map((m) => (m as Msg).params as WireEvent)
        .filter((e) => e.type === 'subagent.steer.delivered' && e.payload.subagent_id === id)
        .map((e) => e.payload.steer_id);
      expect(delivered).toEqual([first.steer_id]);
      // The mailbox cannot be read, and need not be: neither steer ever had a taken receipt (the
      // child hangs with no delivery point left), so neither can have reached the model.
      expect(entry.missed_steer_detail).toEqual([
        { steer_id: second.steer_id, text: 'queued one', maybe_delivered: false },
        { steer_id: duringId, text: 'during the outage', maybe_delivered: false },
      ]);
      expect(entry.missed_steer).toBe('queued one\nduring the outage');
    } finally {
      await nats.dispose();
    }
  });
});
