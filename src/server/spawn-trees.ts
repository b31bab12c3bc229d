// Saved spawn trees: a host's record of a finished delegation tree, one JSON file each, under
// `<state dir>/spawn-trees/<session>/`. Written atomically (a temp file in the same directory, then
// a rename), so a reader sees the whole file or none. No path a client gives can leave the root:
// it is resolved (symlinks included) and refused unless it lies inside. Bounded: a file holds at
// most MAX_TREE_BYTES; a session directory keeps at most MAX_TREES_PER_SESSION files, and the whole
// root at most MAX_TREES_TOTAL files and MAX_TREES_TOTAL_BYTES bytes: past any of them the trees
// saved longest ago go first (by when they were saved, never by the client's `finished_at`, so the
// tree a save just wrote is never the one it removes). A listing holds at most MAX_LIST entries.
// One rule for every read (list, load, the disk bound): a tree is a regular file with a tree's
// name, in a real directory right under the root; a symlink planted anywhere below the root (a
// session directory leading out, or to another one) is never followed.
// Who may read which trees is the methods' decision (methods/spawn-tree.ts): the store takes the
// directories a caller may see.
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, open, readdir, readFile, realpath, rename, rm } from 'node:fs/promises';
import { basename, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { spawnTreeFileSchema } from '../contract/methods.ts';
import { errorCode } from '../guards.ts';
import { notOwned, RpcCode, RpcError } from './errors.ts';
import { withProps } from '../shapes.ts';

export const MAX_TREE_BYTES = 8 * 1024 * 1024;
export const MAX_TREES_PER_SESSION = 256;
/** Trees the whole state directory keeps at most, across sessions. */
export const MAX_TREES_TOTAL = 4096;
/** Bytes of trees the whole state directory keeps at most, across sessions. */
export const MAX_TREES_TOTAL_BYTES = 256 * 1024 * 1024;
export const MAX_LIST = 500;
export const DEFAULT_LIST = 50;
/** The directory of trees saved without a session. */
export const NO_SESSION = 'default';

/** The bounds of one store (defaults: the constants above). */
export interface SpawnTreeLimits {
  readonly per_session?: number;
  readonly total?: number;
  readonly total_bytes?: number;
}

/** One kept file, as the disk bound counts it; `order` is when it was saved (oldest lowest). */
interface SavedFile {
  readonly path: string;
  readonly dir: string;
  readonly bytes: number;
  readonly order: number;
}

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
  new RpcError(RpcCode.StateFailed, `${what} failed: ${err instanceof Error ? (errorCode(err) ?? err.message) : String(err)}`);

export class SpawnTreeStore {
  /** `<state dir>/spawn-trees`, absolute. */
  readonly root: string;
  readonly #perSession: number;
  readonly #total: number;
  readonly #totalBytes: number;
  /** Every kept file, oldest saved first: read from the disk once (by mtime), then kept up to date. */
  #index: Promise<SavedFile[]> | undefined;
  #order = 0;

  constructor(state_dir: string, limits: SpawnTreeLimits = {}) {
    this.root = resolve(state_dir, 'spawn-trees');
    this.#perSession = limits.per_session ?? MAX_TREES_PER_SESSION;
    this.#total = limits.total ?? MAX_TREES_TOTAL;
    this.#totalBytes = limits.total_bytes ?? MAX_TREES_TOTAL_BYTES;
  }

  async save(tree: SpawnTreeFile): Promise<{ path: string; session_id: string }> {
    const text = JSON.stringify(tree);
    if (Buffer.byteLength(text, 'utf8') > MAX_TREE_BYTES)
      throw new RpcError(RpcCode.InvalidParams, `invalid params: subagents: a spawn tree may take at most ${MAX_TREE_BYTES} bytes`);
    const dirName = tree.session_id === '' ? NO_SESSION : sessionDir(tree.session_id);
    const dir = join(this.root, dirName);
    const name = `${String(Math.round(tree.finished_at * 1000)).padStart(15, '0')}-${randomBytes(6).toString('hex')}.json`;
    const path = join(dir, name);
    const tmp = join(dir, `.${name}.${randomBytes(4).toString('hex')}.tmp`);
    // The files already there are counted before this one is written, so it is the newest.
    await this.#indexed().catch(() => undefined);
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
    await this.#prune({ path, dir: dirName, bytes: Buffer.byteLength(text, 'utf8'), order: 0 });
    return { path, session_id: tree.session_id };
  }

  /**
   * Newest first: the trees of one session (or of none), or of every session; with `visible`, of
   * those directories only.
   */
  async list(opts: { session_id?: string; cross_session: boolean; limit: number; visible?: (dir: string) => boolean }): Promise<SpawnTreeEntry[]> {
    let dirs: string[];
    if (opts.cross_session) dirs = (await this.#names(this.root)).filter((d) => !d.startsWith('.') && (opts.visible?.(d) ?? true));
    else dirs = [opts.session_id === undefined || opts.session_id === '' ? NO_SESSION : sessionDir(opts.session_id)];
    const files: { dir: string; name: string }[] = [];
    for (const dir of dirs) for (const name of await this.#names(join(this.root, dir))) if (FILE.test(name)) files.push({ dir, name });
    files.sort((a, b) => (a.name < b.name ? 1 : a.name > b.name ? -1 : a.dir < b.dir ? 1 : -1));
    const entries: SpawnTreeEntry[] = [];
    for (const f of files) {
      if (entries.length >= opts.limit) break;
      const path = join(this.root, f.dir, f.name);
      // What load would refuse is not listed.
      const tree = await this.#inside(path)
        .then((real) => this.#read(real))
        .catch(() => undefined);
      // A file removed or damaged since the directory was read is left out, not an error.
      if (!tree) continue;
      entries.push({
        path,
        session_id: tree.session_id,
        started_at: tree.started_at,
        finished_at: tree.finished_at,
        label: tree.label,
        count: tree.subagents.length,
      });
    }
    return entries;
  }

  /**
   * The saved file at `path` (absolute, or relative to the root); 4030 if it is outside; with
   * `visible`, 4001 unless its directory is one of those.
   */
  async load(path: string, visible?: (dir: string) => boolean): Promise<SpawnTreeFile> {
    const target = await this.#inside(path);
    if (visible && !visible(relative(await realpath(this.root), target).split(sep)[0] ?? '')) throw notOwned();
    try {
      return await this.#read(target);
    } catch (err) {
      throw failed('spawn_tree.load', err);
    }
  }

  /**
   * The real path of `path`, refused (4030) unless it is a spawn tree file in a directory right
   * under the root, reached through no symlink below the root (the root itself may be one).
   */
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
    const rel = relative(root, real);
    if (!within(root, real) || rel !== relative(this.root, given) || rel.split(sep).length !== 2 || !FILE.test(basename(real))) throw outside();
    return real;
  }

  async #read(path: string): Promise<SpawnTreeFile> {
    const st = await lstat(path);
    if (!st.isFile()) throw new Error('not a file');
    if (st.size > MAX_TREE_BYTES) throw new Error('file too large');
    const tree = spawnTreeFileSchema.safeParse(JSON.parse(await readFile(path, 'utf8')));
    if (!tree.success) throw new Error('not a spawn tree');
    return tree.data;
  }

  async #names(dir: string): Promise<string[]> {
    try {
      return await readdir(dir);
    } catch (err) {
      if (errorCode(err) === 'ENOENT') return [];
      throw failed('spawn_tree.list', err);
    }
  }

  /** Every kept tree file, oldest saved (mtime) first; read once, then kept by save and prune. */
  #indexed(): Promise<SavedFile[]> {
    this.#index ??= (async () => {
      const found: (SavedFile & { mtime: number })[] = [];
      for (const dir of (await this.#names(this.root).catch(() => [])).filter((d) => !d.startsWith('.'))) {
        // Never into a symlink: the bound removes files, and none outside the root's own directories.
        if (!(await lstat(join(this.root, dir)).catch(() => undefined))?.isDirectory()) continue;
        for (const name of await this.#names(join(this.root, dir)).catch(() => [])) {
          if (!FILE.test(name)) continue;
          const path = join(this.root, dir, name);
          const st = await lstat(path).catch(() => undefined);
          if (st?.isFile()) found.push({ path, dir, bytes: st.size, order: 0, mtime: st.mtimeMs });
        }
      }
      found.sort((a, b) => a.mtime - b.mtime || (a.path < b.path ? -1 : 1));
      return found.map(({ path, dir, bytes }) => ({ path, dir, bytes, order: ++this.#order }));
    })();
    return this.#index;
  }

  /**
   * Adds the file just saved, then removes the trees saved longest ago while its directory holds
   * more than the per-session bound or the root more than the total bounds. The file just saved is
   * the newest, so it is never among them. Victims are chosen synchronously, so concurrent saves
   * never pick the same one nor miss one.
   */
  async #prune(saved: SavedFile): Promise<void> {
    let index: SavedFile[];
    try {
      index = await this.#indexed();
    } catch {
      return;
    }
    if (!index.some((f) => f.path === saved.path)) index.push(withProps(saved, { order: ++this.#order }));
    const victims: SavedFile[] = [];
    const inDir = index.filter((f) => f.dir === saved.dir && f.path !== saved.path);
    inDir.push(saved);
    for (const f of inDir.slice(0, Math.max(0, inDir.length - this.#perSession))) victims.push(f);
    const gone = new Set(victims);
    let count = index.length - gone.size;
    let bytes = index.reduce((n, f) => (gone.has(f) ? n : n + f.bytes), 0);
    for (const f of index) {
      if (count <= this.#total && bytes <= this.#totalBytes) break;
      if (gone.has(f) || f.path === saved.path) continue;
      gone.add(f);
      victims.push(f);
      count--;
      bytes -= f.bytes;
    }
    if (gone.size === 0) return;
    // In place: a concurrent save holds the same array.
    for (let i = index.length - 1; i >= 0; i--) {
      const f = index[i];
      if (f !== undefined && gone.has(f)) index.splice(i, 1);
    }
    for (const f of victims) await rm(f.path, { force: true }).catch(() => undefined);
  }
}

function within(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
}
