// What one incoming message may cost: a batch over max_batch is one -32600 and runs nothing; the
// bytes of one message's replies are bounded by max_reply_bytes, past which each remaining reply
// is -32001 `response too large` (the calls still took effect); and a transport that throws on an
// event loses that event for itself alone. First over the in-memory transport, then against a real
// `serve --ws` process, where a batch of tails whose reply would pass V8's string limit used to
// crash the server.
import { Buffer } from 'node:buffer';
import { PassThrough, Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { LOG_SERIALIZERS } from '../../src/log.ts';
import { Connection } from '../../src/rpc/connection.ts';
import type { Services } from '../../src/server/context.ts';
import { RpcCode } from '../../src/server/errors.ts';
import { JsonText } from '../../src/server/json-text.ts';
import { silentLogger } from '../../src/log.ts';
import { RpcServer, type ServerOptions } from '../../src/rpc/server.ts';
import { ReplyBudget } from '../../src/rpc/reply-budget.ts';
import { memoryPair } from '../../src/rpc/transports/memory.ts';
import { stdioTransport } from '../../src/rpc/transports/stdio.ts';
import { connectWs, Inbox, isReply, killAll, startWsServer, type Msg, type Peer, type Proc, type Received, type WireEvent } from '../helpers/process.ts';
import { BusLog } from '../helpers/rpc-client.ts';

/** 16 KiB of control characters: each is written `\u0001` in JSON, six bytes for one. */
const CONTROL = '\u0001'.repeat(16 * 1024);
const NOISY = { kind: 'scripted', steps: [{ op: 'say', text: CONTROL }, { op: 'hang' }] };
const HANG = { kind: 'scripted', steps: [{ op: 'hang' }] };

const req = (id: number, method: string, params?: Record<string, unknown>) => ({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });

// ---- an in-memory peer that sends raw messages and keeps every text it receives ----

interface RawPeer {
  send(message: unknown): void;
  readonly inbox: Inbox<Received>;
  /** Every text received, as sent by the server. */
  readonly texts: string[];
}

const servers: RpcServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.shutdown();
});

function serverWith(options: ServerOptions): RpcServer {
  const server = new RpcServer(options);
  servers.push(server);
  return server;
}

function rawPeer(server: RpcServer): RawPeer {
  const pair = memoryPair();
  const inbox = new Inbox<Received>('memory peer');
  const texts: string[] = [];
  pair.client.onmessage = (text) => {
    texts.push(text);
    inbox.push(JSON.parse(text) as Received);
  };
  server.connect(pair.server);
  return { send: (m) => pair.client.send(typeof m === 'string' ? m : JSON.stringify(m)), inbox, texts };
}

let nextId = 1_000_000;
async function call(p: RawPeer, method: string, params?: Record<string, unknown>): Promise<Record<string, unknown>> {
  const id = ++nextId;
  p.send(req(id, method, params));
  const r = (await p.inbox.take((m) => !Array.isArray(m) && m.id === id, 5_000, `the reply to ${method}`)) as Msg;
  if (r.error) throw new Error(`${method} failed: ${JSON.stringify(r.error)}`);
  return r.result as Record<string, unknown>;
}

const tooLarge = (id: unknown) => (m: Msg | undefined) => {
  expect(m, `reply ${String(id)}`).toMatchObject({ jsonrpc: '2.0', id, error: { code: RpcCode.ResponseTooLarge, message: 'response too large' } });
  expect(m).not.toHaveProperty('result');
};

/** A session with one child whose transcript is 16 KiB of control characters (its tail reply is ~98 KB). */
async function noisyChild(p: RawPeer): Promise<{ session_id: string; subagent_id: string }> {
  const { session_id } = (await call(p, 'session.create')) as { session_id: string };
  const spawn = (await call(p, 'delegation.spawn', { session_id, tasks: [{ goal: 'noisy', agent: NOISY }] })) as { subagent_ids: string[] };
  const subagent_id = spawn.subagent_ids[0] as string;
  await p.inbox.take((m) => !Array.isArray(m) && m.method === 'event' && (m.params as WireEvent).type === 'subagent.text', 5_000, 'the noisy text');
  return { session_id, subagent_id };
}

describe('a batch over max_batch', () => {
  it('is answered with one -32600 `batch too large` (id null) and none of its calls runs; max_batch itself runs', async () => {
    const server = serverWith({ max_batch: 4 });
    const p = rawPeer(server);
    p.send(Array.from({ length: 5 }, (_, i) => req(i + 1, 'session.create')));
    const refused = (await p.inbox.take(isReply)) as Msg;
    expect(Array.isArray(refused), JSON.stringify(refused).slice(0, 300)).toBe(false);
    expect(refused).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: RpcCode.InvalidRequest, message: 'Invalid Request: batch too large', data: { max_batch: 4 } },
    });
    expect(server.sessions.size).toBe(0);

    // Notifications count too: the batch as a whole is refused, so it is answered.
    p.send(Array.from({ length: 5 }, () => ({ jsonrpc: '2.0', method: 'session.create' })));
    expect(((await p.inbox.take(isReply)) as Msg).error?.code).toBe(RpcCode.InvalidRequest);
    expect(server.sessions.size).toBe(0);

    p.send(Array.from({ length: 4 }, (_, i) => req(i + 10, 'session.create')));
    const answered = (await p.inbox.take(isReply)) as Msg[];
    expect(answered.map((m) => m.id)).toEqual([10, 11, 12, 13]);
    expect(answered.every((m) => typeof (m.result as { session_id?: unknown }).session_id === 'string')).toBe(true);
    expect(server.sessions.size).toBe(4);
  });

  it('refuses out-of-range options when the server is made', () => {
    for (const bad of [{ max_batch: 0 }, { max_batch: 100_001 }, { max_batch: 1.5 }, { max_reply_bytes: 1023 }, { max_reply_bytes: 256 * 1024 * 1024 + 1 }]) {
      expect(() => new RpcServer(bad), JSON.stringify(bad)).toThrow(Object.keys(bad)[0]);
    }
  });

  it('defaults to 1,000 (server.info lists it)', async () => {
    const p = rawPeer(serverWith({}));
    const info = (await call(p, 'server.info')) as { limits: Record<string, number> };
    expect(info.limits.max_batch).toBe(1000);
    p.send(Array.from({ length: 1001 }, (_, i) => req(i + 1, 'server.info')));
    const refused = (await p.inbox.take(isReply)) as Msg;
    expect(Array.isArray(refused)).toBe(false);
    expect(refused.error?.code).toBe(RpcCode.InvalidRequest);
  });
});

describe('the reply bytes of one message', () => {
  it('past max_reply_bytes, each remaining reply of the batch is -32001; the early ones are intact and every call took effect', async () => {
    const max = 256 * 1024;
    const server = serverWith({ max_reply_bytes: max });
    const p = rawPeer(server);
    const { session_id, subagent_id } = await noisyChild(p);
    const tail = (id: number) => req(id, 'subagent.tail', { session_id, subagent_id });
    const spawn = (id: number, goal: string) => req(id, 'delegation.spawn', { session_id, tasks: [{ goal, agent: HANG }] });
    // Two tails (~98 KB each) fit in 256 KiB, the third does not.
    p.send([tail(1), tail(2), tail(3), spawn(4, 'late 1'), spawn(5, 'late 2'), tail(6)]);
    const replies = (await p.inbox.take(isReply, 5_000, 'the batch reply')) as Msg[];
    expect(replies.map((m) => m.id)).toEqual([1, 2, 3, 4, 5, 6]);
    for (const m of replies.slice(0, 2)) {
      expect(m.result).toMatchObject({ subagent_id, available: true });
      expect((m.result as { text: string }).text).toContain(CONTROL.slice(0, 8192));
    }
    for (const m of replies.slice(2)) tooLarge(m.id)(m);
    const text = p.texts.at(-1) as string;
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(max + 4 * 200);
    expect(Buffer.byteLength(text)).toBeGreaterThan(2 * 6 * 16_000);

    // Only the replies were replaced: both spawns ran.
    const list = (await call(p, 'subagent.list', { session_id })) as { subagents: { goal: string }[] };
    expect(list.subagents.map((s) => s.goal).sort()).toEqual(['late 1', 'late 2', 'noisy']);
  });

  it('counts UTF-8 bytes exactly, framing included, and replaces every reply after the first that does not fit', () => {
    // 12 bytes, one kept for a batch's closing bracket: '[' + 4 bytes, ',' + 'é' (2 bytes) + 3 = 11.
    const budget = new ReplyBudget(12, 1);
    expect(budget.take('abcd', 1, 1)).toBe('abcd');
    expect(budget.take('éab', 2, 1)).toBe('éab');
    expect(budget.spent).toBe(false);
    const replaced = JSON.parse(budget.take('x', 3, 1)) as Msg;
    tooLarge(3)(replaced);
    expect(replaced.error?.data).toEqual({ max_reply_bytes: 12 });
    // Spent: even an empty text is replaced from now on.
    expect(JSON.parse(budget.take('', 4)) as Msg).toMatchObject({ id: 4, error: { code: RpcCode.ResponseTooLarge } });
    // Three UTF-8 bytes for one UTF-16 unit: measured, not guessed from the length.
    const tight = new ReplyBudget(5);
    expect(tight.take('€a', 1)).toBe('€a');
    expect(tight.take('€', 2)).not.toBe('€');
  });

  it('a single reply over the bound is replaced; subagent.list over long goals too, alone and in a batch', async () => {
    const max = 64 * 1024;
    const p = rawPeer(serverWith({ max_reply_bytes: max }));
    const { session_id, subagent_id } = await noisyChild(p);
    p.send(req(1, 'subagent.tail', { session_id, subagent_id }));
    tooLarge(1)((await p.inbox.take(isReply)) as Msg);

    const long = (c: string) => c.repeat(40 * 1024);
    await call(p, 'delegation.spawn', {
      session_id,
      tasks: [
        { goal: long('a'), agent: HANG },
        { goal: long('b'), agent: HANG },
      ],
    });
    p.send(req(2, 'subagent.list', { session_id }));
    tooLarge(2)((await p.inbox.take(isReply)) as Msg);
    p.send([req(3, 'server.info'), req(4, 'subagent.list', { session_id }), req(5, 'server.info')]);
    const batch = (await p.inbox.take(isReply)) as Msg[];
    expect(batch[0]?.result).toMatchObject({ name: 'subrun' });
    tooLarge(4)(batch[1]);
    tooLarge(5)(batch[2]);
    // The connection goes on: the next message has a budget of its own.
    expect(await call(p, 'server.info')).toMatchObject({ name: 'subrun' });
    expect(p.texts.every((t) => Buffer.byteLength(t) <= max + 3 * 200 || t.includes('"method":"event"'))).toBe(true);
  });
});

describe('a result past the longest string V8 can make', () => {
  it('is -32001, not -32603, whether the handler or the reply could not build it; the rest of the batch is answered', async () => {
    const pair = memoryPair();
    const inbox = new Inbox<Received>('raw connection');
    pair.client.onmessage = (text) => inbox.push(JSON.parse(text) as Received);
    const methods = new Map([
      // A handler that builds its own result text (as subagent.list does) past the limit.
      ['build', { call: () => 'x'.repeat(2 ** 29) }],
      // A result text just under the limit, which its reply's envelope takes past it.
      ['huge', { call: () => new JsonText(`"${'x'.repeat(2 ** 29 - 40)}"`) }],
      ['small', { call: () => ({ ok: true }) }],
    ]);
    const conn = new Connection('tr_huge', pair.server, methods, {} as Services, silentLogger, () => undefined);
    conn.start();
    pair.client.send(JSON.stringify(req(1, 'build')));
    tooLarge(1)((await inbox.take(isReply)) as Msg);
    pair.client.send(JSON.stringify(req(2, 'huge')));
    tooLarge(2)((await inbox.take(isReply)) as Msg);
    pair.client.send(JSON.stringify([req(3, 'small'), req(4, 'huge'), req(5, 'small')]));
    const batch = (await inbox.take(isReply)) as Msg[];
    expect(batch[0]).toMatchObject({ id: 3, result: { ok: true } });
    tooLarge(4)(batch[1]);
    tooLarge(5)(batch[2]);
  });
});

describe('a transport that throws on send', () => {
  it('loses that one event for itself; the other transport of the slot gets every event, and the failure is logged without peer data', async () => {
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
        done();
      },
    });
    const server = serverWith({ logger: pino({ level: 'error', serializers: LOG_SERIALIZERS }, sink) });
    const bus = new BusLog(server);
    const pairA = memoryPair();
    const sendA = pairA.server.send.bind(pairA.server);
    // A transport that cannot send what it is given (as a string past V8's limit cannot be built).
    pairA.server.send = (text) => {
      if (text.includes('"type":"subagent.')) throw new RangeError('Invalid string length');
      sendA(text);
    };
    const a: RawPeer = { send: (m) => pairA.client.send(JSON.stringify(m)), inbox: new Inbox<Received>('peer A'), texts: [] };
    pairA.client.onmessage = (text) => a.inbox.push(JSON.parse(text) as Received);
    server.connect(pairA.server);
    const b = rawPeer(server);

    const { session_id, session_key } = (await call(a, 'session.create')) as { session_id: string; session_key: string };
    await call(b, 'session.attach', { session_id, session_key });
    const spawned = (await call(a, 'delegation.spawn', {
      session_id,
      tasks: [{ goal: 'g', agent: { kind: 'scripted', steps: [{ op: 'say', text: 'hello' }, { op: 'hang' }] } }],
    })) as {
      subagent_ids: string[];
    };
    await bus.wait((e) => e.type === 'subagent.text' && e.subagent_id === spawned.subagent_ids[0]);
    // A round trip on each: every event sent before the reply has arrived.
    await call(a, 'server.info');
    await call(b, 'server.info');
    const typesOf = (p: RawPeer) => p.inbox.pending.filter((m) => !Array.isArray(m) && m.method === 'event').map((m) => (m as Msg).params as WireEvent);
    const bTypes = typesOf(b).map((e) => e.type);
    expect(bTypes).toEqual(expect.arrayContaining(['subagent.spawn_requested', 'delegation.dispatched', 'subagent.start', 'subagent.text']));
    // B's numbering has no gap: A's failures took nothing from it.
    const seqs = typesOf(b)
      .filter((e) => e.session_id === session_id)
      .map((e) => e.seq);
    expect(seqs).toEqual(seqs.map((_, i) => (seqs[0] as number) + i));
    expect(typesOf(a).map((e) => e.type)).toContain('delegation.dispatched');
    expect(typesOf(a).map((e) => e.type)).not.toContain('subagent.text');
    const failures = lines.filter((l) => l.msg === 'event not sent');
    expect(failures.length).toBeGreaterThanOrEqual(3);
    for (const l of failures) {
      expect(l.err).toEqual({ type: 'RangeError', message: 'Invalid string length' });
      expect(JSON.stringify(l)).not.toContain('hello');
    }
  });
});

describe('the stdio transport', () => {
  it('sends, in order, what one turn adds up to past the longest string V8 can make, instead of throwing from its join', async () => {
    // Three texts of 200 Mi units sent in one turn: joined, they would be 600 Mi, past the limit
    // (2^29 - 24). One string is made; the writes keep it as is (no Buffer copy of it).
    const big = 'x'.repeat(200 * 1024 * 1024);
    const chunks: { length: number; head: string }[] = [];
    const output = new Writable({
      decodeStrings: false,
      write(chunk: string, _enc, done) {
        chunks.push({ length: chunk.length, head: chunk.slice(0, 2) });
        done();
      },
    });
    const t = stdioTransport({ input: new PassThrough(), output, max_message_bytes: 1024 });
    t.start();
    expect(() => {
      t.send('a');
      t.send(big);
      t.send(big);
      t.send(big);
      t.send('b');
    }).not.toThrow();
    await new Promise<void>((resolve) => process.nextTick(resolve));
    expect(chunks.map((c) => [c.length, c.head])).toEqual([
      [2, 'a\n'],
      [big.length + 1, 'xx'],
      [big.length + 1, 'xx'],
      [big.length + 1, 'xx'],
      [2, 'b\n'],
    ]);
  });
});

// ---- the real process ----

/** Resolves with the first matching message, or rejects as soon as the server exits. */
function takeOrExit(proc: Proc, peer: Peer, pred: (m: Received) => boolean, what: string, ms = 20_000): Promise<Received> {
  return Promise.race([
    peer.inbox.take(pred, ms, what),
    proc.exited.then((e) => {
      throw new Error(
        `the server exited (code ${String(e.code)}, signal ${String(e.signal)}) before ${what}; stderr: ${proc.stderr.all.join('\n').slice(0, 600)}`,
      );
    }),
  ]);
}

describe('serve --ws: a batch whose reply would pass the longest string V8 can make', () => {
  afterAll(async () => {
    await killAll();
  });

  it(
    'answers 6,000 tails of 16 KiB of control characters with early replies intact, the rest -32001, and serves on: same connection and another session',
    { timeout: 60_000 },
    async () => {
      // The batch limit is raised through its environment twin, so that the byte bound is what
      // applies (and so that a server without these options still starts, and shows the crash).
      const server = await startWsServer([], { env: { SUBRUN_MAX_BATCH: '10000' } });
      const { peer: a } = await connectWs(server);
      const { peer: b } = await connectWs(server);
      const rpc = async (peer: Peer, id: string, method: string, params?: Record<string, unknown>) => {
        peer.send(JSON.stringify({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) }));
        const m = (await takeOrExit(server.proc, peer, (x) => !Array.isArray(x) && x.id === id, `the reply to ${method}`)) as Msg;
        if (m.error) throw new Error(`${method}: ${JSON.stringify(m.error)}`);
        return m.result as Record<string, unknown>;
      };

      const { session_id } = (await rpc(a, 'a1', 'session.create')) as { session_id: string };
      const spawned = (await rpc(a, 'a2', 'delegation.spawn', { session_id, tasks: [{ goal: 'noisy', agent: NOISY }] })) as { subagent_ids: string[] };
      const subagent_id = spawned.subagent_ids[0] as string;
      await takeOrExit(server.proc, a, (m) => !Array.isArray(m) && m.method === 'event' && (m.params as WireEvent).type === 'subagent.text', 'the noisy text');
      const other = (await rpc(b, 'b1', 'session.create')) as { session_id: string };

      const batch = Array.from({ length: 6000 }, (_, i) => req(i, 'subagent.tail', { session_id, subagent_id }));
      const sent = JSON.stringify(batch);
      expect(sent.length).toBeLessThan(1024 * 1024);
      a.send(sent);
      const replies = (await takeOrExit(server.proc, a, (m) => Array.isArray(m), 'the batch reply')) as Msg[];
      expect(replies).toHaveLength(6000);
      expect(replies.map((m) => m.id)).toEqual(batch.map((r) => r.id));
      const intact = replies.findIndex((m) => m.error !== undefined);
      // The default bound (32 MiB) holds ~340 of these ~98 KB replies.
      expect(intact).toBeGreaterThan(100);
      expect(intact).toBeLessThan(1000);
      for (const m of replies.slice(0, intact)) expect((m.result as { available: boolean; text: string }).text).toHaveLength(16 * 1024);
      for (const m of replies.slice(intact)) tooLarge(m.id)(m);

      // Alive, on the same connection and for another session on another connection.
      expect(server.proc.child.exitCode).toBeNull();
      expect(await rpc(a, 'a3', 'server.info')).toMatchObject({ name: 'subrun' });
      const spawn = (await rpc(b, 'b2', 'delegation.spawn', { session_id: other.session_id, tasks: [{ goal: 'calm', agent: HANG }] })) as {
        subagent_ids: string[];
      };
      const list = (await rpc(b, 'b3', 'subagent.list', { session_id: other.session_id })) as { subagents: { subagent_id: string }[] };
      expect(list.subagents.map((s) => s.subagent_id)).toEqual(spawn.subagent_ids);
    },
  );
});
