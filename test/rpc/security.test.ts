// Security, against real `subrun serve` processes on 127.0.0.1 (and, for the key statistics, an
// in-process server): the upgrade is refused before any socket exists without the right token
// (missing, wrong, of another length) or from a foreign Origin, and a malformed request target
// cannot take the server down; session keys are unguessable and every wrong key gets the one same
// answer; no reply and no log line (at --log-level trace) carries a stack, a session key or the
// token; steer text is never logged at info.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RpcServer } from '../../src/rpc/server.ts';
import {
  call,
  connectWs,
  killAll,
  nextEvent,
  openWs,
  request,
  scriptedTask,
  startStdio,
  startWsServer,
  WAIT_MS,
  type WsPeer,
  type WsServer,
} from '../helpers/process.ts';
import { connectMemory, ok } from '../helpers/rpc-client.ts';
import { wireEntry } from '../helpers/wire-entry.ts';

const TOKEN = 'sec-token-0123456789abcdefghijklmnopqrstuvwxyz';

interface RawResponse {
  readonly status: number;
  readonly text: string;
}

/**
 * Sends one raw HTTP request (an upgrade unless told otherwise) and reads the response: the whole
 * of it when the server ends the socket (a refusal), or up to the head for a 101.
 */
function rawRequest(port: number, target: string, headers: Record<string, string>, upgrade = true): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete response to ${target} within ${WAIT_MS} ms: ${JSON.stringify(text)}`));
    }, WAIT_MS);
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text });
    };
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (text.startsWith('HTTP/1.1 101') && text.includes('\r\n\r\n')) done();
    });
    socket.on('end', done);
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    const lines = [
      `GET ${target} HTTP/1.1`,
      `Host: 127.0.0.1:${port}`,
      ...(upgrade ? ['Upgrade: websocket', 'Connection: Upgrade', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13'] : []),
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    ];
    socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  });
}

/**
 * Opens a control connection and returns the server's own number for it (`tr_N`, from the log line
 * of a session it creates). Connection numbers are sequential, so two controls numbered N and N+1
 * prove that nothing in between became a connection.
 */
async function controlTransport(server: WsServer): Promise<number> {
  const { peer } = await connectWs(server);
  const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
  const line = await server.proc.stderr.take((l) => l.includes('"msg":"session created"') && l.includes(session_id), WAIT_MS, 'the control session’s log line');
  await peer.close();
  return Number(/"transport":"tr_(\d+)"/.exec(line)?.[1]);
}

describe('the upgrade: refused before any socket exists', () => {
  let server: WsServer;
  beforeAll(async () => {
    server = await startWsServer(['--log-level', 'info'], { token: TOKEN });
  });
  afterAll(async () => {
    await killAll();
  });

  it('no token, a wrong token of the same length, tokens of other lengths: HTTP 401, the same answer every time, and no connection', async () => {
    const sameLength = `${TOKEN.slice(0, -1)}${TOKEN.endsWith('z') ? 'y' : 'z'}`;
    const wrong: Array<[string, Record<string, string>, string]> = [
      ['no token at all', {}, '/'],
      ['same length, last character changed', { Authorization: `Bearer ${sameLength}` }, '/'],
      ['same length, first character changed', { Authorization: `Bearer x${TOKEN.slice(1)}` }, '/'],
      ['one character short (a prefix)', { Authorization: `Bearer ${TOKEN.slice(0, -1)}` }, '/'],
      ['one character long', { Authorization: `Bearer ${TOKEN}0` }, '/'],
      ['one character', { Authorization: 'Bearer s' }, '/'],
      ['8 KiB long', { Authorization: `Bearer ${TOKEN.repeat(200).slice(0, 8192)}` }, '/'],
      ['empty bearer', { Authorization: 'Bearer ' }, '/'],
      ['upper-cased', { Authorization: `Bearer ${TOKEN.toUpperCase()}` }, '/'],
      ['another scheme', { Authorization: `Basic ${Buffer.from(`u:${TOKEN}`).toString('base64')}` }, '/'],
      ['same length in the query', {}, `/?token=${sameLength}`],
      ['other length in the query', {}, `/?token=${TOKEN}${TOKEN}`],
      ['empty query token', {}, '/?token='],
    ];
    const before = await controlTransport(server);
    const answers = new Set<string>();
    for (const [name, headers, target] of wrong) {
      const r = await rawRequest(server.port, target, headers);
      expect(r.status, name).toBe(401);
      expect(r.text, name).not.toMatch(/Upgrade: websocket|Sec-WebSocket-Accept/i);
      answers.add(r.text);
    }
    // One answer for every wrong token, whatever its length: the comparison is no oracle.
    expect(answers.size).toBe(1);
    expect(await controlTransport(server)).toBe(before + 1);
    // And the right token, the same way, is upgraded.
    expect((await rawRequest(server.port, '/', { Authorization: `Bearer ${TOKEN}` })).status).toBe(101);
  });

  it('a foreign Origin gets HTTP 403 even with the right token, and no connection; the own origin is upgraded', async () => {
    const port = server.port;
    const foreign = [
      'http://evil.example',
      `http://127.0.0.1:${port}.evil.example`,
      `http://127.0.0.1.evil.example:${port}`,
      `https://127.0.0.1:${port}`,
      `http://127.0.0.1:${port + 1}`,
      `ws://127.0.0.1:${port}`,
      'null',
      `http://localhost:${port}/x`,
      `file://`,
    ];
    const before = await controlTransport(server);
    for (const origin of foreign) {
      const r = await rawRequest(port, '/', { Authorization: `Bearer ${TOKEN}`, Origin: origin });
      expect(r.status, origin).toBe(403);
    }
    expect(await controlTransport(server)).toBe(before + 1);
    expect((await rawRequest(port, '/', { Authorization: `Bearer ${TOKEN}`, Origin: `http://127.0.0.1:${port}` })).status).toBe(101);
  });

  it('a request target that does not parse is refused (400), before the token check, and the server lives on', async () => {
    const before = await controlTransport(server);
    for (const target of ['//[', 'http://[', '/\\', 'http://:99999/']) {
      const r = await rawRequest(server.port, target, { Authorization: `Bearer ${TOKEN}` });
      expect(r.status, target).toBe(400);
      const noToken = await rawRequest(server.port, target, {});
      expect(noToken.status, target).toBe(400);
    }
    expect(server.proc.child.exitCode).toBeNull();
    expect(await controlTransport(server)).toBe(before + 1);
  });
});

describe('session keys', () => {
  it('are 32 base64url characters (192 random bits), all distinct, unrelated to the session id, with every position varied', async () => {
    const server = new RpcServer();
    const { client } = connectMemory(server);
    const keys: string[] = [];
    const ids: string[] = [];
    for (let i = 0; i < 500; i++) {
      const r = await ok(client, 'session.create', {});
      keys.push(r.session_key);
      ids.push(r.session_id);
    }
    for (const k of keys) expect(k).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(new Set(keys).size).toBe(keys.length);
    for (const [i, k] of keys.entries()) expect(k.includes((ids[i] as string).slice(4))).toBe(false);
    // Each of the 32 positions takes many values across 500 keys (uniform over 64: ~63 expected).
    for (let p = 0; p < 32; p++) expect(new Set(keys.map((k) => k[p])).size, `position ${p}`).toBeGreaterThan(45);
    // No shared prefixes beyond chance: 500 keys, no two share their first 6 characters (36 bits).
    expect(new Set(keys.map((k) => k.slice(0, 6))).size).toBe(keys.length);
    await server.shutdown();
  });

  it('every wrong key (same length, other lengths, another session’s, not a string) gets the same 4001 as an unknown session, and attaches nothing', async () => {
    const server = new RpcServer();
    const owner = connectMemory(server);
    const a = await ok(owner.client, 'session.create', {});
    const b = await ok(owner.client, 'session.create', {});
    await ok(owner.client, 'delegation.spawn', { session_id: a.session_id, tasks: [scriptedTask('x', [{ op: 'hang' }])] });
    const k = a.session_key;
    const flipped = `${k.slice(0, -1)}${k.endsWith('A') ? 'B' : 'A'}`;
    const attempts: unknown[] = [
      flipped,
      `${k.slice(1)}${k[0]}`,
      k.slice(0, -1),
      `${k}A`,
      k.toLowerCase() === k ? k.toUpperCase() : k.toLowerCase(),
      ` ${k}`,
      '',
      'x'.repeat(10_000),
      b.session_key,
      12345,
      null,
      [k],
      { k },
    ];
    const stranger = connectMemory(server);
    const answers = new Set<string>();
    for (const key of attempts) {
      const r = await stranger.client.call('session.attach', { session_id: a.session_id, session_key: key });
      answers.add(JSON.stringify(r.error));
      // Nothing attached: the stranger still cannot list the session.
      expect((await stranger.client.call('subagent.list', { session_id: a.session_id })).error?.code).toBe(4001);
    }
    answers.add(JSON.stringify((await stranger.client.call('session.attach', { session_id: 'ses_nope', session_key: k })).error));
    expect([...answers]).toEqual([JSON.stringify({ code: 4001, message: 'session not found or not owned by this transport' })]);
    // The stranger got no event of the session either.
    expect(stranger.client.events.filter((e) => e.session_id !== undefined)).toEqual([]);
    expect(await ok(stranger.client, 'session.attach', { session_id: a.session_id, session_key: k })).toMatchObject({ live_subagents: 1 });
    await server.shutdown();
  });
});

describe('no reply and no log line carries a stack, a session key or the token (--log-level trace)', () => {
  afterAll(async () => {
    await killAll();
  });

  it('through errors of every kind, refused upgrades, bad frames, failed children and shutdown', async () => {
    const server = await startWsServer(['--log-level', 'trace', '--max-message-bytes', '65536'], { token: TOKEN });
    const peers: WsPeer[] = [];
    const track = async () => {
      const { peer } = await connectWs(server);
      peers.push(peer);
      return peer;
    };
    const a = await track();
    const s1 = await call<{ session_id: string; session_key: string }>(a, 'session.create', { title: 'secret-title' });
    const s2 = await call<{ session_id: string; session_key: string }>(a, 'session.create');
    const keys = [s1.session_key, s2.session_key];
    const b = await track();
    await call(b, 'session.attach', { session_id: s1.session_id, session_key: s1.session_key });
    // Wrong keys close to the real ones: they must not be logged either.
    // (The flipped last character must differ from the real one: a key ending in Q would be right.)
    const flipped = s1.session_key.endsWith('Q') ? 'R' : 'Q';
    const wrongKeys = [`${s1.session_key.slice(0, -1)}${flipped}`, `${s1.session_key}Z`, s2.session_key];
    for (const session_key of wrongKeys) expect((await request(b, 'session.attach', { session_id: s1.session_id, session_key })).error?.code).toBe(4001);
    const session_id = s1.session_id;
    const spawn = await call<{ subagent_ids: string[] }>(a, 'delegation.spawn', {
      session_id,
      tasks: [
        scriptedTask('fails', [{ op: 'fail', error: 'it broke' }]),
        scriptedTask('waits', [{ op: 'wait_steer' }, { op: 'hang' }]),
        scriptedTask('hangs', [{ op: 'hang' }]),
      ],
    });
    await nextEvent(a, (e) => e.type === 'subagent.complete', WAIT_MS, 'the failed child');
    await call(a, 'subagent.steer', { session_id, subagent_id: spawn.subagent_ids[1], text: 'a steer' });
    await call(a, 'subagent.interrupt', { session_id, subagent_id: spawn.subagent_ids[2] });
    // Errors of every kind the wire can provoke.
    const bad: Array<[string, unknown]> = [
      ['subagent.steer', { session_id, subagent_id: spawn.subagent_ids[1], text: '   ' }],
      ['subagent.steer', { session_id, subagent_id: spawn.subagent_ids[1], text: 'x'.repeat(32769) }],
      ['subagent.steer', { session_id, text: 'x' }],
      ['subagent.list', { session_id: 'ses_unknown', session_key: s2.session_key, token: TOKEN }],
      ['delegation.spawn', { session_id, tasks: [] }],
      ['delegation.spawn', { session_id, tasks: [{ goal: '' }] }],
      ['delegation.spawn', { session_id, tasks: [{ goal: 'g', agent: { kind: 'nope' } }] }],
      ['delegation.spawn', { session_id, tasks: Array.from({ length: 4 }, () => ({ goal: 'g' })) }],
      ['delegation.result', { session_id, delegation_id: 'dg_nope' }],
      ['prompt.submit', { session_id, text: 'hi' }],
      ['no.such.method', {}],
      ['__proto__', {}],
      ['subagent.list', 'not an object'],
    ];
    for (const [method, params] of bad) expect((await request(a, method, params)).error, method).toBeDefined();
    a.send('{not json');
    a.send('{"jsonrpc":"1.0","id":"v","method":"server.info"}');
    a.send('[]');
    // Bad frames, each closing its own socket.
    const c = await track();
    c.ws.send('x'.repeat(70_000));
    expect((await c.closed).code).toBe(1009);
    const d = await track();
    d.ws.send(Buffer.from([0x7b, 0xff, 0x7d]), { binary: false });
    expect((await d.closed).code).toBe(1007);
    const e = await track();
    e.ws.send(Buffer.from('{}'), { binary: true });
    expect((await e.closed).code).toBe(1003);
    // Refused upgrades with wrong tokens, and a malformed target.
    const wrongTokens = [`${TOKEN.slice(0, -1)}#`, `${TOKEN}-longer`];
    for (const t of wrongTokens) await expect(openWs(server.url, { headers: { Authorization: `Bearer ${t}` } })).rejects.toThrow(/401/);
    await expect(openWs(`${server.url}?token=${wrongTokens[0]}`)).rejects.toThrow(/401/);
    expect((await rawRequest(server.port, '//[', {})).status).toBe(400);
    // A parked session's children, then shutdown with children running.
    await b.close();
    server.proc.child.kill('SIGTERM');
    expect(await server.proc.waitExit()).toEqual({ code: 0, signal: null });
    await server.proc.stderr.whenEnded();
    await server.proc.stdout.whenEnded();

    const logs = server.proc.stderr.all;
    // Every message any socket got, except the two session.create replies, whose job is to hand out a key.
    const all = peers.flatMap((p) => p.inbox.all);
    const creates = all.filter((m) => typeof (m as { result?: { session_key?: unknown } }).result?.session_key === 'string');
    expect(creates).toHaveLength(2);
    const replies = all.filter((m) => !creates.includes(m)).map((m) => JSON.stringify(m));
    // The run really logged at trace, and really answered errors.
    expect(logs.filter((l) => l.includes('"level":10') || l.includes('"level":20')).length).toBeGreaterThan(0);
    expect(logs.filter((l) => l.includes('"msg":"session attach refused"')).length).toBe(wrongKeys.length);
    expect(replies.filter((r) => r.includes('"error"')).length).toBeGreaterThanOrEqual(bad.length + 3);
    const secrets = [TOKEN, ...wrongTokens, ...keys, ...wrongKeys];
    for (const [where, lines] of [
      ['log', logs],
      ['reply', replies],
      ['stdout', server.proc.stdout.all],
    ] as const) {
      for (const line of lines) {
        expect(line, `${where} line with a stack: ${line.slice(0, 300)}`).not.toMatch(/ {4}at |\\n\s+at /);
        for (const secret of secrets) expect(line.includes(secret), `${where} line carries a secret: ${line.slice(0, 300)}`).toBe(false);
      }
    }
    // Neither the failed child's error, the steer text nor the title reaches the log.
    expect(logs.join('\n')).not.toMatch(/it broke|a steer|secret-title/);
    expect(server.proc.stdout.all).toEqual([]);
  });
});

describe('steer text is not logged at info level', () => {
  afterAll(async () => {
    await killAll();
  });

  it('a delivered steer and a missed one leave their ids in the info log, never their text', async () => {
    const MARK = `steer-marker-${Math.random().toString(36).slice(2)}`;
    const { proc, peer } = await startStdio(['--log-level', 'info']);
    const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
    const spawn = await call<{ subagent_ids: [string, string] }>(peer, 'delegation.spawn', {
      session_id,
      tasks: [scriptedTask('takes it', [{ op: 'wait_steer' }, { op: 'finish', summary: 'ok' }]), scriptedTask('misses it', [{ op: 'hang' }])],
    });
    const [taker, misser] = spawn.subagent_ids;
    await nextEvent(peer, (e) => e.type === 'subagent.start');
    await nextEvent(peer, (e) => e.type === 'subagent.start');
    const delivered = await call<{ steer_id: string }>(peer, 'subagent.steer', { session_id, subagent_id: taker, text: `${MARK} delivered` });
    await call(peer, 'subagent.steer', { session_id, subagent_id: misser, text: `${MARK} missed` });
    await nextEvent(peer, (e) => e.type === 'subagent.steer.delivered' && e.payload.steer_id === delivered.steer_id);
    await call(peer, 'subagent.interrupt', { session_id, subagent_id: misser });
    const done = await nextEvent(peer, (e) => e.type === 'subagent.complete' && e.payload.subagent_id === misser);
    expect(wireEntry(done.payload).missed_steer).toBe(`${MARK} missed`);
    // session.steer with no model running: rejected, and its text not logged either.
    await call(peer, 'session.steer', { session_id, text: `${MARK} to the parent` });
    proc.child.stdin.end();
    expect(await proc.waitExit()).toEqual({ code: 0, signal: null });
    await proc.stderr.whenEnded();
    const logs = proc.stderr.all;
    // The lifecycle lines are there, with ids (so the check below looked at a real info log).
    expect(logs.some((l) => l.includes('"msg":"steer delivered"') && l.includes(delivered.steer_id))).toBe(true);
    expect(logs.some((l) => l.includes('"msg":"child completed"') && l.includes(misser) && l.includes('"missed_steer":true'))).toBe(true);
    expect(logs.filter((l) => l.includes(MARK))).toEqual([]);
  });
});
