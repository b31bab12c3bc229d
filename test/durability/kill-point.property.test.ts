// The crash point, exactly: an in-process server on a real SQLite file whose n-th commit fails and
// every later one too (the process "died" there), then a second server on the same file. Whatever
// the first one told its host — replies and events, each sent only after its commit — the second
// one must keep: the session and its key (1), one completion per announced child (2), one fate
// per `queued` steer (3), every seq with no gap or duplicate (4), delegation.result (5) and kept
// answers (6). fast-check picks n over every commit the schedule makes.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fc, test } from '@fast-check/vitest';
import { describe, expect } from 'vitest';
import { RpcServer } from '../../src/server.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { connectMemory, type RpcTestClient, type WireEvent } from '../helpers/rpc-client.ts';

const hanging = (text: string) => ({ kind: 'scripted', steps: [{ op: 'say', text }, { op: 'tool', name: 't', ms: 2 }, { op: 'hang' }] });
const TASKS = [
  { goal: 'steered', agent: { kind: 'scripted', steps: [{ op: 'say', text: 'a' }, { op: 'wait_steer' }, { op: 'say', text: 'took it' }, { op: 'hang' }] } },
  {
    goal: 'quick',
    agent: {
      kind: 'scripted',
      steps: [
        { op: 'say', text: 'b' },
        { op: 'finish', summary: 'done' },
      ],
    },
  },
  { goal: 'parent', agent: { kind: 'scripted', steps: [{ op: 'spawn', tasks: [{ goal: 'leaf', agent: hanging('leaf') }] }, { op: 'hang' }] } },
];

/** What the first server told its host: only answers that arrived count. */
interface Told {
  session?: { session_id: string; session_key: string };
  readonly children: Set<string>;
  readonly steers: Map<string, string>;
  readonly delegations: Set<string>;
  /** idempotency key -> the delegation its answer named */
  readonly keyed: Map<string, string>;
}

async function drive(client: RpcTestClient, told: Told, died: Promise<void>): Promise<void> {
  const until = <T>(p: Promise<T>) => Promise.race([p, died.then(() => undefined)]);
  const ok = async (method: string, params: Record<string, unknown>): Promise<Record<string, unknown> | undefined> => {
    const reply = await until(client.call(method, params));
    return reply?.result === undefined ? undefined : (reply.result as Record<string, unknown>);
  };
  const created = await ok('session.create', {});
  if (!created) return;
  told.session = { session_id: String(created.session_id), session_key: String(created.session_key) };
  const session_id = told.session.session_id;
  const spawnKeyed = async (key: string) => {
    const d = await ok('delegation.spawn', { session_id, tasks: TASKS, idempotency_key: key });
    if (!d) return undefined;
    told.keyed.set(key, String(d.delegation_id));
    told.delegations.add(String(d.delegation_id));
    for (const id of d.subagent_ids as string[]) told.children.add(id);
    return d.subagent_ids as string[];
  };
  const ids = await spawnKeyed('first');
  if (!ids) return;
  const steer = async (subagent_id: string | undefined, text: string) => {
    const r = await ok('subagent.steer', { session_id, subagent_id, text });
    if (r?.status === 'queued') told.steers.set(String(r.steer_id), String(subagent_id));
  };
  if (!(await until(client.waitForEvent((e) => e.type === 'subagent.start' && e.payload.subagent_id === ids[0])))) return;
  await steer(ids[0], 'one');
  await steer(ids[2], 'two');
  await steer(ids[0], 'three');
  await ok('subagent.interrupt', { session_id, subagent_id: ids[2] });
  await spawnKeyed('first');
  await spawnKeyed('second');
  await until(client.waitForEvent((e) => e.type === 'session.idle' || e.type === 'subagent.steer.delivered'));
}

function byType(events: readonly WireEvent[], type: string): WireEvent[] {
  return events.filter((e) => e.type === type);
}

describe('a crash at any commit (the n-th write fails, and every later one)', () => {
  test.prop([fc.integer({ min: 1, max: 24 })], { numRuns: 30 })('forgets nothing the host was told', async (crashAt) => {
    const dir = mkdtempSync(join(tmpdir(), 'subrun-killpoint-'));
    try {
      let commits = 0;
      let die!: () => void;
      const died = new Promise<void>((resolve) => (die = resolve));
      const storeA = SqliteStore.open(dir, {
        lock: false,
        beforeCommit: () => {
          if (++commits < crashAt) return;
          die();
          throw new Error('the process died here');
        },
      });
      const a = new RpcServer({ store: storeA, max_concurrent_children: 3, max_spawn_depth: 2 });
      const hostA = connectMemory(a);
      const told: Told = { children: new Set(), steers: new Map(), delegations: new Set(), keyed: new Map() };
      await Promise.race([drive(hostA.client, told, died), died]);
      // Dead: nothing queued is written and nothing more reaches the host.
      storeA.abandon();
      const seenA = [...hostA.client.events];
      hostA.close();
      await a.runtime.shutdown();
      for (const e of seenA) if (e.type === 'subagent.spawn_requested') told.children.add(String(e.payload.subagent_id));

      const storeB = SqliteStore.open(dir, { lock: false });
      const b = new RpcServer({ store: storeB, max_concurrent_children: 3, max_spawn_depth: 2 });
      try {
        const { client } = connectMemory(b);
        if (!told.session) {
          expect(told.children.size, 'nothing was told before the session was').toBe(0);
          return;
        }
        const { session_id, session_key } = told.session;
        const mine = seenA.filter((e) => e.session_id === session_id);
        const attach = await client.call('session.attach', { session_id, session_key });
        expect(attach.error, `promise 1 at commit ${crashAt}`).toBeUndefined();
        const lastSeen = Math.max(0, ...mine.map((e) => e.seq));
        const since = await client.result<{ events: WireEvent[]; truncated: boolean }>('session.events.since', {
          session_id,
          session_key,
          last_seen: lastSeen,
        });
        expect(since.truncated).toBe(false);
        const all = [...mine, ...since.events];
        // 4: every seq once, 1..latest, no hole.
        expect(
          all.map((e) => e.seq),
          `promise 4 at commit ${crashAt}`,
        ).toEqual(all.map((_e, i) => i + 1));
        // 2: each announced child, exactly one completion.
        const completions = byType(all, 'subagent.complete');
        for (const id of told.children) {
          expect(
            completions.filter((e) => e.payload.subagent_id === id),
            `promise 2 for ${id} at commit ${crashAt}`,
          ).toHaveLength(1);
        }
        // 3: each queued steer, delivered xor missed.
        const delivered = new Set(byType(all, 'subagent.steer.delivered').map((e) => String(e.payload.steer_id)));
        for (const [steer_id, child] of told.steers) {
          const entry = completions.find((e) => e.payload.subagent_id === child)?.payload;
          const missed = ((entry?.missed_steer_detail ?? []) as Array<{ steer_id: string }>).some((m) => m.steer_id === steer_id);
          expect(delivered.has(steer_id) !== missed, `promise 3 for ${steer_id} at commit ${crashAt}`).toBe(true);
        }
        // 5: every delegation answered; 6: every kept key replays its first answer.
        for (const delegation_id of told.delegations) {
          const r = await client.call('delegation.result', { session_id, delegation_id });
          expect(r.error, `promise 5 for ${delegation_id} at commit ${crashAt}`).toBeUndefined();
        }
        for (const [key, delegation_id] of told.keyed) {
          const again = await client.result('delegation.spawn', { session_id, tasks: TASKS, idempotency_key: key });
          expect(again.delegation_id, `promise 6 for ${key} at commit ${crashAt}`).toBe(delegation_id);
        }
      } finally {
        await b.shutdown();
        storeB.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
