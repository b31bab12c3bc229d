// JSON-RPC 2.0 conformance, as a table of vectors run over BOTH real transports: a `serve --stdio`
// child (its stdin/stdout pipes) and a `serve --ws` child (a WebSocket on 127.0.0.1). The vectors
// are the spec's own examples (https://www.jsonrpc.org/specification, section 7) adapted to our
// methods — `server.info` and `session.create` stand in for `subtract`/`sum` — plus the protocol's
// own rules (protocol.md sections 1 and 2).
//
// "No reply" is checked without sleeping: after the vector a sentinel request is sent, and the next
// reply must be the sentinel's. Every vector is followed by a sentinel, so an extra reply to any
// vector would also be caught.
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { LOG_SERIALIZERS } from '../../src/log.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Connection } from '../../src/rpc/connection.ts';
import type { Services } from '../../src/server/context.ts';
import type { RpcMethod } from '../../src/rpc/connection.ts';
import { RpcCode, toRpcError } from '../../src/server/errors.ts';
import { memoryPair } from '../../src/rpc/transports/memory.ts';
import { connectWs, killAll, nextReply, startStdio, startWsServer, type Msg, type Peer, type Received } from '../helpers/process.ts';

const INVALID_REQUEST = RpcCode.InvalidRequest;

/** Asserts a single (non-batch) error response with this code and id. */
function isError(code: number, id: unknown) {
  return (r: Received) => {
    expect(Array.isArray(r), JSON.stringify(r)).toBe(false);
    const m = r as Msg;
    expect(m.jsonrpc).toBe('2.0');
    expect(m).not.toHaveProperty('result');
    expect(m.id).toStrictEqual(id);
    expect(m.error?.code, JSON.stringify(r)).toBe(code);
    expect(typeof m.error?.message).toBe('string');
  };
}

/** Asserts a single (non-batch) success response with this id. */
function isResult(id: unknown, check: (result: Record<string, unknown>) => void = () => undefined) {
  return (r: Received) => {
    expect(Array.isArray(r), JSON.stringify(r)).toBe(false);
    const m = r as Msg;
    expect(m.jsonrpc).toBe('2.0');
    expect(m).not.toHaveProperty('error');
    expect(m.id).toStrictEqual(id);
    expect(m.result).toBeTypeOf('object');
    check(m.result as Record<string, unknown>);
  };
}

const isServerInfo = (result: Record<string, unknown>) => {
  expect(result).toMatchObject({ name: 'subrun', protocol_version: 1 });
  expect(result.methods).toContain('session.create');
};
const isNewSession = (result: Record<string, unknown>) => {
  expect(result).toMatchObject({ session_id: expect.stringMatching(/\S/), session_key: expect.stringMatching(/\S/), generation: 1 });
};

/** Asserts a batch response: an array, one element per expected check, in request order. */
function isBatch(...checks: ((r: Received) => void)[]) {
  return (r: Received) => {
    expect(Array.isArray(r), JSON.stringify(r)).toBe(true);
    const arr = r as Msg[];
    expect(arr).toHaveLength(checks.length);
    checks.forEach((check, i) => check(arr[i] as Msg));
  };
}

const invalidParams = (id: unknown) => (r: Received) => {
  isError(RpcCode.InvalidParams, id)(r);
  const data = (r as Msg).error?.data as { issues?: { path: string; message: string }[] } | undefined;
  expect(data?.issues?.length, JSON.stringify(r)).toBeGreaterThan(0);
  expect(data?.issues?.[0]?.path).toBe('params');
};

interface Vector {
  readonly name: string;
  readonly send: string;
  /** null: the vector must get no reply at all. */
  readonly reply: ((r: Received) => void) | null;
}

const j = (v: unknown) => JSON.stringify(v);

const VECTORS: readonly Vector[] = [
  // --- the spec's examples, adapted ---
  { name: 'call with named params', send: '{"jsonrpc":"2.0","method":"server.info","params":{},"id":1}', reply: isResult(1, isServerInfo) },
  {
    name: 'call with named params (session.create)',
    send: '{"jsonrpc":"2.0","method":"session.create","params":{"title":"subtract"},"id":2}',
    reply: isResult(2, isNewSession),
  },
  {
    name: 'call with positional params is -32602 (params must be an object)',
    send: '{"jsonrpc":"2.0","method":"server.info","params":[42,23],"id":3}',
    reply: invalidParams(3),
  },
  { name: 'a notification gets no reply', send: '{"jsonrpc":"2.0","method":"server.info","params":{}}', reply: null },
  { name: 'a notification without params gets no reply', send: '{"jsonrpc":"2.0","method":"session.create"}', reply: null },
  { name: 'a notification of an unknown method gets no reply', send: '{"jsonrpc":"2.0","method":"foobar"}', reply: null },
  { name: 'a notification with bad params gets no reply', send: '{"jsonrpc":"2.0","method":"server.info","params":[1,2]}', reply: null },
  { name: 'a notification whose handler fails gets no reply', send: '{"jsonrpc":"2.0","method":"subagent.list","params":{"session_id":"nope"}}', reply: null },
  { name: 'non-existent method: -32601', send: '{"jsonrpc":"2.0","method":"foobar","id":"1"}', reply: isError(RpcCode.MethodNotFound, '1') },
  { name: 'invalid JSON: -32700 with id null', send: '{"jsonrpc":"2.0","method":"foobar,"params":"bar","baz]', reply: isError(RpcCode.ParseError, null) },
  { name: 'invalid Request object: -32600 with id null', send: '{"jsonrpc":"2.0","method":1,"params":"bar"}', reply: isError(INVALID_REQUEST, null) },
  {
    name: 'batch with invalid JSON: one -32700, not an array',
    send: '[{"jsonrpc":"2.0","method":"server.info","params":{},"id":"1"},{"jsonrpc":"2.0","method"]',
    reply: isError(RpcCode.ParseError, null),
  },
  { name: 'empty array: one -32600, not an array', send: '[]', reply: isError(INVALID_REQUEST, null) },
  { name: 'empty array with whitespace: one -32600', send: ' [ ] ', reply: isError(INVALID_REQUEST, null) },
  { name: 'invalid batch [1]: an array of one -32600', send: '[1]', reply: isBatch(isError(INVALID_REQUEST, null)) },
  {
    name: 'invalid batch [1,2,3]: an array of three -32600',
    send: '[1,2,3]',
    reply: isBatch(isError(INVALID_REQUEST, null), isError(INVALID_REQUEST, null), isError(INVALID_REQUEST, null)),
  },
  { name: 'invalid batch [null]: an array of one -32600', send: '[null]', reply: isBatch(isError(INVALID_REQUEST, null)) },
  { name: 'batch of nested arrays [[]]: an array of one -32600', send: '[[]]', reply: isBatch(isError(INVALID_REQUEST, null)) },
  {
    name: 'mixed batch: one response per request, in order, none for notifications',
    send: j([
      { jsonrpc: '2.0', method: 'server.info', params: {}, id: '1' },
      { jsonrpc: '2.0', method: 'server.info', params: {} },
      { jsonrpc: '2.0', method: 'session.create', params: { title: 'x' }, id: '2' },
      { foo: 'boo' },
      { jsonrpc: '2.0', method: 'foo.get', params: { name: 'myself' }, id: '5' },
      { jsonrpc: '2.0', method: 'session.create', id: '9' },
      { jsonrpc: '2.0', method: 'foobar' },
      { jsonrpc: '2.0', method: 'server.info', params: 7, id: 10 },
    ]),
    reply: isBatch(
      isResult('1', isServerInfo),
      isResult('2', isNewSession),
      isError(INVALID_REQUEST, null),
      isError(RpcCode.MethodNotFound, '5'),
      isResult('9', isNewSession),
      invalidParams(10),
    ),
  },
  {
    name: 'all-notification batch: no reply at all',
    send: j([
      { jsonrpc: '2.0', method: 'server.info', params: {} },
      { jsonrpc: '2.0', method: 'foobar' },
      { jsonrpc: '2.0', method: 'session.create', params: 5 },
    ]),
    reply: null,
  },
  { name: 'a one-call batch is answered with an array', send: '[{"jsonrpc":"2.0","method":"server.info","id":7}]', reply: isBatch(isResult(7, isServerInfo)) },
  {
    name: 'a batch with one call and one notification is answered with an array of one',
    send: '[{"jsonrpc":"2.0","method":"server.info"},{"jsonrpc":"2.0","method":"server.info","id":"only"}]',
    reply: isBatch(isResult('only', isServerInfo)),
  },

  // --- the envelope ---
  { name: 'jsonrpc "1.0": -32600 (the readable id is echoed)', send: '{"jsonrpc":"1.0","method":"server.info","id":11}', reply: isError(INVALID_REQUEST, 11) },
  { name: 'jsonrpc missing: -32600', send: '{"method":"server.info","id":12}', reply: isError(INVALID_REQUEST, 12) },
  { name: 'jsonrpc as a number 2.0: -32600', send: '{"jsonrpc":2.0,"method":"server.info","id":13}', reply: isError(INVALID_REQUEST, 13) },
  { name: 'jsonrpc "1.0" without an id is still answered, id null', send: '{"jsonrpc":"1.0","method":"server.info"}', reply: isError(INVALID_REQUEST, null) },
  { name: 'method missing: -32600', send: '{"jsonrpc":"2.0","id":14}', reply: isError(INVALID_REQUEST, 14) },
  { name: 'a scalar message: -32600 id null', send: '42', reply: isError(INVALID_REQUEST, null) },
  { name: 'a string message: -32600 id null', send: '"server.info"', reply: isError(INVALID_REQUEST, null) },
  { name: 'an object id: -32600 id null', send: '{"jsonrpc":"2.0","method":"server.info","id":{"a":1}}', reply: isError(INVALID_REQUEST, null) },
  { name: 'an array id: -32600 id null', send: '{"jsonrpc":"2.0","method":"server.info","id":[1]}', reply: isError(INVALID_REQUEST, null) },
  { name: 'a boolean id: -32600 id null', send: '{"jsonrpc":"2.0","method":"server.info","id":true}', reply: isError(INVALID_REQUEST, null) },
  {
    name: 'an id that overflows to Infinity: -32600 id null',
    send: '{"jsonrpc":"2.0","method":"server.info","id":1e400}',
    reply: isError(INVALID_REQUEST, null),
  },
  { name: 'id null is a request, answered with id null', send: '{"jsonrpc":"2.0","method":"server.info","id":null}', reply: isResult(null, isServerInfo) },
  {
    name: 'a string id is echoed',
    send: '{"jsonrpc":"2.0","method":"server.info","id":"abc-\\u00e9-\\ud83d\\ude00"}',
    reply: isResult('abc-é-😀', isServerInfo),
  },
  { name: 'an empty string id is echoed', send: '{"jsonrpc":"2.0","method":"server.info","id":""}', reply: isResult('', isServerInfo) },
  { name: 'a number id is echoed', send: '{"jsonrpc":"2.0","method":"server.info","id":42}', reply: isResult(42, isServerInfo) },
  { name: 'id 0 is echoed', send: '{"jsonrpc":"2.0","method":"server.info","id":0}', reply: isResult(0, isServerInfo) },
  { name: 'a negative number id is echoed', send: '{"jsonrpc":"2.0","method":"server.info","id":-7}', reply: isResult(-7, isServerInfo) },
  { name: 'an id on an error reply is echoed', send: '{"jsonrpc":"2.0","method":"nope","id":"e1"}', reply: isError(RpcCode.MethodNotFound, 'e1') },

  // --- method names that exist on every JS object ---
  ...['__proto__', 'toString', 'constructor', 'hasOwnProperty', 'valueOf', 'isPrototypeOf', '__defineGetter__', 'prototype', ''].map((method): Vector => ({
    name: `method ${JSON.stringify(method)}: -32601`,
    send: j({ jsonrpc: '2.0', method, id: `m-${method}` }),
    reply: isError(RpcCode.MethodNotFound, `m-${method}`),
  })),
  {
    name: 'a method-not-found message names the method',
    send: '{"jsonrpc":"2.0","method":"session.frobnicate","id":"mn"}',
    reply: (r) => expect((r as Msg).error?.message).toContain('session.frobnicate'),
  },

  // --- params ---
  { name: 'params a string: -32602', send: '{"jsonrpc":"2.0","method":"server.info","params":"bar","id":20}', reply: invalidParams(20) },
  { name: 'params a number: -32602', send: '{"jsonrpc":"2.0","method":"session.create","params":5,"id":21}', reply: invalidParams(21) },
  { name: 'params a boolean: -32602', send: '{"jsonrpc":"2.0","method":"session.create","params":true,"id":22}', reply: invalidParams(22) },
  { name: 'params an array: -32602', send: '{"jsonrpc":"2.0","method":"session.create","params":[],"id":23}', reply: invalidParams(23) },
  { name: 'params null: -32602', send: '{"jsonrpc":"2.0","method":"session.create","params":null,"id":24}', reply: invalidParams(24) },
  {
    name: 'params of the wrong type for a field: -32602 naming the field',
    send: '{"jsonrpc":"2.0","method":"session.create","params":{"title":5},"id":25}',
    reply: (r) => {
      isError(RpcCode.InvalidParams, 25)(r);
      expect(JSON.stringify((r as Msg).error?.data)).toContain('title');
    },
  },
  { name: 'missing params is the same as {} (server.info)', send: '{"jsonrpc":"2.0","method":"server.info","id":26}', reply: isResult(26, isServerInfo) },
  { name: 'missing params is the same as {} (session.create)', send: '{"jsonrpc":"2.0","method":"session.create","id":27}', reply: isResult(27, isNewSession) },
  {
    name: 'unknown params are ignored',
    send: '{"jsonrpc":"2.0","method":"session.create","params":{"title":"t","owner_transport":"tr_1","transport_id":"tr_999","zzz":[1]},"id":28}',
    reply: isResult(28, isNewSession),
  },
  {
    name: 'unknown params are ignored (server.info)',
    send: '{"jsonrpc":"2.0","method":"server.info","params":{"x":1},"id":29}',
    reply: isResult(29, isServerInfo),
  },
  { name: 'unknown envelope members are ignored', send: '{"jsonrpc":"2.0","method":"server.info","id":30,"extra":true}', reply: isResult(30, isServerInfo) },
  {
    name: 'a domain error keeps its code and the id',
    send: '{"jsonrpc":"2.0","method":"subagent.list","params":{"session_id":"ses_nope"},"id":31}',
    reply: isError(4001, 31),
  },
];

const TRANSPORTS = [
  {
    name: 'stdio',
    start: async (): Promise<Peer> => (await startStdio()).peer,
  },
  {
    name: 'WebSocket',
    start: async (): Promise<Peer> => (await connectWs(await startWsServer([], { token: 'T' }))).peer,
  },
];

describe.each(TRANSPORTS)('JSON-RPC 2.0 conformance over $name', ({ start }) => {
  let peer: Peer;
  let sentinels = 0;

  beforeAll(async () => {
    peer = await start();
  });
  afterAll(async () => {
    await killAll();
  });

  it.each(VECTORS)('$name', async (v) => {
    peer.send(v.send);
    if (v.reply) v.reply(await nextReply(peer));
    const id = `sentinel-${++sentinels}`;
    peer.send(j({ jsonrpc: '2.0', method: 'server.info', id }));
    const next = await nextReply(peer);
    expect(next, `expected only the sentinel's reply after ${v.send}`).toMatchObject({ jsonrpc: '2.0', id });
  });

  it('missing params gives exactly the same result as {}', async () => {
    peer.send('{"jsonrpc":"2.0","method":"server.info","id":"a"}');
    const a = (await nextReply(peer)) as Msg;
    peer.send('{"jsonrpc":"2.0","method":"server.info","params":{},"id":"a"}');
    const b = (await nextReply(peer)) as Msg;
    expect(a.result).toStrictEqual(b.result);
  });

  it('a batch of many calls gets every response exactly once', async () => {
    const batch = Array.from({ length: 50 }, (_, i) =>
      i % 5 === 0 ? { jsonrpc: '2.0', method: 'server.info' } : { jsonrpc: '2.0', method: 'server.info', id: i },
    );
    peer.send(j(batch));
    const r = await nextReply(peer);
    expect(Array.isArray(r)).toBe(true);
    const ids = (r as Msg[]).map((m) => m.id);
    expect(ids).toStrictEqual(batch.filter((m) => 'id' in m).map((m) => (m as { id: number }).id));
  });
});

describe('-32603 never leaks a stack', () => {
  // No wire input provokes an internal error in the shipped methods (every failure found maps to a
  // protocol code), so this runs the real Connection with one extra method that throws.
  it('toRpcError turns a thrown Error into {code: -32603, message: "Internal error"} and logs the original', () => {
    const err = new Error('secret detail at /home/user/project/file.ts');
    expect(err.stack).toMatch(/\n\s+at /);
    const logged: unknown[] = [];
    const rpc = toRpcError(err, (e) => logged.push(e));
    expect(rpc.toJSON()).toStrictEqual({ code: RpcCode.InternalError, message: 'Internal error' });
    expect(logged).toStrictEqual([err]);
    expect(toRpcError('a string').toJSON()).toStrictEqual({ code: RpcCode.InternalError, message: 'Internal error' });
    expect(toRpcError(new TypeError('x')).code).toBe(RpcCode.InternalError);
  });

  it('a handler that throws is answered -32603 with no stack, no message, no data; the error (not its stack) goes to the log', async () => {
    const lines: string[] = [];
    const logger = pino(
      { level: 'error', serializers: LOG_SERIALIZERS },
      new Writable({
        write(chunk: Buffer, _enc, cb) {
          lines.push(chunk.toString());
          cb();
        },
      }),
    );
    const boom: RpcMethod = {
      call: () => {
        throw new Error('kaboom: private path /etc/secret');
      },
    };
    const asyncBoom: RpcMethod = { call: () => Promise.reject(new RangeError('async kaboom')) };
    const { server, client } = memoryPair();
    const replies: string[] = [];
    client.onmessage = (t) => replies.push(t);
    const conn = new Connection(
      'tr_test',
      server,
      new Map([
        ['boom', boom],
        ['async.boom', asyncBoom],
      ]),
      {} as Services,
      logger,
      () => undefined,
    );
    conn.start();
    await conn.handle('{"jsonrpc":"2.0","method":"boom","id":1}');
    await conn.handle('[{"jsonrpc":"2.0","method":"async.boom","id":2},{"jsonrpc":"2.0","method":"boom"}]');
    expect(replies.map((r) => JSON.parse(r))).toStrictEqual([
      { jsonrpc: '2.0', id: 1, error: { code: -32603, message: 'Internal error' } },
      [{ jsonrpc: '2.0', id: 2, error: { code: -32603, message: 'Internal error' } }],
    ]);
    for (const r of replies) {
      expect(r).not.toMatch(/\bat /);
      expect(r).not.toContain('kaboom');
      expect(r).not.toContain('.ts');
    }
    // The error is on the log (stderr in a real server) by type and message; never its stack.
    expect(lines.join('')).toContain('kaboom');
    expect(lines.join('')).toContain('RangeError');
    expect(lines.join('')).not.toMatch(/\bat .*\.ts/);
  });
});
