// Idempotency keys over HTTP and JSON-RPC against a real server (one key space), and the store's
// TTL and bound in-process with a manual clock.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/testing/manual-clock.ts';
import { IdempotencyStore } from '../../src/server/idempotency.ts';
import { RpcCode, RpcError } from '../../src/server/errors.ts';
import { connectWs, killAll, nextEvent, request } from '../helpers/process.ts';
import { createSession, framesUntil, nextFrame, openSse, req, scripted, startHttp, type HttpServer, type Session } from './client.ts';

let server: HttpServer;
beforeAll(async () => {
  server = await startHttp(['--max-concurrent-children', '4']);
});
afterAll(killAll);

const waiting = scripted('waits', [{ op: 'wait_steer' }, { op: 'finish', summary: 'ok' }]);
const spawnWith = (s: Session, key: string, tasks: unknown[]) =>
  req(server, 'POST', `/v1/sessions/${s.session_id}/delegations`, { key: s.session_key, body: { tasks }, headers: { 'Idempotency-Key': key } });

describe('idempotency keys over HTTP', () => {
  it('a repeated spawn returns the first answer, marked, and spawns once; other params are 409 (4015)', async () => {
    const s = await createSession(server);
    const first = await spawnWith(s, 'spawn-1', [waiting]);
    expect(first.status).toBe(202);
    expect(first.headers.get('idempotency-replayed')).toBeNull();
    const again = await spawnWith(s, 'spawn-1', [waiting]);
    expect(again.status).toBe(202);
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect(again.json).toEqual(first.json);
    const list = await req(server, 'GET', `/v1/sessions/${s.session_id}/subagents`, { key: s.session_key });
    expect(list.json.subagents).toHaveLength(1);
    const other = await spawnWith(s, 'spawn-1', [waiting, waiting]);
    expect(other.status).toBe(409);
    expect(other.json).toEqual({ error: { code: 4015, message: 'idempotency key reused with different params' } });
    // Keys are per session: another session may use the same key.
    const s2 = await createSession(server);
    const elsewhere = await spawnWith(s2, 'spawn-1', [waiting]);
    expect(elsewhere.headers.get('idempotency-replayed')).toBeNull();
    expect(elsewhere.json.delegation_id).not.toBe(first.json.delegation_id);
  });

  it('a replayed steer is the same steer: one steer_id, delivered once', async () => {
    const s = await createSession(server);
    const stream = await openSse(server, `/v1/sessions/${s.session_id}/events?session_key=${encodeURIComponent(s.session_key)}`);
    await nextFrame(stream, (f) => f.event === 'snapshot');
    const d = await spawnWith(s, 'sp', [scripted('two steers', [{ op: 'wait_steer' }, { op: 'wait_steer' }, { op: 'finish', summary: 'ok' }])]);
    const id = d.json.subagent_ids[0];
    const steer = (text: string) =>
      req(server, 'POST', `/v1/sessions/${s.session_id}/subagents/${id}/steer`, { key: s.session_key, body: { text }, headers: { 'Idempotency-Key': 'st-1' } });
    const a = await steer('go on');
    const b = await steer('go on');
    expect(b.json.steer_id).toBe(a.json.steer_id);
    expect(b.headers.get('idempotency-replayed')).toBe('true');
    expect((await steer('something else')).status).toBe(409);
    // A fresh key makes a second steer, so the child finishes: exactly one delivery for st-1's.
    await req(server, 'POST', `/v1/sessions/${s.session_id}/subagents/${id}/steer`, { key: s.session_key, body: { text: 'and finish' } });
    const frames = await framesUntil(stream, (f) => f.event === 'session.idle');
    const delivered = frames.filter((f) => f.event === 'subagent.steer.delivered').map((f) => JSON.parse(f.data ?? '').payload.steer_id);
    expect(delivered.filter((x: string) => x === a.json.steer_id)).toHaveLength(1);
    stream.close();
  });

  it('a kept domain error is replayed; interrupt and reset keep their answers', async () => {
    const s = await createSession(server);
    const none = await spawnWith(s, 'empty', []);
    expect(none.status).toBe(400);
    const noneAgain = await spawnWith(s, 'empty', []);
    expect(noneAgain.status).toBe(400);
    expect(noneAgain.headers.get('idempotency-replayed')).toBe('true');
    const d = await spawnWith(s, 'sp', [waiting]);
    const id = d.json.subagent_ids[0];
    const interrupt = () =>
      req(server, 'POST', `/v1/sessions/${s.session_id}/subagents/${id}/interrupt`, { key: s.session_key, headers: { 'Idempotency-Key': 'int' } });
    const i1 = await interrupt();
    const i2 = await interrupt();
    expect(i1.json).toEqual({ found: true, subagent_id: id, interrupted: [id] });
    expect(i2.json).toEqual(i1.json);
    expect(i2.status).toBe(200);
    const reset = () => req(server, 'POST', `/v1/sessions/${s.session_id}/reset`, { key: s.session_key, headers: { 'Idempotency-Key': 'rs' } });
    expect((await reset()).json.generation).toBe(2);
    const again = await reset();
    expect(again.json.generation).toBe(2);
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect((await req(server, 'GET', `/v1/sessions/${s.session_id}`, { key: s.session_key })).json.generation).toBe(2);
  });

  it('a bad key is 400 (-32602): empty, over 255, not visible ASCII', async () => {
    const s = await createSession(server);
    for (const key of ['x'.repeat(256), 'with space', 'tab\tkey']) {
      const r = await spawnWith(s, key, [waiting]);
      expect(r.status, key).toBe(400);
      expect(r.json.error.code).toBe(-32602);
      expect(r.json.error.data.issues[0].path).toBe('idempotency_key');
    }
    const empty = await req(server, 'POST', `/v1/sessions/${s.session_id}/delegations`, {
      key: s.session_key,
      body: { tasks: [waiting] },
      headers: { 'Idempotency-Key': '' },
    });
    expect(empty.status).toBe(400);
    expect((await spawnWith(s, 'x'.repeat(255), [waiting])).status).toBe(202);
  });
});

describe('idempotency keys over JSON-RPC, one key space with HTTP', () => {
  it('marks a replay with idempotent_replay, refuses other params with 4015, and shares keys with HTTP', async () => {
    const s = await createSession(server);
    const { peer } = await connectWs(server);
    await request(peer, 'session.attach', { session_id: s.session_id, session_key: s.session_key });
    const params = { session_id: s.session_id, tasks: [waiting], idempotency_key: 'rpc-1' };
    const first = await request(peer, 'delegation.spawn', params);
    const again = await request(peer, 'delegation.spawn', params);
    expect(again.result).toEqual({ ...(first.result as object), idempotent_replay: true });
    const other = await request(peer, 'delegation.spawn', { ...params, timeout_ms: 1000 });
    expect(other.error).toEqual({ code: 4015, message: 'idempotency key reused with different params' });
    // The same key over HTTP with the same params: the same answer.
    const http = await spawnWith(s, 'rpc-1', [waiting]);
    expect(http.headers.get('idempotency-replayed')).toBe('true');
    expect(http.json).toEqual(first.result);
    // And the other way round: a steer over HTTP, replayed over JSON-RPC.
    const id = (first.result as { subagent_ids: string[] }).subagent_ids[0] as string;
    const h = await req(server, 'POST', `/v1/sessions/${s.session_id}/subagents/${id}/steer`, {
      key: s.session_key,
      body: { text: 'go' },
      headers: { 'Idempotency-Key': 'both' },
    });
    const r = await request(peer, 'subagent.steer', { session_id: s.session_id, subagent_id: id, text: 'go', idempotency_key: 'both' });
    expect(r.result).toEqual({ ...h.json, idempotent_replay: true });
    expect((await request(peer, 'subagent.steer', { session_id: s.session_id, subagent_id: id, text: 'go', idempotency_key: '' })).error?.code).toBe(-32602);
    await nextEvent(peer, (e) => e.type === 'subagent.steer.delivered');
    await peer.close();
  });

  it('a caller without the session gets 4001, never another caller’s kept answer', async () => {
    const s = await createSession(server);
    await spawnWith(s, 'mine', [waiting]);
    const { peer } = await connectWs(server);
    const r = await request(peer, 'delegation.spawn', { session_id: s.session_id, tasks: [waiting], idempotency_key: 'mine' });
    expect(r.error?.code).toBe(4001);
    await peer.close();
  });
});

describe('the store', () => {
  it('keeps an answer for the TTL, at most N keys per session (oldest first), and not an internal error', async () => {
    const clock = new ManualClock();
    const store = new IdempotencyStore(clock, 1000, 3);
    let runs = 0;
    const run = () => ({ n: ++runs });
    expect(store.run('s', 'm', 'k', { a: 1 }, run)).toEqual({ value: { n: 1 }, replayed: false });
    expect(store.run('s', 'm', 'k', { a: 1 }, run)).toEqual({ value: { n: 1 }, replayed: true });
    // Key order does not matter: equal as parsed JSON.
    expect(store.run('s', 'm', 'k2', { a: 1, b: [1, { c: 2, d: 3 }] }, run).replayed).toBe(false);
    expect(store.run('s', 'm', 'k2', { b: [1, { d: 3, c: 2 }], a: 1 }, run).replayed).toBe(true);
    expect(store.run('s', 'other', 'k', { a: 1 }, run).replayed).toBe(false);
    expect(() => store.run('s', 'm', 'k', { a: 2 }, run)).toThrow(expect.objectContaining({ code: RpcCode.IdempotencyConflict }));
    await clock.advance(1001);
    expect(store.run('s', 'm', 'k', { a: 2 }, run).replayed).toBe(false);
    for (const k of ['x', 'y', 'z', 'w']) store.run('t', 'm', k, {}, run);
    expect(store.sizeOf('t')).toBe(3);
    expect(store.run('t', 'm', 'x', {}, run).replayed).toBe(false);
    expect(() =>
      store.run('u', 'm', 'boom', {}, () => {
        throw new Error('bug');
      }),
    ).toThrow(expect.objectContaining({ code: RpcCode.InternalError }));
    expect(store.run('u', 'm', 'boom', {}, run).replayed).toBe(false);
    store.forget('t');
    expect(store.sizeOf('t')).toBe(0);
  });

  it('keeps a digest of the params, not their text', () => {
    const store = new IdempotencyStore(new ManualClock());
    const big = 'x'.repeat(1024 * 1024);
    store.run('s', 'subagent.steer', 'k', { text: big }, () => ({ ok: true }));
    expect(store.bytesOf('s')).toBeLessThan(1024);
    // Still compared exactly: the same text replays, one character more is a conflict.
    expect(store.run('s', 'subagent.steer', 'k', { text: big }, () => ({ ok: false })).value).toEqual({ ok: true });
    expect(() => store.run('s', 'subagent.steer', 'k', { text: `${big}y` }, () => ({}))).toThrow(
      expect.objectContaining({ code: RpcCode.IdempotencyConflict }),
    );
  });

  it('a kept error holds nothing of the call that made it (its stack no longer holds the params)', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const store = new IdempotencyStore(new ManualClock());
    let ref: WeakRef<object> | undefined;
    (() => {
      const params = { text: 'x'.repeat(1024 * 1024) };
      ref = new WeakRef(params);
      expect(() =>
        store.run('s', 'subagent.steer', 'k', params, () => {
          // The params reach the handler's frame, as a method's do.
          if (params.text.length > 10) throw new RpcError(RpcCode.TextTooLong, 'text too long');
        }),
      ).toThrow(expect.objectContaining({ code: RpcCode.TextTooLong }));
    })();
    // A WeakRef target stays alive until the current job ends: collect in a later one.
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    expect(ref?.deref()).toBeUndefined();
    expect(() => store.run('s', 'subagent.steer', 'k', { text: 'x'.repeat(1024 * 1024) }, () => ({}))).toThrow(
      expect.objectContaining({ code: RpcCode.TextTooLong }),
    );
  });

  it('bounds the bytes of kept answers per session, evicting the oldest first', () => {
    const store = new IdempotencyStore(new ManualClock(), 1000, 100, 2000);
    const answer = { text: 'y'.repeat(500) };
    for (const k of ['a', 'b', 'c', 'd', 'e']) store.run('s', 'm', k, {}, () => answer);
    expect(store.bytesOf('s')).toBeLessThanOrEqual(2000);
    expect(store.sizeOf('s')).toBeLessThan(5);
    expect(store.run('s', 'm', 'e', {}, () => ({})).replayed).toBe(true);
    expect(store.run('s', 'm', 'a', {}, () => ({})).replayed).toBe(false);
    // Another session has its own budget.
    store.run('t', 'm', 'a', {}, () => answer);
    expect(store.run('t', 'm', 'a', {}, () => ({})).replayed).toBe(true);
  });

  it('expires the keys of every session on a keyed call of any session', async () => {
    const clock = new ManualClock();
    const store = new IdempotencyStore(clock, 1000);
    store.run('quiet', 'm', 'k', {}, () => ({}));
    store.run('quiet', 'm', 'k2', {}, () => ({}));
    await clock.advance(1001);
    store.run('busy', 'm', 'k', {}, () => ({}));
    expect(store.sizeOf('quiet')).toBe(0);
    expect(store.size).toBe(1);
  });

  it('keeps no answer that says "not now": internal error, shutting down or NATS unavailable (-32000), a full steer queue', async () => {
    const store = new IdempotencyStore(new ManualClock());
    for (const code of [RpcCode.InternalError, RpcCode.NatsUnavailable, RpcCode.SteerQueueFull]) {
      expect(() =>
        store.run('s', 'm', `k${code}`, {}, () => {
          throw new RpcError(code, 'not now');
        }),
      ).toThrow(expect.objectContaining({ code }));
      expect(store.run('s', 'm', `k${code}`, {}, () => ({ ok: true })).replayed, String(code)).toBe(false);
      // The same from a promise that rejects.
      await expect(store.run('s', 'm', `p${code}`, {}, () => Promise.reject(new RpcError(code, 'not now'))).value).rejects.toMatchObject({ code });
      expect(store.run('s', 'm', `p${code}`, {}, () => ({ ok: true })).replayed, String(code)).toBe(false);
    }
    // A domain error is kept, from a promise too; a settled promise is kept as its value.
    await expect(store.run('s', 'm', 'dom', {}, () => Promise.reject(new RpcError(RpcCode.NotOwned, 'no'))).value).rejects.toMatchObject({
      code: RpcCode.NotOwned,
    });
    expect(() => store.run('s', 'm', 'dom', {}, () => ({}))).toThrow(expect.objectContaining({ code: RpcCode.NotOwned }));
    expect(await store.run('s', 'm', 'val', {}, () => Promise.resolve({ v: 1 })).value).toEqual({ v: 1 });
    expect(store.run('s', 'm', 'val', {}, () => ({}))).toEqual({ value: { v: 1 }, replayed: true });
  });
});
