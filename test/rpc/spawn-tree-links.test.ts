// One rule for every read of the spawn-trees root: a tree is a regular file, with a tree's name,
// in a real directory right under the root. A symlink planted anywhere below the root (a session
// directory that leads out of it, or to another one) is refused by spawn_tree.load (4030), left
// out of spawn_tree.list, and never followed by the disk bound when it removes old trees.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RpcCode } from '../../src/server/errors.ts';
import { SpawnTreeStore } from '../../src/server/spawn-trees.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const temp = (prefix: string) => {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
};

const tree = (session_id: string, finished_at: number) => ({ session_id, started_at: null, finished_at, label: session_id, subagents: [{ goal: 'g' }] });

describe('spawn trees behind a symlink in the state directory', () => {
  it('list and load refuse them alike; the disk bound never removes a file through one', async () => {
    const state = temp('subrun-links-');
    const store = new SpawnTreeStore(state, { total: 2 });
    const own = await store.save(tree('own', 1));
    // Out of the root: a directory elsewhere holding a valid tree file, and a session directory
    // of the root that is a symlink to it.
    const outside = temp('subrun-outside-');
    mkdirSync(join(outside, 'trees'));
    const planted = join(outside, 'trees', basename(own.path));
    copyFileSync(own.path, planted);
    symlinkSync(join(outside, 'trees'), join(store.root, 'evil'), 'dir');
    // Inside the root: another name for the session directory of `own`.
    symlinkSync(dirname(own.path), join(store.root, 'alias'), 'dir');

    const listed = await store.list({ cross_session: true, limit: 50 });
    expect(listed.map((e) => e.path)).toEqual([own.path]);
    for (const via of ['evil', 'alias']) {
      const path = join(store.root, via, basename(own.path));
      await expect(store.load(path)).rejects.toMatchObject({ code: RpcCode.PathOutside });
      expect(await store.list({ session_id: via, cross_session: false, limit: 50 })).toEqual([]);
    }
    expect(await store.load(own.path)).toMatchObject({ label: 'own' });

    // The bound (2 trees) makes two more saves remove the oldest: never the planted file.
    await store.save(tree('second', 2));
    await store.save(tree('third', 3));
    expect(existsSync(planted)).toBe(true);
    expect(existsSync(own.path)).toBe(false);
  });
});
