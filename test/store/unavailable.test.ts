// The store cannot write (../shared/design/durability.md, promise 7): writes answer -32002 `store
// unavailable` (HTTP 503 with Retry-After: 1) and change nothing, reads keep answering from
// memory, the server never throws, and once the store can write again (it retries every second)
// the next write succeeds. In process, on a real SQLite file, with the store's own test seam: its
// `beforeCommit` throws while `failing` is set, an injected write error at commit (what a full disk
// or a read-only file does to a commit). The first write that meets the failure ran before its
// commit failed: it answers -32002 with `maybe_applied` (protocol.md), and its change stands once
// the store can write; every write after it is refused before it runs and leaves no trace.
//
// A read-only directory is not covered here: these tests run as root, whom file modes do not stop.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createHttpApi } from '../../src/http/api.ts';
import { RpcServer } from '../../src/rpc/server.ts';
import { listenWs } from '../../src/rpc/transports/ws.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { WAIT_MS } from '../helpers/process.ts';
import { connectMemory, fails, isEvent, ok, type RpcTestClient, type WireEvent } from '../helpers/rpc-client.ts';

const TOKEN = 'unavailable-token';
const STORE_DOWN = 'store unavailable: writes are refused until it can write again';
const STORE_UP = 'store available again';

interface LogRecord {
  readonly level: number;
  readonly msg: string;
}

/** Every log line of the server and its store, with an event-driven wait for one. */
class LogTap {
  readonly records: LogRecord[] = [];
  readonly logger: Logger;
  #waiters: Array<{ msg: string; resolve: () => void }> = [];

  constructor(onRecord: (r: LogRecord) => void) {
    this.logger = pino(
      { level: 'warn' },
      {
        write: (line: string) => {
          const r = JSON.parse(line) as LogRecord;
          this.records.push(r);
          onRecord(r);
          this.#waiters = this.#waiters.filter((w) => (w.msg === r.msg ? (w.resolve(), false) : true));
        },
      },
    );
  }

  /** Resolves once a line with `msg` is logged after this call (bounded). */
  next(msg: string): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
      new Promise<void>((resolve) => this.#waiters.push({ msg, resolve })),
      new Promise<never>((_r, reject) => (timer = setTimeout(() => reject(new Error(`no log line "${msg}" within ${WAIT_MS} ms`)), WAIT_MS))),
    ]).finally(() => clearTimeout(timer));
  }

  /** The messages logged at error level or above. */
  errors(): string[] {
    return this.records.filter((r) => r.level >= 50).map((r) => r.msg);
  }
}

interface Rig {
  readonly server: RpcServer;
  readonly store: SqliteStore;
  readonly client: RpcTestClient;
  readonly log: LogTap;
  /** While true, every commit of the store fails. */
  failing: boolean;
  /** How many events the client had when the store said it can write again. */
  eventsWhenUp: number | undefined;
}

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function rig(): Rig {
  const dir = mkdtempSync(join(tmpdir(), 'subrun-unavailable-'));
  const r = { failing: false, eventsWhenUp: undefined } as { failing: boolean; eventsWhenUp: number | undefined; client?: RpcTestClient };
  // Synchronous with the store's transition: what the client had before it could write again.
  const log = new LogTap((rec) => {
    if (rec.msg === STORE_UP && r.eventsWhenUp === undefined) r.eventsWhenUp = r.client?.events.length;
  });
  const store = SqliteStore.open(dir, {
    logger: log.logger,
    beforeCommit: () => {
      if (r.failing) throw new Error('injected write error: no space left on device');
    },
  });
  const server = new RpcServer({ store, logger: log.logger });
  const { client, close } = connectMemory(server);
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  cleanups.push(() => store.close());
  cleanups.push(async () => {
    close();
    await server.shutdown();
  });
  r.client = client;
  return Object.assign(r, { server, store, client, log });
}

const agent = (...steps: Array<Record<string, unknown>>) => ({ kind: 'scripted', steps });
/** Waits for one steer, then says so and finishes. */
const WAITER = agent({ op: 'say', text: 'up' }, { op: 'wait_steer' }, { op: 'say', text: 'woke' }, { op: 'finish' });

async function spawnWaiter(client: RpcTestClient, session_id: string, goal: string): Promise<{ id: string; delegation_id: string }> {
  const s = await ok(client, 'delegation.spawn', { session_id, tasks: [{ goal, agent: WAITER }] });
  const id = s.subagent_ids[0]!;
  await client.waitForEvent((e) => isEvent('subagent.text', id)(e) && e.payload.text === 'up');
  return { id, delegation_id: s.delegation_id };
}

const unavailable = { code: -32002, message: 'store unavailable' };

describe('the store cannot write', () => {
  it('writes answer -32002 and leave no trace, reads answer from memory, and the next write after it can write again succeeds', async () => {
    const r = rig();
    const { client, store } = r;
    const s = await ok(client, 'session.create', {});
    const sid = s.session_id;
    const maybe = await spawnWaiter(client, sid, 'takes the steer that met the failure');
    const waiter = await spawnWaiter(client, sid, 'never sees the refused one');

    r.failing = true;
    const down = r.log.next(STORE_DOWN);
    // The first write to meet the failure: it ran, its commit failed.
    expect(await fails(client, 'subagent.steer', { session_id: sid, subagent_id: maybe.id, text: 'maybe applied' })).toEqual({
      ...unavailable,
      data: { maybe_applied: true },
    });
    await down;
    expect(store.available).toBe(false);

    // Every write now is refused before it runs.
    expect(await fails(client, 'session.create', {})).toEqual(unavailable);
    expect(await fails(client, 'delegation.spawn', { session_id: sid, tasks: [{ goal: 'never spawned', agent: WAITER }] })).toEqual(unavailable);
    expect(await fails(client, 'subagent.steer', { session_id: sid, subagent_id: waiter.id, text: 'refused steer' })).toEqual(unavailable);
    expect(await fails(client, 'subagent.steer', { session_id: sid, subagent_id: waiter.id, text: 'refused steer', idempotency_key: 'k' })).toEqual(
      unavailable,
    );
    expect(await fails(client, 'subagent.interrupt', { session_id: sid, subagent_id: waiter.id })).toEqual(unavailable);

    // Reads keep answering, from memory.
    const listed = await ok(client, 'subagent.list', { session_id: sid });
    expect(listed.subagents.map((c) => [c.subagent_id, c.status])).toEqual(expect.arrayContaining([[waiter.id, 'running']]));
    expect((await ok(client, 'subagent.tail', { session_id: sid, subagent_id: waiter.id })).text).toContain('[text] up');
    expect((await ok(client, 'session.events.since', { session_id: sid, session_key: s.session_key, last_seen: 0 })).events.length).toBeGreaterThan(0);
    expect(await ok(client, 'delegation.result', { session_id: sid, delegation_id: waiter.delegation_id })).toMatchObject({ done: false });
    expect(await ok(client, 'server.info', {})).toMatchObject({ durable: true });
    expect(store.available, 'a read does not make the store able to write').toBe(false);

    // The store tries again on its own (every second, and with any commit the children schedule):
    // nothing is called until it says it can write.
    r.failing = false;
    await r.log.next(STORE_UP);
    expect(store.available).toBe(true);
    const mark = r.eventsWhenUp!;

    // The steer that ran before the failure stands: delivered, but told to no transport before it was written.
    const delivered = await client.waitForEvent((e) => isEvent('subagent.steer.delivered', maybe.id)(e));
    expect(delivered.payload.text).toBe('maybe applied');
    expect(client.events.indexOf(delivered), 'sent only once persisted').toBeGreaterThanOrEqual(mark);
    await client.waitForEvent(isEvent('subagent.complete', maybe.id));

    // The next write succeeds; the refused steer is nowhere: not delivered, not missed.
    const steer = await ok(client, 'subagent.steer', { session_id: sid, subagent_id: waiter.id, text: 'real steer' });
    expect(steer).toMatchObject({ status: 'queued' });
    const done = await client.waitForEvent(isEvent('subagent.complete', waiter.id));
    expect(done.payload).toMatchObject({ status: 'completed', summary: 'woke' });
    expect(done.payload.missed_steer).toBeUndefined();
    expect(done.payload.missed_steer_detail).toBeUndefined();
    const deliveredToWaiter = client.events.filter((e: WireEvent) => isEvent('subagent.steer.delivered', waiter.id)(e)).map((e) => e.payload.text);
    expect(deliveredToWaiter).toEqual(['real steer']);
    const tail = (await ok(client, 'subagent.tail', { session_id: sid, subagent_id: waiter.id })).text;
    expect(tail).toContain('[steer] real steer');
    expect(tail).not.toContain('refused steer');
    // The key of the refused keyed steer was not kept: used again, it runs (the child has finished).
    expect(await ok(client, 'subagent.steer', { session_id: sid, subagent_id: waiter.id, text: 'refused steer', idempotency_key: 'k' })).toMatchObject({
      status: 'rejected',
    });

    // Every other write works again; what was refused was never written.
    const later = await ok(client, 'session.create', {});
    await ok(client, 'delegation.spawn', { session_id: later.session_id, tasks: [{ goal: 'after', agent: agent({ op: 'finish' }) }] });
    expect(store.stats()).toMatchObject({ sessions: 2, delegations: 3, children: 3 });
    expect(r.log.errors(), 'nothing failed but the store, once').toEqual([STORE_DOWN]);
  });

  it('a session.create that meets the failure answers -32002 maybe_applied; the store retries a second later and writes it', async () => {
    const r = rig();
    const { client, store } = r;
    r.failing = true;
    const failedAt = Date.now();
    expect(await fails(client, 'session.create', { title: 'met the failure' })).toEqual({ ...unavailable, data: { maybe_applied: true } });
    expect(await fails(client, 'session.create', { title: 'refused' })).toEqual(unavailable);
    expect(await ok(client, 'ping', {})).toEqual({ pong: true });
    // Let the commit the create scheduled for the end of its turn run (and fail): from here on,
    // with nothing else writing, only the store's own retry can find that it can write again.
    await new Promise<void>((resolve) => setImmediate(resolve));
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(store.available).toBe(false);
    r.failing = false;
    await r.log.next(STORE_UP);
    // Retried a second after the failure (what Retry-After: 1 tells an HTTP client); a timer may fire a little early.
    expect(Date.now() - failedAt).toBeGreaterThanOrEqual(900);
    const s = await ok(client, 'session.create', { title: 'after' });
    expect(s.session_id).toMatch(/^ses_/);
    // The one that ran stands (its answer was lost, as a crash would lose it); the refused one was never made.
    expect(store.stats().sessions).toBe(2);
  });
});

describe('over HTTP', () => {
  it('a steer while the store cannot write is 503 with Retry-After: 1; a read is 200; once it can write, 202', async () => {
    const r = rig();
    const { client, server, log } = r;
    const http = createHttpApi(server, { token: TOKEN, logger: log.logger });
    const listener = await listenWs(
      {
        host: '127.0.0.1',
        port: 0,
        token: TOKEN,
        allow_origins: [],
        max_message_bytes: server.limits.max_message_bytes,
        logger: log.logger,
        onRequest: http.handle,
      },
      (t) => server.connect(t),
    );
    cleanups.push(() => listener.close());
    const base = listener.url.replace(/^ws:/, 'http:').replace(/\/$/, '');
    const s = await ok(client, 'session.create', {});
    const child = await spawnWaiter(client, s.session_id, 'steered over HTTP');
    const post = (text: string) =>
      fetch(`${base}/v1/sessions/${s.session_id}/subagents/${child.id}/steer`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${TOKEN}`, 'X-Subrun-Session-Key': s.session_key, 'Content-Type': 'application/json' },
        body: JSON.stringify({ text }),
        signal: AbortSignal.timeout(WAIT_MS),
      });

    r.failing = true;
    // Any write meets the failure first (over JSON-RPC here); then the store is unavailable.
    await fails(client, 'session.create', {});
    expect(r.store.available).toBe(false);
    const refused = await post('refused over HTTP');
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await refused.json()).toEqual({ error: unavailable });
    const read = await fetch(`${base}/v1/sessions/${s.session_id}/subagents`, {
      headers: { Authorization: `Bearer ${TOKEN}`, 'X-Subrun-Session-Key': s.session_key },
      signal: AbortSignal.timeout(WAIT_MS),
    });
    expect(read.status).toBe(200);

    r.failing = false;
    await log.next(STORE_UP);
    const accepted = await post('after');
    expect(accepted.status).toBe(202);
    const done = await client.waitForEvent(isEvent('subagent.complete', child.id));
    expect(done.payload.missed_steer_detail).toBeUndefined();
    expect(client.events.filter((e) => isEvent('subagent.steer.delivered', child.id)(e)).map((e) => e.payload.text)).toEqual(['after']);
  });
});
