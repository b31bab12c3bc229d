// The shortcuts on the polled path write exactly what the plain path would: the serialised
// snapshot cache against JSON.stringify, a handler's own JSON text spliced into replies and
// batches, and the cheap params check against the schema it stands in for.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.ts';
import { Connection } from '../../src/rpc/connection.ts';
import type { Services } from '../../src/server/context.ts';
import type { RpcMethod } from '../../src/rpc/connection.ts';
import { FlatJsonCache, JsonText } from '../../src/server/json-text.ts';
import { paramsAccept, paramsSchemas } from '../../src/contract/wire.ts';
import { RpcServer } from '../../src/rpc/server.ts';
import { memoryPair } from '../../src/rpc/transports/memory.ts';

const primitive = fc.oneof(fc.string(), fc.double(), fc.integer(), fc.boolean(), fc.constant(null), fc.constant(undefined));
const KEYS = ['subagent_id', 'goal', 'status', 'started_at', 'tool_count', 'last_tool', 'accepting_steer', 'finished_at'];

/** A record with id `sa_<n>` and some of KEYS, in an order of their own. */
const recordArb = fc.record({
  n: fc.integer({ min: 0, max: 5 }),
  keys: fc.shuffledSubarray(KEYS.slice(1)),
  values: fc.array(fc.oneof({ weight: 6, arbitrary: primitive }, { weight: 1, arbitrary: fc.dictionary(fc.string(), primitive) }), {
    minLength: KEYS.length,
    maxLength: KEYS.length,
  }),
});

describe('FlatJsonCache', () => {
  it('writes what JSON.stringify writes, call after call, as records come, change, reorder and go', () => {
    fc.assert(
      fc.property(fc.array(fc.array(recordArb, { maxLength: 6 }), { minLength: 1, maxLength: 12 }), (calls) => {
        const cache = new FlatJsonCache();
        for (const call of calls) {
          const records = call.map(({ n, keys, values }) => {
            const r: Record<string, unknown> = { subagent_id: `sa_${n}` };
            keys.forEach((k, i) => (r[k] = values[i]));
            return r;
          });
          expect(cache.array(records, 'subagent_id')).toBe(JSON.stringify(records));
        }
      }),
      { numRuns: 300 },
    );
  });

  it('sees a change made in place to a record it has seen, and to an object inside one', () => {
    const cache = new FlatJsonCache();
    const inner = { a: 1 };
    const r: Record<string, unknown> = { subagent_id: 'sa_1', status: 'running', tool_count: 0, extra: inner };
    const plain: Record<string, unknown> = { subagent_id: 'sa_2', status: 'running', tool_count: 0 };
    expect(cache.array([r, plain], 'subagent_id')).toBe(JSON.stringify([r, plain]));
    inner.a = 2;
    plain.tool_count = 1;
    expect(cache.array([r, plain], 'subagent_id')).toBe(JSON.stringify([r, plain]));
    delete plain.tool_count;
    expect(cache.array([r, plain], 'subagent_id')).toBe(JSON.stringify([r, plain]));
    plain.tool_count = 1;
    expect(cache.array([r, plain], 'subagent_id')).toBe(JSON.stringify([r, plain]));
  });

  it('forgets ids no longer asked for once it outgrows what is asked of it', () => {
    const cache = new FlatJsonCache();
    for (let i = 0; i < 1000; i++) cache.array([{ subagent_id: `sa_${i}`, status: 'running' }], 'subagent_id');
    expect(cache.size).toBeLessThanOrEqual(2 + 32 + 1);
  });
});

describe('subagent.list', () => {
  it('replies with the bytes JSON.stringify writes for the snapshots of that moment, while children work, take steers and finish', async () => {
    const server = new RpcServer();
    const { server: end, client } = memoryPair();
    const texts: string[] = [];
    client.onmessage = (t) => texts.push(t);
    const conn = server.connect(end);
    let id = 0;
    /** The reply's text (events may come first). */
    const replyTo = (n: number) => texts.find((t) => t.startsWith(`{"jsonrpc":"2.0","id":${n},`)) as string;
    const call = async (method: string, params: Record<string, unknown>) => {
      await conn.handle(JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }));
      return (JSON.parse(replyTo(id)) as { result: Record<string, unknown> }).result;
    };
    const { session_id } = (await call('session.create', {})) as { session_id: string };
    const steps = [{ op: 'tool', name: 'read' }, { op: 'wait_steer' }, { op: 'tool', name: 'write' }, { op: 'wait_steer' }, { op: 'finish', summary: 'done' }];
    const { subagent_ids } = (await call('delegation.spawn', {
      session_id,
      tasks: [0, 1, 2].map((i) => ({ goal: `child ${i}`, agent: { kind: 'scripted', steps } })),
    })) as { subagent_ids: string[] };
    const statuses = new Set<string>();
    for (let round = 0; round < 40; round++) {
      const include_finished = round % 3 === 0;
      const done = conn.handle(JSON.stringify({ jsonrpc: '2.0', id: ++id, method: 'subagent.list', params: { session_id, include_finished } }));
      // The handler ran just now, in this same turn: the runtime's own list of this moment.
      const subagents = server.runtime.scoped.list({ session_id, generation: 1 }, { include_finished });
      await done;
      expect(replyTo(id)).toBe(JSON.stringify({ jsonrpc: '2.0', id, result: { subagents, delegations: [] } }));
      for (const c of subagents) statuses.add(c.status);
      if (round % 4 === 1) await call('subagent.steer', { session_id, subagent_id: subagent_ids[round % 3], text: `go ${round}` });
      for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
    }
    expect(statuses).toContain('completed');
    await server.shutdown();
  });
});

describe('JsonText results', () => {
  const result = { subagents: [{ a: '\u2028 é "q"' }], delegations: [] };
  const list: RpcMethod = { call: () => new JsonText(JSON.stringify(result)) };
  const plain: RpcMethod = { call: () => ({ fine: true }) };

  it('go out as the bytes JSON.stringify writes for the same result, alone and in a batch', async () => {
    const { server, client } = memoryPair();
    const texts: string[] = [];
    client.onmessage = (t) => texts.push(t);
    const conn = new Connection(
      'tr_json',
      server,
      new Map([
        ['list', list],
        ['plain', plain],
      ]),
      {} as Services,
      silentLogger,
      () => undefined,
    );
    conn.start();
    await conn.handle('{"jsonrpc":"2.0","id":"x\\"y","method":"list"}');
    await conn.handle(
      '[{"jsonrpc":"2.0","id":1,"method":"list"},{"jsonrpc":"2.0","method":"list"},{"jsonrpc":"2.0","id":2.5,"method":"plain"},{"jsonrpc":"2.0","id":null,"method":"list"}]',
    );
    expect(texts).toEqual([
      JSON.stringify({ jsonrpc: '2.0', id: 'x"y', result }),
      JSON.stringify([
        { jsonrpc: '2.0', id: 1, result },
        { jsonrpc: '2.0', id: 2.5, result: { fine: true } },
        { jsonrpc: '2.0', id: null, result },
      ]),
    ]);
  });

  it('serialise to the same value anywhere else', () => {
    expect(JSON.stringify({ r: new JsonText('{"a":[1,"b"]}') })).toBe('{"r":{"a":[1,"b"]}}');
  });
});

describe('cheap params checks', () => {
  it('accept only what the schema accepts, and the handler reads the same fields either way', () => {
    for (const [method, accepts] of Object.entries(paramsAccept)) {
      const schema = paramsSchemas[method as keyof typeof paramsAccept];
      fc.assert(
        fc.property(fc.dictionary(fc.constantFrom('session_id', 'include_finished', 'other'), fc.jsonValue()), (p) => {
          if (!accepts(p)) return;
          const r = schema.safeParse(p);
          expect(r.success, JSON.stringify(p)).toBe(true);
          for (const [k, v] of Object.entries(r.data as Record<string, unknown>)) expect(p[k]).toStrictEqual(v);
        }),
        { numRuns: 500 },
      );
    }
  });
});
