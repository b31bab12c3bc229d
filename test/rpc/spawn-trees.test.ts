// Spawn trees: who may read which (by default the trees of the caller's own sessions and of none;
// in single-user mode every tree), and the disk bound across the state directory (oldest saved
// go first, never the tree a save just wrote). Two JSON-RPC connections in memory on one server,
// the store itself with small bounds; real files in a temporary state directory.
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.ts';
import { RpcCode } from '../../src/server/errors.ts';
import { RpcServer } from '../../src/rpc/server.ts';
import { SpawnTreeStore } from '../../src/server/spawn-trees.ts';
import { connectMemory, type MemoryEndpoint } from '../helpers/rpc-client.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function stateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'subrun-trees-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function serve(single_user: boolean): { server: RpcServer; connect: () => MemoryEndpoint } {
  const server = new RpcServer({ state_dir: stateDir(), single_user, logger: silentLogger });
  cleanups.push(() => server.shutdown());
  return {
    server,
    connect: () => {
      const c = connectMemory(server);
      cleanups.push(() => c.close());
      return c;
    },
  };
}

type Entries = { entries: { path: string; session_id: string }[] };

describe('who reads spawn trees', () => {
  it('by default: the trees of the caller’s sessions and of none, not another session’s; its key proves one', async () => {
    const { connect } = serve(false);
    const alice = connect().client;
    const bob = connect().client;
    const a = await alice.result<{ session_id: string; session_key: string }>('session.create', {});
    const b = await bob.result<{ session_id: string; session_key: string }>('session.create', {});
    const secret = await alice.result<{ path: string }>('spawn_tree.save', {
      session_id: a.session_id,
      label: 'alice',
      subagents: [{ goal: 'private goal', summary: 'private result' }],
    });
    const mine = await bob.result<{ path: string }>('spawn_tree.save', { session_id: b.session_id, subagents: [{ goal: 'bob' }] });
    const shared = await bob.result<{ path: string }>('spawn_tree.save', { subagents: [{ goal: 'no session' }] });

    const bobAll = await bob.result<Entries>('spawn_tree.list', { cross_session: true });
    expect(bobAll.entries.map((e) => e.path).sort()).toEqual([mine.path, shared.path].sort());
    expect((await bob.error('spawn_tree.list', { session_id: a.session_id })).code).toBe(RpcCode.NotOwned);
    expect((await bob.error('spawn_tree.load', { path: secret.path })).code).toBe(RpcCode.NotOwned);
    expect(await bob.result('spawn_tree.load', { path: shared.path })).toMatchObject({ session_id: '', subagents: [{ goal: 'no session' }] });

    const aliceAll = await alice.result<Entries>('spawn_tree.list', { cross_session: true });
    expect(aliceAll.entries.map((e) => e.path).sort()).toEqual([secret.path, shared.path].sort());
    expect(await alice.result('spawn_tree.load', { path: secret.path })).toMatchObject({ label: 'alice' });

    // A caller that holds the key proves the session without attaching to it.
    const proven = await bob.result<Entries>('spawn_tree.list', { session_id: a.session_id, session_key: a.session_key });
    expect(proven.entries.map((e) => e.path)).toEqual([secret.path]);
    expect(await bob.result('spawn_tree.load', { path: secret.path, session_id: a.session_id, session_key: a.session_key })).toMatchObject({ label: 'alice' });
    expect((await bob.error('spawn_tree.load', { path: secret.path, session_id: a.session_id, session_key: 'wrong' })).code).toBe(RpcCode.NotOwned);
  });

  it('in single-user mode the token owns every tree', async () => {
    const { connect } = serve(true);
    const alice = connect().client;
    const bob = connect().client;
    const a = await alice.result<{ session_id: string }>('session.create', {});
    const secret = await alice.result<{ path: string }>('spawn_tree.save', { session_id: a.session_id, subagents: [{ goal: 'g' }] });
    expect((await bob.result<Entries>('spawn_tree.list', { cross_session: true })).entries.map((e) => e.path)).toEqual([secret.path]);
    expect((await bob.result<Entries>('spawn_tree.list', { session_id: a.session_id })).entries.map((e) => e.path)).toEqual([secret.path]);
    expect(await bob.result('spawn_tree.load', { path: secret.path })).toMatchObject({ session_id: a.session_id });
  });
});

describe('the disk bound', () => {
  const tree = (session_id: string, finished_at: number) => ({ session_id, started_at: null, finished_at, label: '', subagents: [{ goal: 'g' }] });

  it('per session: the oldest saved go, not the oldest finished; a save never answers a path it removed', async () => {
    const store = new SpawnTreeStore(stateDir(), { per_session: 3 });
    const late = [];
    for (let i = 0; i < 3; i++) late.push(await store.save(tree('s', 2_000_000_000 + i)));
    const early = await store.save(tree('s', 1));
    expect(existsSync(early.path)).toBe(true);
    expect(await store.load(early.path)).toMatchObject({ finished_at: 1 });
    expect(existsSync(late[0]?.path as string)).toBe(false);
    expect((await store.list({ session_id: 's', cross_session: false, limit: 10 })).map((e) => e.path).sort()).toEqual(
      [late[1]?.path, late[2]?.path, early.path].sort(),
    );
  });

  it('across sessions: at most N files and B bytes in the whole state directory, oldest saved first', async () => {
    const dir = stateDir();
    const store = new SpawnTreeStore(dir, { total: 4 });
    const saved = [];
    for (let i = 0; i < 6; i++) saved.push(await store.save(tree(`s${i}`, 5000 - i)));
    const kept = saved.filter((s) => existsSync(s.path)).map((s) => s.path);
    expect(kept).toEqual(saved.slice(2).map((s) => s.path));

    const bytes = Buffer.byteLength(JSON.stringify(tree('b0', 1)));
    const small = new SpawnTreeStore(stateDir(), { total_bytes: bytes * 2 });
    const b = [];
    for (let i = 0; i < 4; i++) b.push(await small.save(tree(`b${i}`, 1)));
    expect(b.map((s) => existsSync(s.path))).toEqual([false, false, true, true]);
  });

  it('counts the trees already on the disk when it starts (a restarted server)', async () => {
    const dir = stateDir();
    const first = new SpawnTreeStore(dir, { total: 3 });
    const old = [];
    for (let i = 0; i < 3; i++) old.push(await first.save(tree(`s${i}`, 10)));
    const restarted = new SpawnTreeStore(dir, { total: 3 });
    const next = await restarted.save(tree('new', 10));
    expect(existsSync(next.path)).toBe(true);
    const left = readdirSync(join(dir, 'spawn-trees')).flatMap((d) => readdirSync(join(dir, 'spawn-trees', d)).map((n) => join(dir, 'spawn-trees', d, n)));
    expect(left).toHaveLength(3);
    // Which of the old ones went depends on their mtimes (a coarse clock may tie them): one did.
    expect(old.filter((o) => left.includes(o.path))).toHaveLength(2);
  });
});
