// `subrun serve --stdio` as a real child process over real pipes: line framing (LF only, CRLF
// tolerated, U+2028/U+2029 are not breaks, splits and coalesced writes, blank lines, oversize
// lines), stdout carrying the protocol alone, and shutdown (stdin closed, SIGTERM).
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RpcCode } from '../../src/server/errors.ts';
import { call, killAll, nextEvent, nextReply, request, scriptedTask, startStdio, type Msg, type Peer, type Proc, type Received } from '../helpers/process.ts';
import { wireEntry } from '../helpers/wire-entry.ts';

const MAX = 1024;

/** Writes raw bytes to the child's stdin and resolves once they were handed to the pipe. */
function write(proc: Proc, data: string | Buffer): Promise<void> {
  return new Promise((resolve, reject) => proc.child.stdin.write(data, (err) => (err ? reject(err) : resolve())));
}

/** A request line of exactly `bytes` bytes (without its LF): server.info padded with an ignored param. */
function paddedLine(bytes: number, id: string): string {
  const base = JSON.stringify({ jsonrpc: '2.0', method: 'server.info', id, params: { pad: '' } });
  const pad = bytes - Buffer.byteLength(base);
  if (pad < 0) throw new Error('line too short for its envelope');
  return JSON.stringify({ jsonrpc: '2.0', method: 'server.info', id, params: { pad: 'x'.repeat(pad) } });
}

let sentinels = 0;
/** Sends a sentinel request and asserts that the very next reply is its own. */
async function expectNextReplyIsSentinel(proc: Proc, peer: Peer): Promise<void> {
  const id = `sentinel-${++sentinels}`;
  await write(proc, `${JSON.stringify({ jsonrpc: '2.0', method: 'server.info', id })}\n`);
  expect(await nextReply(peer)).toMatchObject({ id, result: { name: 'subrun' } });
}

const one = (r: Received): Msg => {
  expect(Array.isArray(r), JSON.stringify(r)).toBe(false);
  return r as Msg;
};

describe('stdio framing', () => {
  let proc: Proc;
  let peer: Peer;

  beforeAll(async () => {
    ({ proc, peer } = await startStdio(['--max-message-bytes', String(MAX)]));
  });
  afterAll(async () => {
    await killAll();
  });

  it('answers two messages that arrive in one write, each once', async () => {
    await write(proc, '{"jsonrpc":"2.0","method":"server.info","id":"w1"}\n{"jsonrpc":"2.0","method":"session.create","id":"w2"}\n');
    const ids = [one(await nextReply(peer)).id, one(await nextReply(peer)).id];
    expect(ids.sort()).toStrictEqual(['w1', 'w2']);
    await expectNextReplyIsSentinel(proc, peer);
  });

  it('reassembles one message written byte by byte, splitting inside multi-byte characters', async () => {
    const id = 'é€😀\u2028中文';
    const bytes = Buffer.from(`${JSON.stringify({ jsonrpc: '2.0', method: 'server.info', id })}\n`, 'utf8');
    expect(bytes.length).toBeGreaterThan(bytes.toString('utf8').length); // multi-byte characters present
    for (let i = 0; i < bytes.length; i++) {
      await write(proc, bytes.subarray(i, i + 1));
      // Pace the bytes so that the server reads them in separate chunks.
      if (i % 4 === 0) await delay(1);
    }
    expect(one(await nextReply(peer))).toMatchObject({ id, result: { name: 'subrun' } });
    await expectNextReplyIsSentinel(proc, peer);
  });

  it('reassembles a message split right inside a 4-byte character across two writes', async () => {
    const line = Buffer.from('{"jsonrpc":"2.0","method":"server.info","id":"a😀b"}\n', 'utf8');
    const at = line.indexOf(Buffer.from('😀', 'utf8')) + 2;
    await write(proc, line.subarray(0, at));
    await delay(20);
    await write(proc, line.subarray(at));
    expect(one(await nextReply(peer))).toMatchObject({ id: 'a😀b' });
    await expectNextReplyIsSentinel(proc, peer);
  });

  it('reassembles one message whose LF arrives alone, and a message that starts in the same chunk as the previous LF', async () => {
    await write(proc, '{"jsonrpc":"2.0","method":"server.info","id":"s1"}');
    await delay(10);
    await write(proc, '\n{"jsonrpc":"2.0","method":"ser');
    await delay(10);
    await write(proc, 'ver.info","id":"s2"}\n');
    const ids = [one(await nextReply(peer)).id, one(await nextReply(peer)).id];
    expect(ids.sort()).toStrictEqual(['s1', 's2']);
    await expectNextReplyIsSentinel(proc, peer);
  });

  it('tolerates CRLF line ends', async () => {
    await write(proc, '{"jsonrpc":"2.0","method":"server.info","id":"crlf1"}\r\n{"jsonrpc":"2.0","method":"server.info","id":"crlf2"}\r\n');
    const ids = [one(await nextReply(peer)).id, one(await nextReply(peer)).id];
    expect(ids.sort()).toStrictEqual(['crlf1', 'crlf2']);
    await expectNextReplyIsSentinel(proc, peer);
  });

  it('splits on LF only: a lone CR inside a line is not a break (one parse error, not two replies)', async () => {
    await write(proc, '{"jsonrpc":"2.0","method":"server.info","id":"cr1"}\r{"jsonrpc":"2.0","method":"server.info","id":"cr2"}\n');
    expect(one(await nextReply(peer))).toMatchObject({ id: null, error: { code: RpcCode.ParseError } });
    await expectNextReplyIsSentinel(proc, peer);
  });

  it('does not break lines at U+2028 / U+2029 inside strings: they come back verbatim', async () => {
    const id = 'line\u2028sep\u2029para';
    // Raw (unescaped) characters on the wire, in the id and in the method name.
    const line = `{"jsonrpc":"2.0","method":"no\u2028such\u2029method","id":"${id}"}\n`;
    expect(line).toContain('\u2028');
    await write(proc, line);
    const r = one(await nextReply(peer));
    expect(r.id).toBe(id);
    expect(r.error?.code).toBe(RpcCode.MethodNotFound);
    expect(r.error?.message).toContain('no\u2028such\u2029method');
    await expectNextReplyIsSentinel(proc, peer);
  });

  it('treats U+2028 between tokens as part of the one line (one parse error, not two fragments)', async () => {
    await write(proc, '{"jsonrpc":"2.0",\u2028"method":"server.info","id":5}\n');
    expect(one(await nextReply(peer))).toMatchObject({ id: null, error: { code: RpcCode.ParseError } });
    await expectNextReplyIsSentinel(proc, peer);
  });

  it('ignores blank and whitespace-only lines', async () => {
    await write(proc, '\n\n   \n\r\n\t\n \r\n');
    await expectNextReplyIsSentinel(proc, peer);
  });

  it('accepts a line of exactly --max-message-bytes', async () => {
    const line = paddedLine(MAX, 'exact');
    expect(Buffer.byteLength(line)).toBe(MAX);
    await write(proc, `${line}\n`);
    expect(one(await nextReply(peer))).toMatchObject({ id: 'exact', result: { name: 'subrun' } });
    await expectNextReplyIsSentinel(proc, peer);
  });

  it('answers a line one byte over the limit with -32600 id null, and goes on at the next line', async () => {
    const over = paddedLine(MAX + 1, 'over');
    const after = JSON.stringify({ jsonrpc: '2.0', method: 'server.info', id: 'after' });
    await write(proc, `${over}\n${after}\n`);
    const r = one(await nextReply(peer));
    expect(r).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: RpcCode.InvalidRequest } });
    expect(r.error?.message).toMatch(/too large/i);
    expect(one(await nextReply(peer))).toMatchObject({ id: 'after', result: { name: 'subrun' } });
    await expectNextReplyIsSentinel(proc, peer);
  });

  it('answers a long line as soon as it is known to be too long, once, and resumes after its LF', async () => {
    const over = Buffer.from(paddedLine(5 * MAX, 'long'));
    // First part: over the limit, no LF yet. The -32600 must come before the line ends.
    await write(proc, over.subarray(0, 2 * MAX));
    expect(one(await nextReply(peer))).toMatchObject({ id: null, error: { code: RpcCode.InvalidRequest } });
    // The rest trickles in, in pieces; none of it may be parsed as a message of its own.
    for (let i = 2 * MAX; i < over.length; i += 700) {
      await write(proc, over.subarray(i, Math.min(i + 700, over.length)));
      await delay(1);
    }
    await write(proc, `\n${JSON.stringify({ jsonrpc: '2.0', method: 'server.info', id: 'resumed' })}\n`);
    expect(one(await nextReply(peer))).toMatchObject({ id: 'resumed', result: { name: 'subrun' } });
    await expectNextReplyIsSentinel(proc, peer);
  });

  it('handles several oversize lines in one write: one -32600 each', async () => {
    const over = paddedLine(MAX + 100, 'o');
    await write(proc, `${over}\n${over}\n{"jsonrpc":"2.0","method":"server.info","id":"between"}\n${over}\n`);
    const got = [one(await nextReply(peer)), one(await nextReply(peer)), one(await nextReply(peer)), one(await nextReply(peer))];
    expect(got.filter((m) => m.error?.code === RpcCode.InvalidRequest && m.id === null)).toHaveLength(3);
    expect(got.filter((m) => m.id === 'between')).toHaveLength(1);
    await expectNextReplyIsSentinel(proc, peer);
  });

  it('counts the limit in bytes, not characters', async () => {
    // 400 three-byte characters: 1200 bytes but only ~450 UTF-16 units in the line.
    const line = JSON.stringify({ jsonrpc: '2.0', method: 'server.info', id: 'bytes', params: { pad: '€'.repeat(400) } });
    expect(line.length).toBeLessThan(MAX);
    expect(Buffer.byteLength(line)).toBeGreaterThan(MAX);
    await write(proc, `${line}\n`);
    expect(one(await nextReply(peer))).toMatchObject({ id: null, error: { code: RpcCode.InvalidRequest } });
    await expectNextReplyIsSentinel(proc, peer);
  });
});

describe('stdio: stdout is the protocol, logs go to stderr', () => {
  afterEach(async () => {
    await killAll();
  });

  it('with --log-level debug, every stdout line is JSON-RPC and the logs are on stderr', async () => {
    const { proc, peer } = await startStdio(['--log-level', 'debug']);
    const { session_id } = await call<{ session_id: string }>(peer, 'session.create', { title: 'logs' });
    const spawn = await call<{ delegation_id: string }>(peer, 'delegation.spawn', {
      session_id,
      tasks: [
        scriptedTask('chatty', [
          { op: 'think', text: 'thinking\nover two lines' },
          { op: 'tool', name: 'read_file', args: { path: 'x' }, result: 'contents\nwith LF' },
          { op: 'say', text: 'done\r\nwith CRLF and \u2028' },
        ]),
        scriptedTask('failing', [{ op: 'fail', error: 'deliberate' }]),
      ],
    });
    await nextEvent(peer, (e) => e.type === 'delegation.complete' && e.payload.delegation_id === spawn.delegation_id);
    // Errors and notifications too.
    await write(proc, 'not json\n{"jsonrpc":"2.0","method":"nope","id":1}\n{"jsonrpc":"2.0","method":"nope"}\n');
    await nextReply(peer);
    await nextReply(peer);
    proc.child.stdin.end();
    expect(await proc.waitExit()).toStrictEqual({ code: 0, signal: null });
    await Promise.all([proc.stdout.whenEnded(), proc.stderr.whenEnded()]);

    expect(proc.stdout.all.length).toBeGreaterThan(8);
    for (const line of proc.stdout.all) {
      const m = JSON.parse(line) as Msg;
      expect(m.jsonrpc, line).toBe('2.0');
      const isNotification = typeof m.method === 'string' && !('id' in m);
      const isResponse = 'id' in m && 'result' in m !== 'error' in m;
      expect(isNotification || isResponse, line).toBe(true);
    }
    // The log lines are on stderr (pino JSON), including the shutdown at info level.
    const logs = proc.stderr.all.filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as { level: number; msg: string; why?: string });
    expect(logs.some((l) => l.msg === 'shutting down' && l.why === 'stdin closed')).toBe(true);
    for (const l of logs) expect(l).not.toHaveProperty('jsonrpc');
  });
});

describe('stdio: shutdown', () => {
  afterEach(async () => {
    await killAll();
  });

  it('closing stdin stops the running children and exits 0', async () => {
    const { proc, peer } = await startStdio(['--log-level', 'info']);
    const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
    // Neither child ends on its own within the bound. Shutdown awaits every child, so exit 0
    // means both were stopped (an unfinished shutdown would leave bin/subrun.js's top-level await
    // unsettled: exit 13, or no exit at all).
    await call(peer, 'delegation.spawn', {
      session_id,
      tasks: [scriptedTask('hang', [{ op: 'hang' }]), scriptedTask('sleeper', [{ op: 'sleep', ms: 600_000 }])],
    });
    await nextEvent(peer, (e) => e.type === 'subagent.start');
    await nextEvent(peer, (e) => e.type === 'subagent.start');
    const list = await call<{ subagents: { status: string }[] }>(peer, 'subagent.list', { session_id });
    expect(list.subagents.map((s) => s.status)).toStrictEqual(['running', 'running']);
    proc.child.stdin.end();
    expect(await proc.waitExit()).toStrictEqual({ code: 0, signal: null });
    await proc.stderr.whenEnded();
    expect(proc.stderr.all.some((l) => l.includes('"why":"stdin closed"'))).toBe(true);
  });

  it('SIGTERM with a running child sends its subagent.complete (interrupted), then exits 0', async () => {
    const { proc, peer } = await startStdio();
    const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
    const spawn = await call<{ subagent_ids: string[]; delegation_id: string }>(peer, 'delegation.spawn', {
      session_id,
      tasks: [scriptedTask('hang', [{ op: 'say', text: 'working on it' }, { op: 'hang' }])],
    });
    const [child] = spawn.subagent_ids;
    await nextEvent(peer, (e) => e.type === 'subagent.text' && e.payload.subagent_id === child);
    proc.child.kill('SIGTERM');
    const complete = await nextEvent(peer, (e) => e.type === 'subagent.complete' && e.payload.subagent_id === child);
    expect(complete.session_id).toBe(session_id);
    expect(wireEntry(complete.payload)).toMatchObject({ subagent_id: child, status: 'interrupted', summary: 'working on it' });
    const done = await nextEvent(peer, (e) => e.type === 'delegation.complete');
    expect(done.payload).toMatchObject({ delegation_id: spawn.delegation_id, results: [{ status: 'interrupted' }] });
    expect(await proc.waitExit()).toStrictEqual({ code: 0, signal: null });
    await peer.inbox.whenEnded();
  });

  it('SIGINT does the same', async () => {
    const { proc, peer } = await startStdio();
    const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
    await call(peer, 'delegation.spawn', { session_id, tasks: [scriptedTask('hang', [{ op: 'hang' }])] });
    await nextEvent(peer, (e) => e.type === 'subagent.start');
    proc.child.kill('SIGINT');
    const complete = await nextEvent(peer, (e) => e.type === 'subagent.complete');
    expect(wireEntry(complete.payload)).toMatchObject({ status: 'interrupted' });
    expect(await proc.waitExit()).toStrictEqual({ code: 0, signal: null });
  });

  it('answers requests while children run (the server is not blocked by a hanging child)', async () => {
    const { peer } = await startStdio();
    const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
    await call(peer, 'delegation.spawn', { session_id, tasks: [scriptedTask('hang', [{ op: 'hang' }])] });
    const r = await request(peer, 'delegation.status', { session_id });
    expect(r.result).toMatchObject({ active: [{ status: expect.stringMatching(/queued|running/) }] });
  });
});
