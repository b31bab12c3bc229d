// Resource exhaustion per session: a session that closes (session.close, or parked past its limit)
// releases everything it owned, and a reset does not keep the retired generation's finished
// children. Proved by reachability, not by timing or heap figures: every child's runner and its
// completion entry are watched through WeakRefs (the record holds both; the ledger and the queue
// line hold the record or the entry), and after the close a full GC must clear every one. While
// the session is open the same refs stay alive (its finished children are retained for a late
// list or tail), so the check can fail. The heap figure over 10,000 sessions is in the bench suite
// (bench/cases/session-churn.ts).
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { RunOutcome, Runner, RunnerContext } from '../../src/types.ts';
import { defineRunnerKind } from '../../src/delegation/runners/kinds.ts';
import { RpcServer, type ServerOptions } from '../../src/rpc/server.ts';
import { stillReachable } from '../helpers/gc.ts';
import { ManualClock } from '../helpers/manual-clock.ts';
import { connectMemory, ok, type RpcTestClient } from '../helpers/rpc-client.ts';

const OUTPUT = 'o'.repeat(16 * 1024);

/** What the probe runners and the completion entries of one server were; weakly held. */
class Watch {
  readonly runners: WeakRef<Runner>[] = [];
  readonly entries: WeakRef<object>[] = [];

  /** How many of the watched objects are still reachable after full collections. */
  alive(): Promise<number> {
    return stillReachable([...this.runners, ...this.entries]);
  }
}

/**
 * `{kind: "probe"}`: says 16 KiB and finishes, or (hang) waits for its stop; with `spawn_on_stop`
 * it delegates once more a turn after it was stopped (its context is still open then), as a
 * runner finishing its step would.
 */
const probeSchema = z.object({ kind: z.literal('probe'), hang: z.boolean().optional(), spawn_on_stop: z.boolean().optional() });

function probeKind(watch: Watch) {
  return defineRunnerKind(probeSchema, (spec) => {
    const runner: Runner = {
      model: 'probe',
      async run(ctx: RunnerContext): Promise<RunOutcome> {
        ctx.text(OUTPUT);
        if (!spec.hang) return { status: 'completed', summary: 'said it' };
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
        if (spec.spawn_on_stop) {
          await new Promise((resolve) => setImmediate(resolve));
          try {
            ctx.delegate([{ goal: 'late', agent: { kind: 'probe' } }]);
          } catch {
            // refused: nothing was spawned
          }
        }
        return { status: 'interrupted' };
      },
    };
    watch.runners.push(new WeakRef(runner));
    return runner;
  });
}

const servers: RpcServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.shutdown();
});

function setup(options: ServerOptions = {}): { server: RpcServer; watch: Watch; client: RpcTestClient; drop: () => Promise<void> } {
  const watch = new Watch();
  const server = new RpcServer({ ...options, runtime: { runner_kinds: { probe: probeKind(watch) } } });
  servers.push(server);
  server.runtime.onOwnedEvent((event) => {
    if (event.type === 'subagent.complete') watch.entries.push(new WeakRef(event.entry as object));
  });
  const ep = connectMemory(server);
  return {
    server,
    watch,
    client: ep.client,
    drop: async () => {
      ep.close();
      await ep.conn.whenClosed;
    },
  };
}

const PROBE = { kind: 'probe' };
const HANGING = { kind: 'probe', hang: true };

async function spawnAndFinish(client: RpcTestClient, session_id: string, agent: unknown = PROBE): Promise<string> {
  const r = await ok(client, 'delegation.spawn', {
    session_id,
    tasks: [
      { goal: 'a', agent },
      { goal: 'b', agent },
    ],
  });
  await client.waitForEvent((e) => e.type === 'delegation.complete' && e.payload.delegation_id === r.delegation_id);
  return r.delegation_id;
}

describe('resource exhaustion per session: closing releases what the session owned', () => {
  it('session.close drops its retained children, their entries, its ledger and its queue', async () => {
    const { server, watch, client } = setup();
    const queuesBefore = server.runtime.queueCount;
    const s = await ok(client, 'session.create', {});
    const delegation_id = await spawnAndFinish(client, s.session_id);
    expect(watch.runners).toHaveLength(2);
    expect(watch.entries).toHaveLength(2);
    // Open: the finished children are retained (late list, tail, delegation.result).
    expect(await watch.alive()).toBe(4);
    expect((await ok(client, 'subagent.list', { session_id: s.session_id, include_finished: true })).subagents).toHaveLength(2);
    expect((await ok(client, 'delegation.result', { session_id: s.session_id, delegation_id })).results).toHaveLength(2);

    await ok(client, 'session.close', { session_id: s.session_id });
    expect(await watch.alive()).toBe(0);
    expect(server.runtime.queueCount).toBe(queuesBefore);
    expect(server.runtime.list({ include_finished: true })).toEqual([]);
  });

  it('a session closed with live children releases them once they finish; their completions still go out in-process', async () => {
    const { server, watch, client } = setup();
    const queuesBefore = server.runtime.queueCount;
    const s = await ok(client, 'session.create', {});
    const r = await ok(client, 'delegation.spawn', {
      session_id: s.session_id,
      tasks: [
        { goal: 'a', agent: HANGING },
        { goal: 'b', agent: HANGING },
      ],
    });
    await client.waitForEvent((e) => e.type === 'subagent.start' && e.payload.goal === 'b');
    const completes: string[] = [];
    const off = server.runtime.events.subscribe('subagent.complete', (e) => void completes.push(String(e.subagent_id)));
    const delegationDone = new Promise<void>((resolve) => {
      const stop = server.runtime.events.subscribe('delegation.complete', (e) => {
        if (e.delegation_id === r.delegation_id) {
          stop();
          resolve();
        }
      });
    });

    expect(await ok(client, 'session.close', { session_id: s.session_id })).toEqual({ closed: true, interrupted: 2 });
    await delegationDone;
    off();
    expect(completes.sort()).toEqual([...r.subagent_ids].sort());
    expect(server.runtime.liveCount).toBe(0);
    expect(await watch.alive()).toBe(0);
    expect(server.runtime.queueCount).toBe(queuesBefore);
  });

  it('a child of a closing session that delegates once more after its stop leaves nothing behind', async () => {
    const { server, watch, client } = setup({ max_spawn_depth: 2 });
    const s = await ok(client, 'session.create', {});
    const r = await ok(client, 'delegation.spawn', { session_id: s.session_id, tasks: [{ goal: 'a', agent: { ...HANGING, spawn_on_stop: true } }] });
    await client.waitForEvent((e) => e.type === 'subagent.start' && e.payload.goal === 'a');
    const dispatched = new Promise<void>((resolve) => {
      const stop = server.runtime.events.subscribe('delegation.dispatched', (e) => {
        if (e.delegation_id !== r.delegation_id) {
          stop();
          resolve();
        }
      });
    });
    const done = new Promise<void>((resolve) => {
      const stop = server.runtime.events.subscribe('delegation.complete', (e) => {
        if (e.delegation_id === r.delegation_id) {
          stop();
          resolve();
        }
      });
    });
    await ok(client, 'session.close', { session_id: s.session_id });
    await dispatched;
    await done;
    expect(watch.runners).toHaveLength(2);
    expect(server.runtime.liveCount).toBe(0);
    expect(await watch.alive()).toBe(0);
  });

  it('a session closed by park expiry releases the same', async () => {
    const clock = new ManualClock();
    const { server, watch, client, drop } = setup({ clock, park_ttl_ms: 60_000 });
    const queuesBefore = server.runtime.queueCount;
    const s = await ok(client, 'session.create', {});
    await spawnAndFinish(client, s.session_id);
    await drop();
    expect(await watch.alive()).toBe(4);
    await clock.advance(60_000);
    expect(server.sessions.get(s.session_id)).toBeUndefined();
    expect(await watch.alive()).toBe(0);
    expect(server.runtime.queueCount).toBe(queuesBefore);
  });

  it('session.reset stops retaining the retired generation: its finished children and delegations go, the new ones are kept', async () => {
    const { watch, client } = setup();
    const s = await ok(client, 'session.create', {});
    await spawnAndFinish(client, s.session_id);
    expect(await watch.alive()).toBe(4);
    await ok(client, 'session.reset', { session_id: s.session_id });
    expect(await watch.alive()).toBe(0);

    await spawnAndFinish(client, s.session_id);
    expect(await watch.alive()).toBe(4);
    expect((await ok(client, 'subagent.list', { session_id: s.session_id, include_finished: true })).subagents).toHaveLength(2);
  });

  it('a child of a retired generation that finishes after the reset is not retained', async () => {
    const { server, watch, client } = setup();
    const s = await ok(client, 'session.create', {});
    const r = await ok(client, 'delegation.spawn', { session_id: s.session_id, tasks: [{ goal: 'a', agent: HANGING }] });
    await client.waitForEvent((e) => e.type === 'subagent.start' && e.payload.goal === 'a');
    const done = new Promise<void>((resolve) => {
      const stop = server.runtime.events.subscribe('delegation.complete', (e) => {
        if (e.delegation_id === r.delegation_id) {
          stop();
          resolve();
        }
      });
    });
    await ok(client, 'session.reset', { session_id: s.session_id });
    await done;
    expect(await watch.alive()).toBe(0);
  });
});
