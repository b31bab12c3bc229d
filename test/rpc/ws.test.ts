// `subrun serve --ws` as a real child process, spoken to over real sockets on 127.0.0.1: the
// upgrade (token, Origin, compression), frame limits, heartbeat, a slow consumer, binary frames,
// the greeting, and events fanned out to every transport attached to a session.
import { randomBytes } from 'node:crypto';
import { get, request as httpRequest, type IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call,
  connectWs,
  killAll,
  nextEvent,
  nextReply,
  openWs,
  request,
  scriptedTask,
  startWsServer,
  type Msg,
  type WireEvent,
  type WsPeer,
  type WsServer,
} from '../helpers/process.ts';
import { wireEntry } from '../helpers/wire-entry.ts';

const TOKEN = 'ws-test-token';
const ALLOWED = 'http://allowed.example:3000';
const MAX = 4096;
const HEARTBEAT_MS = 500;
/** Over 2^31-1 ms: a plain setTimeout would fire after 1 ms. */
const BIG_MS = 3_000_000_000;

/** A request frame of exactly `bytes` bytes. */
function paddedFrame(bytes: number, id: string): string {
  const base = JSON.stringify({ jsonrpc: '2.0', method: 'server.info', id, params: { pad: '' } });
  return JSON.stringify({ jsonrpc: '2.0', method: 'server.info', id, params: { pad: 'x'.repeat(bytes - Buffer.byteLength(base)) } });
}

/** Expects the upgrade to be refused with this HTTP status. */
async function expectRefused(url: string, status: number, headers: Record<string, string> = {}): Promise<void> {
  await expect(openWs(url, { headers })).rejects.toThrow(`HTTP ${status}`);
}

/** A hand-made upgrade request: exactly these headers (no Origin unless given). */
function rawUpgrade(
  port: number,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: IncomingMessage['headers']; upgraded: boolean }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: '127.0.0.1',
      port,
      path,
      headers: {
        Connection: 'Upgrade',
        Upgrade: 'websocket',
        'Sec-WebSocket-Version': '13',
        'Sec-WebSocket-Key': randomBytes(16).toString('base64'),
        ...headers,
      },
    });
    req.once('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, headers: res.headers, upgraded: true });
    });
    req.once('response', (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, headers: res.headers, upgraded: false });
    });
    req.once('error', reject);
    req.end();
  });
}

function httpGet(url: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = get(url, (res) => {
      res.resume();
      resolve(res);
    });
    req.on('error', reject);
  });
}

describe('WebSocket transport', () => {
  let server: WsServer;
  const peers: WsPeer[] = [];
  const track = <T extends { peer: WsPeer }>(x: T): T => (peers.push(x.peer), x);

  beforeAll(async () => {
    // A park TTL beyond Node's 2^31-1 ms timer limit (see 'timers beyond 2^31 ms' below).
    server = await startWsServer(['--allow-origin', ALLOWED, '--max-message-bytes', String(MAX), '--park-ttl-ms', String(BIG_MS)], { token: TOKEN });
  });
  afterAll(async () => {
    await Promise.all(peers.map((p) => p.close()));
    await killAll();
  });

  describe('the upgrade', () => {
    it('accepts the token as Authorization: Bearer, and gateway.ready is the first message', async () => {
      const { peer } = track(await connectWs(server));
      const first = peer.inbox.all[0] as Msg;
      expect(first).toMatchObject({ jsonrpc: '2.0', method: 'event' });
      expect(first).not.toHaveProperty('id');
      expect(first.params).toMatchObject({ type: 'gateway.ready', seq: 0, payload: { protocol_version: 1, server: { name: 'subrun' } } });
      expect(first.params).not.toHaveProperty('session_id');
      expect(typeof (first.params as WireEvent).ts).toBe('number');
      expect(await call(peer, 'server.info')).toMatchObject({ name: 'subrun' });
    });

    it('accepts the token as ?token=', async () => {
      const peer = await openWs(`${server.url}?token=${encodeURIComponent(TOKEN)}`);
      peers.push(peer);
      expect(await nextEvent(peer)).toMatchObject({ type: 'gateway.ready' });
      expect(await call(peer, 'server.info')).toMatchObject({ name: 'subrun' });
    });

    it('accepts a lower-case bearer scheme', async () => {
      const peer = await openWs(server.url, { headers: { Authorization: `bearer ${TOKEN}` } });
      peers.push(peer);
      expect(await nextEvent(peer)).toMatchObject({ type: 'gateway.ready' });
    });

    it('refuses a missing token with HTTP 401', async () => {
      await expectRefused(server.url, 401);
    });

    it('refuses a wrong token with HTTP 401, in the header or the query', async () => {
      await expectRefused(server.url, 401, { Authorization: 'Bearer nope' });
      await expectRefused(server.url, 401, { Authorization: `Bearer ${TOKEN}x` });
      await expectRefused(server.url, 401, { Authorization: `Bearer ${TOKEN.slice(0, -1)}` });
      await expectRefused(server.url, 401, { Authorization: 'Bearer ' });
      await expectRefused(server.url, 401, { Authorization: TOKEN }); // no scheme
      await expectRefused(`${server.url}?token=nope`, 401);
      await expectRefused(`${server.url}?token=`, 401);
    });

    it('refuses an Origin that is not allowed with HTTP 403, even with the right token', async () => {
      const auth = { Authorization: `Bearer ${TOKEN}` };
      await expectRefused(server.url, 403, { ...auth, Origin: 'http://evil.example' });
      await expectRefused(server.url, 403, { ...auth, Origin: `http://127.0.0.1:${server.port + 1}` });
      await expectRefused(server.url, 403, { ...auth, Origin: 'http://allowed.example' }); // other port
      await expectRefused(server.url, 403, { ...auth, Origin: 'null' });
    });

    it("accepts the server's own origin and an --allow-origin one", async () => {
      for (const origin of [`http://127.0.0.1:${server.port}`, `http://localhost:${server.port}`, ALLOWED, ALLOWED.toUpperCase().replace('HTTP', 'http')]) {
        const { peer } = track(await connectWs(server, { origin }));
        expect(await call(peer, 'server.info'), origin).toMatchObject({ name: 'subrun' });
      }
    });

    it('accepts a client that sends no Origin (raw upgrade, headers under our control)', async () => {
      const r = await rawUpgrade(server.port, '/', { Authorization: `Bearer ${TOKEN}` });
      expect(r.status).toBe(101);
    });

    it('refuses before any socket exists: the raw upgrade gets a plain HTTP 401/403 response', async () => {
      const noToken = await rawUpgrade(server.port, '/', {});
      expect(noToken.status).toBe(401);
      expect(noToken.upgraded).toBe(false);
      const badOrigin = await rawUpgrade(server.port, '/', { Authorization: `Bearer ${TOKEN}`, Origin: 'https://evil.example' });
      expect(badOrigin.status).toBe(403);
      expect(badOrigin.upgraded).toBe(false);
    });

    it('negotiates no compression even when the client offers permessage-deflate', async () => {
      const r = await rawUpgrade(server.port, '/', {
        Authorization: `Bearer ${TOKEN}`,
        'Sec-WebSocket-Extensions': 'permessage-deflate; client_max_window_bits',
      });
      expect(r.status).toBe(101);
      expect(r.headers).not.toHaveProperty('sec-websocket-extensions');
      // The same through the ws client, which offers permessage-deflate by default.
      const { peer } = track(await connectWs(server, { perMessageDeflate: true }));
      expect(peer.ws.extensions).toBe('');
    });

    it('answers an upgrade on another path with 404, and a plain GET / with a redirect to the dashboard', async () => {
      await expectRefused(`ws://127.0.0.1:${server.port}/other?token=${TOKEN}`, 404);
      const res = await httpGet(`http://127.0.0.1:${server.port}/`);
      expect(res.statusCode).toBe(302);
      expect(res.headers.location).toBe('/ui/');
    });
  });

  describe('frames', () => {
    it('accepts a frame of exactly --max-message-bytes', async () => {
      const { peer } = track(await connectWs(server));
      const frame = paddedFrame(MAX, 'exact');
      expect(Buffer.byteLength(frame)).toBe(MAX);
      peer.send(frame);
      expect(await nextReply(peer)).toMatchObject({ id: 'exact', result: { name: 'subrun' } });
    });

    it('closes the socket with 1009 on a frame over the limit', async () => {
      const { peer } = track(await connectWs(server));
      peer.send(paddedFrame(MAX + 1, 'over'));
      const closed = await peer.closed;
      expect(closed.code).toBe(1009);
      expect(peer.inbox.pending.filter((m) => !Array.isArray(m) && m.id === 'over')).toStrictEqual([]);
    });

    it('closes the socket with 1003 on a binary frame, without answering it', async () => {
      const { peer } = track(await connectWs(server));
      peer.ws.send(Buffer.from('{"jsonrpc":"2.0","method":"server.info","id":"bin"}'), { binary: true });
      const closed = await peer.closed;
      expect(closed.code).toBe(1003);
      expect(peer.inbox.pending).toStrictEqual([]);
    });

    it('answers one JSON-RPC message or batch per text frame', async () => {
      const { peer } = track(await connectWs(server));
      // A frame holding two JSON values is one invalid message, not two.
      peer.send('{"jsonrpc":"2.0","method":"server.info","id":1}\n{"jsonrpc":"2.0","method":"server.info","id":2}');
      expect(await nextReply(peer)).toMatchObject({ id: null, error: { code: -32700 } });
      peer.send('[{"jsonrpc":"2.0","method":"server.info","id":1},{"jsonrpc":"2.0","method":"server.info","id":2}]');
      const batch = (await nextReply(peer)) as Msg[];
      expect(batch.map((m) => m.id)).toStrictEqual([1, 2]);
    });
  });

  describe('sessions over several sockets', () => {
    it('sends a session’s events to every attached socket, with the same seq, and to no other', async () => {
      const { peer: a } = track(await connectWs(server));
      const { peer: b } = track(await connectWs(server));
      const { peer: outsider } = track(await connectWs(server));
      const { session_id, session_key } = await call<{ session_id: string; session_key: string }>(a, 'session.create', { title: 'shared' });
      expect(await call(b, 'session.attach', { session_id, session_key })).toMatchObject({ session_id, generation: 1, live_subagents: 0 });
      const spawn = await call<{ delegation_id: string; subagent_ids: string[] }>(a, 'delegation.spawn', {
        session_id,
        tasks: [
          scriptedTask('one', [
            { op: 'think', text: 'hmm' },
            { op: 'tool', name: 'grep' },
            { op: 'say', text: 'found it' },
          ]),
          scriptedTask('two', [{ op: 'say', text: 'quick' }]),
        ],
      });
      const collect = async (peer: WsPeer) => {
        const events: WireEvent[] = [];
        for (;;) {
          const e = await nextEvent(peer, (x) => x.session_id === session_id);
          events.push(e);
          if (e.type === 'delegation.complete') return events;
        }
      };
      const [ea, eb] = await Promise.all([collect(a), collect(b)]);
      expect(ea.map((e) => e.seq)).toStrictEqual(ea.map((_, i) => i + 1));
      expect(eb).toStrictEqual(ea);
      const types = ea.map((e) => e.type);
      for (const t of [
        'delegation.dispatched',
        'subagent.spawn_requested',
        'subagent.start',
        'subagent.thinking',
        'subagent.tool',
        'subagent.text',
        'subagent.complete',
      ]) {
        expect(types).toContain(t);
      }
      expect(ea.at(-1)?.payload).toMatchObject({ delegation_id: spawn.delegation_id });
      // b controls the session too.
      expect(await call(b, 'subagent.list', { session_id, include_finished: true })).toMatchObject({ subagents: [{}, {}] });
      // The outsider got nothing but its greeting, and cannot read the session.
      expect((await request(outsider, 'subagent.list', { session_id })).error).toMatchObject({ code: 4001 });
      expect(outsider.inbox.all.filter((m) => !Array.isArray(m) && m.method === 'event').map((m) => ((m as Msg).params as WireEvent).type)).toStrictEqual([
        'gateway.ready',
      ]);
    });

    it('timers beyond 2^31 ms: a parked session is not closed at once, a child with such a timeout_ms does not time out at once', async () => {
      const { peer: a } = track(await connectWs(server));
      const { session_id, session_key } = await call<{ session_id: string; session_key: string }>(a, 'session.create');
      const spawn = await call<{ subagent_ids: string[] }>(a, 'delegation.spawn', {
        session_id,
        timeout_ms: BIG_MS,
        tasks: [scriptedTask('long', [{ op: 'say', text: 'waiting' }, { op: 'wait_steer' }, { op: 'say', text: 'back' }])],
      });
      await nextEvent(a, (e) => e.type === 'subagent.text');
      // Park the session: its only transport goes away.
      await a.close();
      const { peer: b } = track(await connectWs(server));
      expect(await call(b, 'session.attach', { session_id, session_key })).toMatchObject({ session_id, live_subagents: 1 });
      const [child] = spawn.subagent_ids;
      expect(await call(b, 'subagent.list', { session_id })).toMatchObject({ subagents: [{ subagent_id: child, status: 'running' }] });
      expect(await call(b, 'subagent.steer', { session_id, subagent_id: child, text: 'go' })).toMatchObject({ status: 'queued' });
      const complete = await nextEvent(b, (e) => e.type === 'subagent.complete');
      expect(wireEntry(complete.payload)).toMatchObject({ status: 'completed', summary: 'back' });
    });

    it('keeps the session when one socket drops: the other still gets events and may attach a new one', async () => {
      const { peer: a } = track(await connectWs(server));
      const { peer: b } = track(await connectWs(server));
      const { session_id, session_key } = await call<{ session_id: string; session_key: string }>(a, 'session.create');
      await call(b, 'session.attach', { session_id, session_key });
      const spawn = await call<{ subagent_ids: string[] }>(a, 'delegation.spawn', {
        session_id,
        tasks: [scriptedTask('wait', [{ op: 'wait_steer' }, { op: 'say', text: 'steered' }])],
      });
      await nextEvent(b, (e) => e.type === 'subagent.start');
      await a.close();
      const [child] = spawn.subagent_ids;
      expect(await call(b, 'subagent.steer', { session_id, subagent_id: child, text: 'go on' })).toMatchObject({ status: 'queued' });
      const delivered = await nextEvent(b, (e) => e.type === 'subagent.steer.delivered');
      expect(delivered.payload).toMatchObject({ subagent_id: child, text: 'go on' });
      const complete = await nextEvent(b, (e) => e.type === 'subagent.complete');
      expect(wireEntry(complete.payload)).toMatchObject({ status: 'completed', summary: 'steered' });
    });
  });
});

describe('WebSocket heartbeat', () => {
  // Its own server: a short ping interval would put every other test at the mercy of a busy machine.
  let server: WsServer;
  const peers: WsPeer[] = [];

  beforeAll(async () => {
    server = await startWsServer(['--heartbeat-ms', String(HEARTBEAT_MS)], { token: TOKEN });
  });
  afterAll(async () => {
    await Promise.all(peers.map((p) => p.close()));
    await killAll();
  });

  it('keeps a peer that answers pings', async () => {
    const { peer } = await connectWs(server);
    peers.push(peer);
    let pings = 0;
    // A peer still there after the third ping has passed two heartbeat checks.
    await Promise.race([
      new Promise<void>((resolve) =>
        peer.ws.on('ping', () => {
          if (++pings === 3) resolve();
        }),
      ),
      peer.closed.then((c) => {
        throw new Error(`dropped after ${pings} pings although it answered them (close ${c.code})`);
      }),
    ]);
    expect(peer.ws.readyState).toBe(peer.ws.OPEN);
    expect(await call(peer, 'server.info')).toMatchObject({ name: 'subrun' });
  });

  it('drops a peer that stops answering pings, and stays up', async () => {
    const { peer } = await connectWs(server, { autoPong: false });
    peers.push(peer);
    let pings = 0;
    peer.ws.on('ping', () => pings++);
    const closed = await peer.closed;
    expect(pings).toBeGreaterThanOrEqual(1);
    expect(closed.code).toBe(1006); // terminated, no close frame
    await server.proc.stderr.take((l) => l.includes('stopped answering pings'));
    const { peer: other } = await connectWs(server);
    peers.push(other);
    expect(await call(other, 'server.info')).toMatchObject({ name: 'subrun' });
  });
});

describe('WebSocket: a client that stops reading', () => {
  let server: WsServer;
  let slow: WsPeer | undefined;

  beforeAll(async () => {
    // No --token: the server makes one and prints it. The default heartbeat (30 s) keeps the
    // heartbeat out of this test: only the outbound limit may drop the slow client.
    server = await startWsServer(
      ['--max-outbound-bytes', String(64 * 1024), '--max-message-bytes', String(2 * 1024 * 1024), '--max-concurrent-children', '4'],
      {
        token: null,
      },
    );
  });
  afterAll(async () => {
    await slow?.close();
    await killAll();
  });

  it('prints a generated token that works', () => {
    expect(server.token).toMatch(/^[\w-]{20,}$/);
    expect(server.proc.stderr.all.filter((l) => l.startsWith('subrun token: '))).toHaveLength(1);
  });

  it(
    'is dropped while events flow (its backlog passes the ceiling, 4x the bound), and the server stays up and serves another client',
    { timeout: 90_000 },
    async () => {
      const { peer } = await connectWs(server);
      slow = peer;
      const { session_id, session_key } = await call<{ session_id: string; session_key: string }>(peer, 'session.create');
      const big = 'y'.repeat(100_000);
      const steps = Array.from({ length: 4 }, () => ({ op: 'say', text: big }));
      const frame = (i: number) =>
        JSON.stringify({
          jsonrpc: '2.0',
          method: 'delegation.spawn',
          id: `spawn-${i}`,
          params: { session_id, tasks: Array.from({ length: 4 }, (_, k) => scriptedTask(`chatty ${i}.${k}`, steps)) },
        });
      // Stop reading: the socket stays open but nothing is read from it any more.
      peer.ws.pause();
      const dropped = server.proc.stderr.take((l) => l.includes('dropping a WebSocket peer'), 60_000, 'the drop');
      // Each frame (~1.6 MB in) makes ~3 MB of events; keep feeding until the server gives up on us.
      let sent = 0;
      let gone = false;
      void dropped.then(
        () => (gone = true),
        () => undefined,
      );
      while (!gone && sent < 40) {
        await new Promise<void>((resolve) => peer.ws.send(frame(sent++), () => resolve()));
        await new Promise((r) => setImmediate(r));
      }
      const line = await dropped;
      // 100 KB texts against a 64 KiB bound: the ceiling drops it before a check interval passes
      // (test/http/burst.test.ts has the drop of a peer that drains nothing under the ceiling).
      expect(JSON.parse(line)).toMatchObject({ msg: 'dropping a WebSocket peer too far behind', max_outbound_bytes: 64 * 1024 });
      expect(JSON.parse(line).buffered).toBeGreaterThan(4 * 64 * 1024);

      // Another client is served, and can take over the (now parked) session.
      const { peer: other } = await connectWs(server);
      try {
        expect(await call(other, 'server.info')).toMatchObject({ name: 'subrun' });
        expect(await call(other, 'session.attach', { session_id, session_key })).toMatchObject({ session_id });
        const list = await call<{ subagents: unknown[] }>(other, 'subagent.list', { session_id, include_finished: true });
        expect(list.subagents.length).toBeGreaterThan(0);
      } finally {
        await other.close();
      }

      // The slow socket really is closed: once it reads again it drains what was in flight and sees the end.
      peer.ws.resume();
      expect((await peer.closed).code).toBe(1006);
      expect(server.proc.child.exitCode).toBeNull();
    },
  );
});

describe('WebSocket: shutdown', () => {
  afterAll(async () => {
    await killAll();
  });

  it('SIGTERM sends the interrupted children’s completion events to every attached socket, closes them, and exits 0', async () => {
    const server = await startWsServer([], { token: TOKEN });
    const { peer: a } = await connectWs(server);
    const { peer: b } = await connectWs(server);
    const { session_id, session_key } = await call<{ session_id: string; session_key: string }>(a, 'session.create');
    await call(b, 'session.attach', { session_id, session_key });
    const spawn = await call<{ subagent_ids: string[] }>(a, 'delegation.spawn', {
      session_id,
      tasks: [scriptedTask('hang 1', [{ op: 'say', text: 'one' }, { op: 'hang' }]), scriptedTask('hang 2', [{ op: 'hang' }])],
    });
    await nextEvent(b, (e) => e.type === 'subagent.text');
    server.proc.child.kill('SIGTERM');
    for (const peer of [a, b]) {
      const done = await nextEvent(peer, (e) => e.type === 'delegation.complete');
      expect((done.payload.results as { subagent_id: string; status: string }[]).map((r) => [r.subagent_id, r.status])).toStrictEqual(
        spawn.subagent_ids.map((id) => [id, 'interrupted']),
      );
      const closed = await peer.closed;
      expect(closed.code, JSON.stringify(closed)).toBe(1001);
    }
    expect(await server.proc.waitExit()).toStrictEqual({ code: 0, signal: null });
  });
});
