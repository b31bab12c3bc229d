// Shutdown under every kind of peer and every transport EOF, each against a real `serve` process
// over real sockets and pipes on 127.0.0.1: sockets that never upgraded or sent half an upgrade,
// a WebSocket peer that fell megabytes behind (one that reads again within the grace, one that
// never does), stdin closed with steers queued, a last request line without its LF, stdout full
// or closed by the host, and repeated signals. Every wait is on a line, a message, a close or an
// exit; timeouts are failure bounds only.
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  call,
  connectWs,
  isEvent,
  killAll,
  nextEvent,
  nextReply,
  scriptedTask,
  startStdio,
  startWsServer,
  WAIT_MS,
  type Msg,
  type Peer,
  type Proc,
  type Received,
  type WireEvent,
} from '../helpers/process.ts';
import { wireEntry } from '../helpers/wire-entry.ts';

afterEach(async () => {
  await killAll();
});

/** The events a peer received, in order (from its whole inbox history). */
const eventsOf = (all: readonly Received[]): WireEvent[] => all.filter(isEvent).map((m) => (m as Msg).params as WireEvent);
const completesOf = (all: readonly Received[]) => eventsOf(all).filter((e) => e.type === 'subagent.complete');
const idOf = (e: WireEvent) => e.payload.subagent_id as string;
const entryOf = (e: WireEvent) => wireEntry(e.payload);

/** A raw TCP connection to the server; resolves once connected. */
function rawSocket(port: number): Promise<{ socket: Socket; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.on('error', () => undefined);
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    socket.once('connect', () => resolve({ socket, closed }));
    socket.once('error', reject);
  });
}

/** Parses the server's pino lines on stderr. */
const logLines = (proc: Proc) =>
  proc.stderr.all.flatMap((l) => {
    try {
      return [JSON.parse(l) as Record<string, unknown>];
    } catch {
      return [];
    }
  });

describe('shutdown over WebSocket: sockets that never became a connection', () => {
  it('an idle raw TCP socket and a half-sent upgrade do not hold SIGTERM: the server exits 0 and both are closed', async () => {
    const server = await startWsServer(['--shutdown-grace-ms', '300']);
    const idle = await rawSocket(server.port);
    const half = await rawSocket(server.port);
    // Every header of an upgrade with the right token, but not the blank line that ends them.
    half.socket.write(
      `GET /?token=${server.token} HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n`,
    );
    // A round trip on a later connection: the two above were accepted before it.
    const { peer } = await connectWs(server);
    expect(await call(peer, 'server.info')).toMatchObject({ name: 'subrun' });
    const t0 = Date.now();
    server.proc.child.kill('SIGTERM');
    expect(await server.proc.waitExit()).toStrictEqual({ code: 0, signal: null });
    const elapsed = Date.now() - t0;
    await Promise.all([idle.closed, half.closed]);
    expect((await peer.closed).code).toBe(1001);
    console.log(`[shutdown] idle raw socket + half-sent upgrade: exit 0 after ${elapsed} ms`);
  });
});

describe('shutdown over WebSocket: a peer that fell behind', () => {
  const CHILDREN = 8;
  const SAYS = 3;
  /** ~1 MB of text, tagged so each child's steps differ. */
  const big = (i: number, k: number) => `${i}.${k} `.padEnd(1_000_000, 'z');

  /**
   * A session with two sockets: `slow` stops reading, then `watcher` spawns 8 children that say
   * 3 MB each (24 MB, far more than the kernel's socket buffers hold: the rest waits in the
   * server). Resolves once the watcher has read every text, so all of it was sent to `slow` too.
   */
  async function fallenBehind(args: string[], env: Record<string, string> = {}) {
    const server = await startWsServer(
      ['--max-concurrent-children', String(CHILDREN), '--max-message-bytes', String(32 << 20), '--max-outbound-bytes', String(256 << 20), ...args],
      { env },
    );
    const { peer: slow } = await connectWs(server);
    const { peer: watcher } = await connectWs(server);
    const { session_id, session_key } = await call<{ session_id: string; session_key: string }>(slow, 'session.create');
    await call(watcher, 'session.attach', { session_id, session_key });
    slow.ws.pause();
    const tasks = Array.from({ length: CHILDREN }, (_, i) =>
      scriptedTask(`chatty ${i}`, [...Array.from({ length: SAYS }, (_k, k) => ({ op: 'say', text: big(i, k) })), { op: 'hang' }]),
    );
    const { subagent_ids } = await call<{ subagent_ids: string[] }>(watcher, 'delegation.spawn', { session_id, tasks });
    for (let n = 0; n < CHILDREN * SAYS; n++) await nextEvent(watcher, (e) => e.type === 'subagent.text', WAIT_MS, 'every text');
    return { server, slow, watcher, subagent_ids };
  }

  async function everyCompletion(peer: Peer, n: number): Promise<Set<string>> {
    const seen = new Set<string>();
    while (seen.size < n) seen.add(idOf(await nextEvent(peer, (e) => e.type === 'subagent.complete', WAIT_MS, 'every completion')));
    return seen;
  }

  it('reads again within the grace: it gets all 8 completions, then the close frame (1001), and the server exits 0', { timeout: 60_000 }, async () => {
    const { server, slow, watcher, subagent_ids } = await fallenBehind(['--shutdown-grace-ms', '30000']);
    let bytes = 0;
    slow.ws.on('message', (data: Buffer) => (bytes += data.length));
    const t0 = Date.now();
    server.proc.child.kill('SIGTERM');
    expect([...(await everyCompletion(watcher, CHILDREN))].sort()).toStrictEqual([...subagent_ids].sort());
    expect((await watcher.closed).code).toBe(1001);
    // The completions are now behind 24 MB in the slow socket's queue; it reads again.
    slow.ws.resume();
    const closed = await slow.closed;
    const completes = completesOf(slow.inbox.all);
    expect(completes.map(idOf).sort()).toStrictEqual([...subagent_ids].sort());
    // Each entry whole: its summary is the child's last 1 MB text.
    for (const e of completes) expect(entryOf(e)).toMatchObject({ status: 'interrupted', summary: big(subagent_ids.indexOf(idOf(e)), SAYS - 1) });
    expect(eventsOf(slow.inbox.all).filter((e) => e.type === 'subagent.text')).toHaveLength(CHILDREN * SAYS);
    expect(closed.code).toBe(1001);
    expect(await server.proc.waitExit()).toStrictEqual({ code: 0, signal: null });
    console.log(
      `[shutdown] slow reader: ${(bytes / 1e6).toFixed(1)} MB read once it read again (texts, completions, delegation.complete), ${completes.length} completions, close 1001, exit 0 after ${Date.now() - t0} ms`,
    );
  });

  it('never reads again: it is cut at the deadline (SUBRUN_SHUTDOWN_GRACE_MS) and the server exits 0', { timeout: 60_000 }, async () => {
    const { server, slow, watcher } = await fallenBehind(['--log-level', 'warn'], { SUBRUN_SHUTDOWN_GRACE_MS: '300' });
    const t0 = Date.now();
    server.proc.child.kill('SIGTERM');
    await everyCompletion(watcher, CHILDREN);
    expect((await watcher.closed).code).toBe(1001);
    expect(await server.proc.waitExit()).toStrictEqual({ code: 0, signal: null });
    console.log(`[shutdown] reader that never resumes (grace 300 ms): cut, exit 0 after ${Date.now() - t0} ms`);
    await server.proc.stderr.whenEnded();
    const cut = logLines(server.proc).filter((l) => l.msg === 'shutdown deadline passed: cutting peers that did not finish reading');
    expect(cut).toHaveLength(1);
    expect(cut[0]).toMatchObject({ peers: 1, grace_ms: 300 });
    // What was still queued in the server is gone with it: no close frame ever reaches the peer.
    slow.ws.resume();
    expect((await slow.closed).code).toBe(1006);
  });
});

/** Three children that hold steers: one sleeping, one inside a long tool step, one waiting for a steer. */
function holders(say = '') {
  const first = say === '' ? [] : [{ op: 'say', text: say }];
  return [
    scriptedTask('sleeps', [...first, { op: 'sleep', ms: 600_000 }]),
    scriptedTask('works', [...first, { op: 'tool', name: 'long', ms: 600_000 }, { op: 'hang' }]),
    scriptedTask('waits', [...first, { op: 'wait_steer' }, { op: 'hang' }]),
  ];
}

/** Steers every child twice (each answered `queued`); returns steer_id → [child, text]. */
async function steerAll(peer: Peer, session_id: string, ids: readonly string[]): Promise<Map<string, [string, string]>> {
  const steers = new Map<string, [string, string]>();
  for (const id of ids) {
    for (const n of [1, 2]) {
      const text = `${id} steer ${n}`;
      const r = await call<{ status: string; steer_id: string }>(peer, 'subagent.steer', { session_id, subagent_id: id, text });
      expect(r.status).toBe('queued');
      steers.set(r.steer_id, [id, text]);
    }
  }
  return steers;
}

/** Every queued steer has exactly one fate on the wire: a delivery event or a line of its child's missed_steer. */
function expectEverySteerAccounted(all: readonly Received[], steers: Map<string, [string, string]>, ids: readonly string[]): void {
  const events = eventsOf(all);
  const completes = events.filter((e) => e.type === 'subagent.complete');
  expect(completes.map(idOf).sort()).toStrictEqual([...ids].sort());
  const fates = { delivered: 0, missed: 0 };
  for (const [steer_id, [child, text]] of steers) {
    const delivered = events.filter((e) => e.type === 'subagent.steer.delivered' && e.payload.steer_id === steer_id).length;
    const missed = completes
      .filter((e) => idOf(e) === child)
      .flatMap((e) => (entryOf(e).missed_steer ?? '').split('\n'))
      .filter((l) => l === text).length;
    expect(delivered + missed, `${text}: delivered ${delivered}, missed ${missed}`).toBe(1);
    fates[delivered === 1 ? 'delivered' : 'missed'] += 1;
  }
  console.log(`[shutdown] stdio: ${steers.size} steers queued, ${fates.delivered} delivered, ${fates.missed} in missed_steer, ${completes.length} completions`);
}

describe('shutdown over stdio: closing stdin is SIGTERM', () => {
  it('stdin closed with steers queued: every child completes with its steers delivered or in missed_steer, then exit 0', async () => {
    const { proc, peer } = await startStdio();
    const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
    const { subagent_ids } = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', { session_id, tasks: holders() });
    for (let i = 0; i < subagent_ids.length; i++) await nextEvent(peer, (e) => e.type === 'subagent.start', WAIT_MS, 'every start');
    const steers = await steerAll(peer, session_id, subagent_ids);
    proc.child.stdin.end();
    expect(await proc.waitExit()).toStrictEqual({ code: 0, signal: null });
    await peer.inbox.whenEnded();
    expectEverySteerAccounted(peer.inbox.all, steers, subagent_ids);
    const [sleeps, works] = subagent_ids as [string, string];
    // The sleeping child and the one inside a tool reach no delivery point: both steers missed, in order.
    for (const id of [sleeps, works]) {
      const entry = entryOf(completesOf(peer.inbox.all).find((e) => idOf(e) === id) as WireEvent);
      expect(entry).toMatchObject({ status: 'interrupted', missed_steer: `${id} steer 1\n${id} steer 2` });
    }
    expect(eventsOf(peer.inbox.all).filter((e) => e.type === 'delegation.complete')).toHaveLength(1);
  });

  it('SIGTERM, then stdin closed, then SIGTERM again while the host is not reading stdout: one shutdown, every completion once the host reads, exit 0', async () => {
    const { proc, peer } = await startStdio(['--log-level', 'info', '--shutdown-grace-ms', '60000']);
    const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
    // Each completion carries its child's last text as its summary: together far more than a pipe holds.
    const text = 's'.repeat(300_000);
    const { subagent_ids } = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', { session_id, tasks: holders(text) });
    for (let i = 0; i < subagent_ids.length; i++) await nextEvent(peer, (e) => e.type === 'subagent.text', WAIT_MS, 'every text');
    const steers = await steerAll(peer, session_id, subagent_ids);
    proc.child.stdout.pause();
    proc.child.kill('SIGTERM');
    proc.child.stdin.end();
    await proc.stderr.take((l) => l.includes('"msg":"shutting down"'), WAIT_MS, 'the shutdown line');
    // The completions cannot all be written while nobody reads: the server is still in its shutdown.
    expect(proc.child.kill('SIGTERM')).toBe(true);
    proc.child.stdout.resume();
    expect(await proc.waitExit()).toStrictEqual({ code: 0, signal: null });
    await peer.inbox.whenEnded();
    expectEverySteerAccounted(peer.inbox.all, steers, subagent_ids);
    for (const e of completesOf(peer.inbox.all)) expect(entryOf(e)).toMatchObject({ status: 'interrupted', summary: text });
    await proc.stderr.whenEnded();
    expect(logLines(proc).filter((l) => l.msg === 'shutting down')).toHaveLength(1);
  });

  it('a last request without its LF before EOF is answered, then exit 0', async () => {
    const { proc, peer } = await startStdio();
    proc.child.stdin.end(JSON.stringify({ jsonrpc: '2.0', id: 'last', method: 'server.info' }));
    expect(await nextReply(peer)).toMatchObject({ id: 'last', result: { name: 'subrun' } });
    expect(await proc.waitExit()).toStrictEqual({ code: 0, signal: null });
  });

  it('a last batch without its LF, behind a full line in the same write, is answered too', async () => {
    const { proc, peer } = await startStdio();
    const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
    const first = JSON.stringify({ jsonrpc: '2.0', id: 'first', method: 'server.info' });
    const batch = JSON.stringify([
      { jsonrpc: '2.0', id: 'b1', method: 'subagent.list', params: { session_id } },
      { jsonrpc: '2.0', id: 'b2', method: 'server.info' },
    ]);
    proc.child.stdin.end(`${first}\n${batch}\r`);
    expect(await nextReply(peer)).toMatchObject({ id: 'first' });
    const reply = (await nextReply(peer)) as Msg[];
    expect(reply.map((r) => r.id)).toStrictEqual(['b1', 'b2']);
    expect(reply[0]).toMatchObject({ result: { subagents: [] } });
    expect(await proc.waitExit()).toStrictEqual({ code: 0, signal: null });
  });

  for (const end of ['stdin closed', 'SIGTERM'] as const) {
    it(`the host closes its end of stdout, then ${end}, with children running and steers queued: no crash, exit 0`, async () => {
      const { proc, peer } = await startStdio(['--log-level', 'info', '--shutdown-grace-ms', '60000']);
      const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
      const { subagent_ids } = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', { session_id, tasks: holders('x'.repeat(100_000)) });
      for (let i = 0; i < subagent_ids.length; i++) await nextEvent(peer, (e) => e.type === 'subagent.text', WAIT_MS, 'every text');
      await steerAll(peer, session_id, subagent_ids);
      proc.child.stdout.destroy();
      if (end === 'SIGTERM') proc.child.kill('SIGTERM');
      else proc.child.stdin.end();
      expect(await proc.waitExit()).toStrictEqual({ code: 0, signal: null });
      await proc.stderr.whenEnded();
      // Every child was still stopped and completed (the log says so), though nobody could read it.
      const completed = logLines(proc).filter((l) => l.msg === 'child completed');
      expect(completed.map((l) => l.subagent_id).sort()).toStrictEqual([...subagent_ids].sort());
      expect(proc.stderr.all.join('\n')).not.toMatch(/Uncaught|EPIPE.*\n\s+at /);
    });
  }
});
