// A waiting call's watch on an in-process server (the scripted runner, no process): progress per
// event numbered from 1, a heartbeat after a quiet spell, and a cancel that ends the wait alone;
// and the post-order in which interrupt_subagent reports a subtree.
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.ts';
import { McpSession } from '../../src/mcp/session.ts';
import { DelegationWatch, type ProgressParams } from '../../src/mcp/waits.ts';
import { RpcServer } from '../../src/server.ts';
import { postOrder } from '../../src/mcp/tools.ts';
import { hanging } from './harness.ts';

let server: RpcServer | undefined;
afterEach(async () => {
  await server?.shutdown();
  server = undefined;
});

describe('DelegationWatch', () => {
  it('numbers progress from 1, beats after a quiet spell, and a cancel ends the wait with the child still running', async () => {
    server = new RpcServer({ logger: silentLogger });
    const s = await McpSession.open(server, 'unit', silentLogger);
    const watch = new DelegationWatch(s);
    const r = await s.link.call('delegation.spawn', { session_id: s.id, tasks: [hanging('quiet')] });
    watch.bind(r.delegation_id, r.count);
    const seen: Array<Omit<ProgressParams, 'progressToken'>> = [];
    const ac = new AbortController();
    const outcome = await watch.wait({
      seconds: 60,
      signal: ac.signal,
      heartbeat_ms: 40,
      progress: (p) => {
        seen.push(p);
        if (p._meta.subrun.event === 'heartbeat') ac.abort();
        return Promise.resolve();
      },
    });
    watch.stop();
    expect(outcome).toEqual({ done: false, results: [] });
    expect(seen.map((p) => p.progress)).toEqual(seen.map((_, i) => i + 1));
    expect(seen[0]?._meta.subrun).toMatchObject({ event: 'started', subagent_id: r.subagent_ids[0], done: 0, count: 1 });
    expect(seen.at(-1)).toMatchObject({ message: '0/1 done · waiting', _meta: { subrun: { event: 'heartbeat', done: 0, count: 1 } } });
    const list = await s.link.call('subagent.list', { session_id: s.id });
    expect(list.subagents.map((c) => c.status)).toEqual(['running']);
  });
});

describe('postOrder', () => {
  it('puts every child before its parent, siblings in their order, the target last', () => {
    const parents = new Map<string, string | null>([
      ['t', null],
      ['a', 't'],
      ['a1', 'a'],
      ['a2', 'a'],
      ['b', 't'],
      ['b1', 'b'],
    ]);
    expect(postOrder(['t', 'a', 'a1', 'a2', 'b', 'b1'], parents)).toEqual(['a1', 'a2', 'a', 'b1', 'b', 't']);
    expect(postOrder(['t', 'x'], new Map())).toEqual(['x', 't']);
    expect(postOrder([], parents)).toEqual([]);
  });
});
