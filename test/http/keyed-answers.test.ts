// Keyed and asynchronous answers, with a runner the test controls (when steers are committed, when
// they are taken). Answers that come as promises: a steer to a child whose runner commits steers asynchronously
// (a remote worker's runner resolves once the steer is in the child's mailbox, as under --nats)
// answers once committed. Over HTTP the answer is shaped from the settled value; with an
// idempotency key the settled answer is kept (and replayed whole), a "not now" rejection is not.
// A full steer queue (4005, "wait and retry") is not kept either: once the child took its steers,
// a retry with the same key queues. In process, so the runner's commit can be told to succeed or
// fail and its queue drained at a chosen point; over a real listener on 127.0.0.1 for HTTP, and
// an in-memory JSON-RPC connection.
import { afterEach, describe, expect, it } from 'vitest';
import type { RunOutcome, Runner, RunnerContext, SteerCommit } from '../../src/types.ts';
import { createHttpApi } from '../../src/http/api.ts';
import { silentLogger } from '../../src/log.ts';
import { RpcCode } from '../../src/server/errors.ts';
import { RpcServer } from '../../src/rpc/server.ts';
import { listenWs, type WsListener } from '../../src/rpc/transports/ws.ts';
import { connectMemory, type MemoryEndpoint } from '../helpers/rpc-client.ts';
import { WAIT_MS } from '../helpers/process.ts';

const TOKEN = 'async-answers-token';

/** A runner that takes steers and commits each as `commit` says: stored, or refused (bus down). */
class CommittingRunner implements Runner {
  readonly model = 'committing';
  commit: 'ok' | 'fail' = 'ok';
  commits = 0;
  #ctx: RunnerContext | undefined;
  onSteer(): void {}
  /** Takes every queued steer, as a runner does at a safe point. */
  drain(): void {
    const ctx = this.#ctx as RunnerContext;
    ctx.confirmDelivered(ctx.takeSteers());
  }
  committed(): Promise<SteerCommit> {
    this.commits++;
    return Promise.resolve(this.commit === 'ok' ? 'stored' : 'refused');
  }
  async run(ctx: RunnerContext): Promise<RunOutcome> {
    this.#ctx = ctx;
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
    return { status: 'interrupted', summary: '' };
  }
}

interface Rig {
  readonly server: RpcServer;
  readonly runner: CommittingRunner;
  readonly base: string;
  readonly rpc: MemoryEndpoint;
  readonly session_id: string;
  readonly session_key: string;
  readonly child: string;
}

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function rig(max_queued_steers?: number): Promise<Rig> {
  const runner = new CommittingRunner();
  const server = new RpcServer({ default_runner: runner, logger: silentLogger, runtime: { max_queued_steers } });
  const http = createHttpApi(server, { token: TOKEN, logger: silentLogger });
  const listener: WsListener = await listenWs(
    {
      host: '127.0.0.1',
      port: 0,
      token: TOKEN,
      allow_origins: [],
      max_message_bytes: server.limits.max_message_bytes,
      logger: silentLogger,
      onRequest: http.handle,
    },
    (t) => server.connect(t),
  );
  const rpc = connectMemory(server);
  cleanups.push(async () => {
    rpc.close();
    await server.shutdown();
    await listener.close();
  });
  const s = await rpc.client.result<{ session_id: string; session_key: string }>('session.create', {});
  const d = await rpc.client.result<{ subagent_ids: string[] }>('delegation.spawn', { session_id: s.session_id, tasks: [{ goal: 'wait for steers' }] });
  const child = d.subagent_ids[0] as string;
  await rpc.client.waitForEvent((e) => e.type === 'subagent.start' && (e.payload as { subagent_id?: string }).subagent_id === child);
  return { server, runner, base: `http://127.0.0.1:${listener.port}`, rpc, session_id: s.session_id, session_key: s.session_key, child };
}

async function steerHttp(r: Rig, text: string, key?: string): Promise<{ status: number; replayed: string | null; json: Record<string, unknown> }> {
  const res = await fetch(`${r.base}/v1/sessions/${r.session_id}/subagents/${r.child}/steer`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${TOKEN}`,
      'X-Subrun-Session-Key': r.session_key,
      'Content-Type': 'application/json',
      ...(key === undefined ? {} : { 'Idempotency-Key': key }),
    },
    body: JSON.stringify({ text }),
    signal: AbortSignal.timeout(WAIT_MS),
  });
  return { status: res.status, replayed: res.headers.get('idempotency-replayed'), json: (await res.json()) as Record<string, unknown> };
}

describe('a steer whose answer is a promise', () => {
  it('over HTTP is 202 queued once committed, with and without a key; a replay is the same answer', async () => {
    const r = await rig();
    const plain = await steerHttp(r, 'go on');
    expect(plain.status).toBe(202);
    expect(plain.json).toMatchObject({ status: 'queued', subagent_id: r.child, text: 'go on' });
    expect(typeof plain.json.steer_id).toBe('string');
    const keyed = await steerHttp(r, 'and this', 'k1');
    expect(keyed.status).toBe(202);
    expect(keyed.replayed).toBeNull();
    const again = await steerHttp(r, 'and this', 'k1');
    expect(again.status).toBe(202);
    expect(again.replayed).toBe('true');
    expect(again.json).toEqual(keyed.json);
    // Two steers queued, each committed once: the replay acted on nothing.
    expect(r.runner.commits).toBe(2);
  });

  it('over HTTP a commit that fails is -32000 (503), not kept: a retry with the same key commits', async () => {
    const r = await rig();
    r.runner.commit = 'fail';
    const failed = await steerHttp(r, 'retry me', 'k2');
    expect(failed.json).toEqual({ error: { code: RpcCode.NatsUnavailable, message: 'NATS unavailable' } });
    r.runner.commit = 'ok';
    const retried = await steerHttp(r, 'retry me', 'k2');
    expect(retried.status).toBe(202);
    expect(retried.replayed).toBeNull();
    expect(retried.json).toMatchObject({ status: 'queued', text: 'retry me' });
  });

  it('over JSON-RPC a replay of a keyed steer is the first result, marked; a failed commit is not kept', async () => {
    const r = await rig();
    const params = { session_id: r.session_id, subagent_id: r.child, text: 'hi', idempotency_key: 'K1' };
    const first = await r.rpc.client.result('subagent.steer', params);
    expect(first).toMatchObject({ status: 'queued', subagent_id: r.child, text: 'hi' });
    const replay = await r.rpc.client.result('subagent.steer', params);
    expect(replay).toEqual({ ...first, idempotent_replay: true });

    r.runner.commit = 'fail';
    const p2 = { ...params, text: 'later', idempotency_key: 'K2' };
    expect(await r.rpc.client.error('subagent.steer', p2)).toMatchObject({ code: RpcCode.NatsUnavailable });
    r.runner.commit = 'ok';
    const retried = await r.rpc.client.result('subagent.steer', p2);
    expect(retried).toMatchObject({ status: 'queued', text: 'later' });
    expect(retried.idempotent_replay).toBeUndefined();
  });

  it('a repeat while the first answer is pending shares it: one steer, the same steer_id', async () => {
    const r = await rig();
    const params = { session_id: r.session_id, subagent_id: r.child, text: 'once', idempotency_key: 'K3' };
    // Both sent before either is answered: the second arrives while the first commit is pending.
    const [a, b] = await Promise.all([r.rpc.client.result('subagent.steer', params), r.rpc.client.result('subagent.steer', params)]);
    expect(b).toEqual({ ...a, idempotent_replay: true });
    expect(r.runner.commits).toBe(1);
  });
});

describe('a full steer queue (4005)', () => {
  it('is not kept: a retry with the same key after the child took its steers queues', async () => {
    const r = await rig(1);
    expect((await steerHttp(r, 'first')).status).toBe(202);
    const full = await steerHttp(r, 'second', 'k4');
    expect(full.status).toBe(429);
    expect(full.json).toEqual({ error: { code: RpcCode.SteerQueueFull, message: 'steer queue full' } });
    const stillFull = await steerHttp(r, 'second', 'k4');
    expect(stillFull.status).toBe(429);
    expect(stillFull.replayed).toBeNull();
    r.runner.drain();
    const retried = await steerHttp(r, 'second', 'k4');
    expect(retried.status).toBe(202);
    expect(retried.replayed).toBeNull();
    expect(retried.json).toMatchObject({ status: 'queued', text: 'second' });
    // And from now on it is kept: the queued answer is replayed.
    const replay = await steerHttp(r, 'second', 'k4');
    expect(replay.replayed).toBe('true');
    expect(replay.json).toEqual(retried.json);
  });
});
