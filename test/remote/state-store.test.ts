// The JetStream store (src/remote/control/state/): the SQLite store's working copy in memory, every
// commit appended to the state log on a real nats-server -js before what waited on it goes out.
// Each test writes through one store and reads back through another opened on its own connection
// (a second control plane, on another machine as far as it can tell): what was acknowledged is
// there, in full; a fenced writer is refused by the server; big commits and torn ones; a cut log.
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { LOG_STREAM, LOG_SUBJECT, partHeaders } from '../../src/remote/control/state/codec.ts';
import { openJetStreamStore, type JetStreamStoreOptions } from '../../src/remote/control/state/open.ts';
import type { SqliteStore } from '../../src/store/sqlite.ts';
import type { SessionRow } from '../../src/store/types.ts';
import { Latch } from '../../src/remote/wait.ts';
import { startNats, type Nats } from '../helpers/nats.ts';

let nats: Nats | undefined;
const conns: NatsConnection[] = [];
const stores: SqliteStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) s.abandon();
  for (const c of conns.splice(0)) await c.close().catch(() => undefined);
  await nats?.dispose();
  nats = undefined;
});

/** A log whose lines can be waited for. */
function tap(): { logger: pino.Logger; next: (msg: RegExp) => Promise<void> } {
  const waiters: Array<{ msg: RegExp; latch: Latch }> = [];
  const logger = pino(
    { level: 'debug' },
    {
      write: (s: string) => {
        const msg = String((JSON.parse(s) as { msg?: unknown }).msg);
        for (const w of waiters) if (w.msg.test(msg)) w.latch.open();
      },
    },
  );
  return {
    logger,
    next: (msg) => {
      const latch = new Latch();
      waiters.push({ msg, latch });
      return latch.promise;
    },
  };
}

async function open(over: Partial<JetStreamStoreOptions> = {}): Promise<{ store: SqliteStore; fenced: string[]; loaded: { batches: number } }> {
  if (!nats) throw new Error('no nats');
  const nc = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  conns.push(nc);
  const fenced: string[] = [];
  const opened = await openJetStreamStore({
    js: jetstream(nc),
    jsm: await jetstreamManager(nc),
    logger: pino({ level: 'silent' }),
    onFenced: (why) => fenced.push(why),
    ...over,
  });
  stores.push(opened.store);
  return { store: opened.store, fenced, loaded: opened.loaded };
}

const session = (id: string, seq = 0): SessionRow => ({
  session_id: id,
  key_digest: Buffer.from(`digest of ${id}`),
  title: `title ${id}`,
  created_at: 1000,
  generation: 1,
  close_on_disconnect: false,
  seq,
  turn_running: false,
});

const child = (id: string) => ({
  subagent_id: id,
  parent_id: null,
  depth: 0,
  delegation_id: 'd1',
  task_index: 0,
  task_count: 1,
  goal: `goal of ${id}`,
  context: undefined,
  agent: 'default' as const,
  model: 'scripted',
  owner: { session_id: 's1', transport: 't', generation: 1 },
  timeout_ms: undefined,
  revived_from: undefined,
});

/** Commits what is queued and waits until the log has it. */
async function committed(store: SqliteStore): Promise<void> {
  store.flush();
  await store.settled();
}

describe('the JetStream store', () => {
  it('gives a second control plane everything the first one committed', async () => {
    nats = await startNats();
    const a = await open();
    a.store.sessionSaved(session('s1'));
    a.store.eventAppended('s1', 1, '{"e":1}');
    a.store.eventAppended('s1', 2, '{"e":2}');
    a.store.spawned(child('c1'));
    a.store.started('c1', 5);
    a.store.steerAccepted('c1', { steer_id: 'st1', seq: 1, text: 'left' }, 6);
    a.store.steerAccepted('c1', { steer_id: 'st2', seq: 2, text: 'right' }, 7);
    a.store.steersTaken('c1', ['st1']);
    a.store.progress('c1', 'the tail', { step: 3 });
    a.store.moveCursor('worker_events', 42);
    await committed(a.store);
    const epoch = a.store.replay_epoch;

    const b = await open();
    expect(b.store.replay_epoch).toBe(epoch);
    expect(b.store.loadSessions()).toEqual([session('s1', 2)]);
    expect(b.store.loadEvents('s1')).toEqual([
      { seq: 1, text: '{"e":1}' },
      { seq: 2, text: '{"e":2}' },
    ]);
    const [c1] = b.store.unfinished();
    expect(c1).toMatchObject({ subagent_id: 'c1', status: 'running', tail: 'the tail', checkpoint: { step: 3 } });
    expect(c1?.steers.map((s) => [s.steer_id, s.state])).toEqual([
      ['st1', 'taken'],
      ['st2', 'queued'],
    ]);
    expect(b.store.cursor('worker_events')).toBe(42);
  });

  it('sends nothing that waited on a commit before the log stored it, and refuses writes while it cannot', async () => {
    nats = await startNats();
    const a = await open();
    await nats.stop();
    a.store.sessionSaved(session('s1'));
    let delivered = false;
    a.store.afterCommit(() => {
      delivered = true;
    });
    a.store.flush();
    // The reply of a method waits here: it is refused once the append fails, the write stands.
    await expect(a.store.settled()).rejects.toThrow('store unavailable');
    expect(delivered).toBe(false);
    expect(a.store.available).toBe(false);
    await nats.restart();
    // Retried every second until it is stored: then what waited goes, and writes are taken again.
    await new Promise<void>((resolve) => a.store.afterCommit(resolve));
    expect(delivered).toBe(true);
    expect(a.store.available).toBe(true);
    const b = await open();
    expect(b.store.loadSessions().map((s) => s.session_id)).toEqual(['s1']);
  });

  it('fences a plane that lost the log: its next append is refused by the server, and never read back', async () => {
    nats = await startNats();
    const a = await open();
    a.store.sessionSaved(session('s1'));
    await committed(a.store);
    const b = await open();
    a.store.sessionSaved(session('from-a'));
    a.store.flush();
    await expect(a.store.settled()).rejects.toThrow('store unavailable');
    expect(a.fenced).toHaveLength(1);
    expect(a.fenced[0]).toMatch(/another control plane wrote the state log/);
    expect(a.store.available).toBe(false);
    b.store.sessionSaved(session('from-b'));
    await committed(b.store);
    const c = await open();
    expect(
      c.store
        .loadSessions()
        .map((s) => s.session_id)
        .sort(),
    ).toEqual(['from-b', 's1']);
  });

  it('stores a commit bigger than a NATS message as parts, and skips a run of parts a crash cut off', async () => {
    nats = await startNats();
    const a = await open();
    a.store.sessionSaved(session('s1'));
    const big = `"${'x'.repeat(1_500_000)}"`;
    a.store.eventAppended('s1', 1, big);
    await committed(a.store);
    a.store.abandon();
    // A writer that died after the first of two parts: that commit never finished.
    const nc = await connect({ servers: nats.url });
    conns.push(nc);
    const jsm = await jetstreamManager(nc);
    const last = (await jsm.streams.info(LOG_STREAM)).state.last_seq;
    await jetstream(nc).publish(LOG_SUBJECT, Buffer.from('[["closedSession","s1"],'), {
      expect: { lastSequence: last },
      headers: partHeaders({ id: 'dead.1', index: 0, count: 2 }),
    });
    const b = await open();
    expect(b.store.loadEvents('s1')).toEqual([{ seq: 1, text: big }]);
    expect(b.store.loadSessions()).toHaveLength(1);
    // Written after the torn run: read back in order.
    b.store.eventAppended('s1', 2, '"after"');
    await committed(b.store);
    const c = await open();
    expect(c.store.loadEvents('s1').map((e) => e.seq)).toEqual([1, 2]);
  });

  it('cuts the log behind a snapshot, and a later start reads the snapshot and the rest of the log', async () => {
    nats = await startNats();
    const { logger, next } = tap();
    const a = await open({ logger, snapshot_every: { messages: 8, bytes: 1 << 30 } });
    const snapped = next(/state snapshot stored/);
    a.store.sessionSaved(session('s1'));
    for (let seq = 1; seq <= 20; seq++) {
      a.store.eventAppended('s1', seq, `{"n":${seq}}`);
      await committed(a.store);
    }
    await snapped;
    const nc = await connect({ servers: nats.url });
    conns.push(nc);
    const state = (await (await jetstreamManager(nc)).streams.info(LOG_STREAM)).state;
    expect(state.first_seq).toBeGreaterThan(1);
    expect(state.messages).toBeLessThan(21);
    const b = await open();
    expect(b.loaded.batches).toBeLessThan(21);
    expect(b.store.loadEvents('s1').map((e) => e.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  });
});
