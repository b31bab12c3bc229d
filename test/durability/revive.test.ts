// Revive (../shared/design/durability.md, "Revive"), on a real `serve --ws --state-dir DIR`
// killed with SIGKILL and started again on the same directory: the lost child's entry says it can
// be revived and lists the steer it missed; subagent.revive starts a new child from the lost one's
// last checkpoint (nothing of the steps it completed is run or said again), with the missed steer
// queued again; a revival is once only (4017, also after another restart), a child that ended
// otherwise is not revivable (4016); over HTTP the same, 201 / 409, and an idempotency key replays
// the first revival's answer, across a restart too.
import { afterEach, describe, expect, it } from 'vitest';
import { killAll, spawnSubrun, WAIT_MS } from '../helpers/process.ts';
import type { WireEvent } from '../helpers/rpc-client.ts';
import { connectHost, freshStateDir, lastSeen, mustCall, removeStateDir, sigkill, TOKEN, within, type Host, type Server } from './harness.ts';

/** The lost child's progress is written at most every 20 ms (coalesced): --checkpoint-ms 20. */
async function start(dir: string): Promise<Server> {
  const proc = spawnSubrun(['serve', '--ws', '--port', '0', '--token', TOKEN, '--state-dir', dir, '--max-spawn-depth', '2', '--checkpoint-ms', '20']);
  const line = proc.stderr.take((l) => l.startsWith('subrun listening on '), WAIT_MS, 'the listening line');
  const first = await Promise.race([line.then((l) => ({ line: l })), proc.exited.then(() => undefined)]);
  if (!first) throw new Error(`the server on ${dir} exited before listening: ${proc.stderr.all.join('\n').slice(0, 800)}`);
  return { proc, url: first.line.slice('subrun listening on '.length).trim(), dir };
}

const say = (text: string) => ({ op: 'say', text });
/**
 * The grandchild: a 100 ms tool, then a line, then it hangs. Its line comes after its parent's
 * progress was committed: the parent's last change before the spawn started a 20 ms checkpoint
 * timer, which fires (and its write commits) before the grandchild's 100 ms one does.
 */
const GRANDCHILD = { goal: 'grandchild', agent: { kind: 'scripted', steps: [{ op: 'tool', name: 'gt', ms: 100 }, say('gc ready'), { op: 'hang' }] } };
/** The child: three steps done, then a spawn that holds it (so a steer stays queued), then it takes a steer. */
const STEPS = [say('a'), { op: 'tool', name: 't', ms: 10 }, say('b'), { op: 'spawn', tasks: [GRANDCHILD] }, { op: 'wait_steer' }, say('c'), { op: 'finish' }];

interface Rpc {
  readonly code: number;
  readonly message: string;
  readonly data?: unknown;
}

async function rpcError(host: Host, method: string, params: Record<string, unknown>): Promise<Rpc> {
  const reply = await within(host.client.call(method, params), WAIT_MS, `the reply to ${method}`);
  if (!reply.error) throw new Error(`${method} answered ${JSON.stringify(reply.result)}, not an error`);
  return reply.error;
}

function waitFor(host: Host, pred: (e: WireEvent) => boolean, what: string): Promise<WireEvent> {
  return within(host.client.waitForEvent(pred), WAIT_MS, what);
}

const is = (type: string, id: string) => (e: WireEvent) => e.type === type && e.payload.subagent_id === id;
/** The first child `parent` spawned that said `gc ready`, once it did. */
async function grandchildOf(host: Host, parent: string): Promise<string> {
  const spawned = await waitFor(host, (e) => e.type === 'subagent.start' && e.payload.parent_id === parent, `the grandchild of ${parent}`);
  const id = spawned.payload.subagent_id as string;
  await waitFor(host, (e) => is('subagent.text', id)(e) && e.payload.text === 'gc ready', `${id} ready`);
  return id;
}

interface Session {
  readonly session_id: string;
  readonly session_key: string;
}

/** A new connection to `server`, re-bound to `s` with its key. */
async function reattach(server: Server, s: Session): Promise<Host> {
  const host = await connectHost(server, 0);
  hosts.push(host);
  await mustCall(host, 'session.attach', { session_id: s.session_id, session_key: s.session_key });
  return host;
}

/** POST .../subagents/{cid}/revive over HTTP, with the session key (and an idempotency key). */
async function httpRevive(server: Server, s: Session, cid: string, key?: string): Promise<{ status: number; headers: Headers; body: unknown }> {
  const base = server.url.replace(/^ws:/, 'http:').replace(/\/$/, '');
  const res = await fetch(`${base}/v1/sessions/${s.session_id}/subagents/${cid}/revive`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${TOKEN}`,
      'X-Subrun-Session-Key': s.session_key,
      'Content-Type': 'application/json',
      ...(key === undefined ? {} : { 'Idempotency-Key': key }),
    },
    body: '{}',
    signal: AbortSignal.timeout(WAIT_MS),
  });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

const hosts: Host[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((h) => h.close()));
  await killAll();
  await Promise.all(dirs.splice(0).map(removeStateDir));
});

interface Revived {
  subagent_id: string;
  revived_from: string;
  delegation_id: string;
  requeued: Array<{ steer_id: string; requeued_from: string }>;
}

describe('subagent.revive after kill -9', () => {
  it('continues the lost child from its checkpoint with its missed steer, once; over HTTP too, keyed answers replayed after another restart', async () => {
    const dir = await freshStateDir();
    dirs.push(dir);
    let server = await start(dir);
    const before = await connectHost(server, 0);
    hosts.push(before);
    const s = await mustCall<Session>(before, 'session.create', {});
    const sid = s.session_id;
    const spawned = await mustCall<{ delegation_id: string; subagent_ids: string[] }>(before, 'delegation.spawn', {
      session_id: sid,
      tasks: [{ goal: 'three steps, then a steer', agent: { kind: 'scripted', steps: STEPS } }],
    });
    const old = spawned.subagent_ids[0]!;
    const oldGrandchild = await grandchildOf(before, old);
    // The child is in its spawn step: the steer waits in its queue, to be missed at the kill.
    const steer = await mustCall<{ status: string; steer_id: string }>(before, 'subagent.steer', { session_id: sid, subagent_id: old, text: 'missed steer' });
    expect(steer.status).toBe('queued');
    const seen = lastSeen(before, sid);

    await sigkill(server);
    server = await start(dir);
    let host = await reattach(server, s);
    expect(host.ready.payload.recovered).toEqual({ sessions: 1, children_settled: 2, steers_missed: 1 });
    const since = await mustCall<{ events: WireEvent[] }>(host, 'session.events.since', { session_id: sid, session_key: s.session_key, last_seen: seen });
    const lost = since.events.find(is('subagent.complete', old));
    expect(lost?.payload).toMatchObject({
      status: 'error',
      exit_reason: 'server_restart',
      error: expect.stringMatching(/^the server stopped while this subagent ran/),
      summary: 'b',
      revivable: true,
      missed_steer_detail: [{ steer_id: steer.steer_id, text: 'missed steer', maybe_delivered: false }],
    });
    expect(since.events.find(is('subagent.complete', oldGrandchild))?.payload).toMatchObject({
      status: 'error',
      exit_reason: 'server_restart',
      revivable: true,
    });
    // What the lost run did was written before the kill (its last checkpoint).
    const lostTail = (await mustCall<{ text: string }>(host, 'subagent.tail', { session_id: sid, subagent_id: old })).text;
    expect(lostTail).toContain('[text] a');
    expect(lostTail).toContain('[text] b');

    const revived = await mustCall<Revived>(host, 'subagent.revive', { session_id: sid, subagent_id: old });
    const fresh = revived.subagent_id;
    expect(revived).toEqual({
      subagent_id: expect.stringMatching(/^sa_/),
      revived_from: old,
      delegation_id: expect.any(String),
      requeued: [{ steer_id: expect.any(String), requeued_from: steer.steer_id }],
    });
    expect(fresh).not.toBe(old);
    expect(revived.delegation_id).not.toBe(spawned.delegation_id);
    const requeued = revived.requeued[0]!.steer_id;
    expect(requeued).not.toBe(steer.steer_id);
    const listed = await mustCall<{ subagents: Array<Record<string, unknown>> }>(host, 'subagent.list', { session_id: sid });
    expect(listed.subagents.find((c) => c.subagent_id === fresh)).toMatchObject({ revived_from: old, parent_id: null, depth: 0 });

    // It runs again the step that was in progress (a new grandchild), then takes the steer queued again.
    const newGrandchild = await grandchildOf(host, fresh);
    await mustCall(host, 'subagent.interrupt', { session_id: sid, subagent_id: newGrandchild });
    const delivered = await waitFor(host, is('subagent.steer.delivered', fresh), 'the requeued steer delivered');
    expect(delivered.payload).toMatchObject({ steer_id: requeued, requeued_from: steer.steer_id, text: 'missed steer' });
    const done = await waitFor(host, is('subagent.complete', fresh), 'the completion of the revived child');
    expect(done.payload).toMatchObject({ status: 'completed', summary: 'c', revived_from: old, delegation_id: revived.delegation_id });
    expect(done.payload.missed_steer_detail).toBeUndefined();
    const tail = (await mustCall<{ text: string }>(host, 'subagent.tail', { session_id: sid, subagent_id: fresh })).text;
    expect(tail.split('\n')[0]).toBe(`[revived from ${old}]`);
    expect(tail).toContain('[steer] missed steer');
    expect(tail).toContain('[text] c');
    for (const line of ['[text] a', '[text] b', '[tool] t']) expect(tail, 'the steps the lost run completed are not run again').not.toContain(line);

    expect(await rpcError(host, 'subagent.revive', { session_id: sid, subagent_id: old })).toEqual({
      code: 4017,
      message: 'already revived',
      data: { revived_as: fresh },
    });
    expect((await rpcError(host, 'subagent.revive', { session_id: sid, subagent_id: fresh })).code, 'it completed: not revivable').toBe(4016);
    expect((await rpcError(host, 'subagent.revive', { session_id: sid, subagent_id: 'sa_nosuchchild' })).code, 'unknown').toBe(4016);

    // Over HTTP: the lost grandchild, with a key; its replay; then without the key, 409.
    const first = await httpRevive(server, s, oldGrandchild, 'revive-gc');
    expect(first.status).toBe(201);
    const body = first.body as Revived;
    expect(body).toEqual({ subagent_id: expect.stringMatching(/^sa_/), revived_from: oldGrandchild, delegation_id: expect.any(String), requeued: [] });
    const replay = await httpRevive(server, s, oldGrandchild, 'revive-gc');
    expect([replay.status, replay.headers.get('idempotency-replayed'), replay.body]).toEqual([201, 'true', body]);
    const again = await httpRevive(server, s, oldGrandchild);
    expect([again.status, again.body]).toEqual([409, { error: { code: 4017, message: 'already revived', data: { revived_as: body.subagent_id } } }]);
    const completed = await httpRevive(server, s, fresh);
    expect(completed.status).toBe(409);
    expect((completed.body as { error: Rpc }).error.code).toBe(4016);

    // Another kill -9: the revivals and the kept answer outlive it too.
    await sigkill(server);
    server = await start(dir);
    host = await reattach(server, s);
    expect(await rpcError(host, 'subagent.revive', { session_id: sid, subagent_id: old })).toMatchObject({ code: 4017, data: { revived_as: fresh } });
    const afterRestart = await httpRevive(server, s, oldGrandchild, 'revive-gc');
    expect([afterRestart.status, afterRestart.body]).toEqual([201, body]);
  }, 60_000);
});
