// Saved spawn trees: a host's record of a finished delegation tree, one JSON file each, under
// `<state dir>/spawn-trees/<session>/`. Written atomically (a temp file in the same directory, then
// a rename), so a reader sees the whole file or none. No path a client gives can leave the root:
// it is resolved (symlinks included) and refused unless it lies inside. Bounded: a file holds at
// most MAX_TREE_BYTES, a session directory the newest MAX_TREES_PER_SESSION files (older ones are
// removed as new ones come), and a listing at most MAX_LIST entries.
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, open, readdir, readFile, realpath, rename, rm } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { RpcCode, RpcError } from './errors.ts';

export const MAX_TREE_BYTES = 8 * 1024 * 1024;
export const MAX_TREES_PER_SESSION = 256;
export const MAX_LIST = 500;
export const DEFAULT_LIST = 50;
/** The directory of trees saved without a session. */
const NO_SESSION = 'default';

export interface SpawnTreeFile {
  readonly session_id: string;
  readonly started_at: number | null;
  readonly finished_at: number;
  readonly label: string;
  readonly subagents: readonly Record<string, unknown>[];
}

export interface SpawnTreeEntry {
  readonly path: string;
  readonly session_id: string;
  readonly started_at: number | null;
  readonly finished_at: number;
  readonly label: string;
  readonly count: number;
}

/** A session id as a directory name: anything but letters, digits, `-` and `_` becomes `_`. */
export function sessionDir(session_id: string): string {
  const safe = session_id.replace(/[^A-Za-z0-9_-]/g, '_');
  return safe === '' ? NO_SESSION : safe;
}

/** File names sort by when the tree finished (zero-padded milliseconds), then a random tag. */
const FILE = /^\d{15}-[0-9a-f]{12}\.json$/;

const failed = (what: string, err: unknown) =>
  new RpcError(RpcCode.StateFailed, `${what} failed: ${err instanceof Error ? ((err as NodeJS.ErrnoException).code ?? err.message) : String(err)}`);

export class SpawnTreeStore {
  /** `<state dir>/spawn-trees`, absolute. */
  readonly root: string;

  constructor(state_dir: string) {
    this.root = resolve(state_dir, 'spawn-trees');
  }

  async save(tree: SpawnTreeFile): Promise<{ path: string; session_id: string }> {
    const text = JSON.stringify(tree);
    if (Buffer.byteLength(text, 'utf8') > MAX_TREE_BYTES) throw new RpcError(RpcCode.InvalidParams, `invalid params: subagents: a spawn tree may take at most ${MAX_TREE_BYTES} bytes`);
    const dir = join(this.root, tree.session_id === '' ? NO_SESSION : sessionDir(tree.session_id));
    const name = `${String(Math.round(tree.finished_at * 1000)).padStart(15, '0')}-${randomBytes(6).toString('hex')}.json`;
    const path = join(dir, name);
    const tmp = join(dir, `.${name}.${randomBytes(4).toString('hex')}.tmp`);
    try {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      // `wx`: never through a file (or a symlink) that is already there.
      const fh = await open(tmp, 'wx', 0o600);
      try {
        await fh.writeFile(text, 'utf8');
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(tmp, path);
    } catch (err) {
      await rm(tmp, { force: true }).catch(() => undefined);
      throw failed('spawn_tree.save', err);
    }
    await this.#prune(dir);
    return { path, session_id: tree.session_id };
  }

  /** Newest first: the trees of one session (or of none), or of every session. */
  async list(opts: { session_id?: string; cross_session: boolean; limit: number }): Promise<SpawnTreeEntry[]> {
    let dirs: string[];
    if (opts.cross_session) dirs = (await this.#names(this.root)).filter((d) => !d.startsWith('.'));
    else dirs = [opts.session_id === undefined || opts.session_id === '' ? NO_SESSION : sessionDir(opts.session_id)];
    const files: { dir: string; name: string }[] = [];
    for (const dir of dirs) for (const name of await this.#names(join(this.root, dir))) if (FILE.test(name)) files.push({ dir, name });
    files.sort((a, b) => (a.name < b.name ? 1 : a.name > b.name ? -1 : a.dir < b.dir ? 1 : -1));
    const entries: SpawnTreeEntry[] = [];
    for (const f of files) {
      if (entries.length >= opts.limit) break;
      const path = join(this.root, f.dir, f.name);
      const tree = await this.#read(path).catch(() => undefined);
      // A file removed or damaged since the directory was read is left out, not an error.
      if (!tree) continue;
      entries.push({ path, session_id: tree.session_id, started_at: tree.started_at, finished_at: tree.finished_at, label: tree.label, count: tree.subagents.length });
    }
    return entries;
  }

  /** The saved file at `path` (absolute, or relative to the root); 4030 if it is outside. */
  async load(path: string): Promise<SpawnTreeFile> {
    const target = await this.#inside(path);
    try {
      return await this.#read(target);
    } catch (err) {
      throw failed('spawn_tree.load', err);
    }
  }

  /** The real path of `path`, refused (4030) unless it is a spawn tree file inside the root. */
  async #inside(path: string): Promise<string> {
    const outside = () => new RpcError(RpcCode.PathOutside, 'path outside spawn-trees root');
    if (path.includes('\0')) throw outside();
    const given = isAbsolute(path) ? resolve(path) : resolve(this.root, path);
    // Lexically first (so a path that leaves never touches the disk), then for real: a symlink
    // inside the root must not lead out of it.
    if (!within(this.root, given)) throw outside();
    let real: string;
    let root: string;
    try {
      root = await realpath(this.root);
      real = await realpath(given);
    } catch (err) {
      throw failed('spawn_tree.load', err);
    }
    if (!within(root, real) || !FILE.test(real.slice(real.lastIndexOf(sep) + 1))) throw outside();
    return real;
  }

  async #read(path: string): Promise<SpawnTreeFile> {
    const st = await lstat(path);
    if (!st.isFile()) throw new Error('not a file');
    if (st.size > MAX_TREE_BYTES) throw new Error('file too large');
    const tree = JSON.parse(await readFile(path, 'utf8')) as SpawnTreeFile;
    if (typeof tree !== 'object' || tree === null || !Array.isArray(tree.subagents)) throw new Error('not a spawn tree');
    return tree;
  }

  async #names(dir: string): Promise<string[]> {
    try {
      return await readdir(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw failed('spawn_tree.list', err);
    }
  }

  /** Keeps the newest MAX_TREES_PER_SESSION trees of a directory. */
  async #prune(dir: string): Promise<void> {
    const names = (await this.#names(dir)).filter((n) => FILE.test(n)).sort();
    for (const name of names.slice(0, Math.max(0, names.length - MAX_TREES_PER_SESSION))) await rm(join(dir, name), { force: true }).catch(() => undefined);
  }
}

function within(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
}
