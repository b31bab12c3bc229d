// Opening a state directory, on real processes and real files (../shared/design/durability.md,
// "Where state lives" and "Proof"): every way a start can be refused is one line on stderr and
// exit 2, and leaves the directory as it found it (a corrupt database, a schema from the future, a
// directory others may write, a directory another server holds); a stale lock is taken over; what
// a server makes is 0700 / 0600; `subrun store stats` reads a stopped server's directory and
// refuses a live one's; which servers keep a store by default.
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { SCHEMA_VERSION } from '../../src/store/schema.ts';
import { call, killAll, runSubrun, spawnSubrun, startStdio, WAIT_MS, type WsServer } from '../helpers/process.ts';
import { connectWs, type WsEndpoint } from '../helpers/rpc-client.ts';

const dirs: string[] = [];
const endpoints: WsEndpoint[] = [];
afterEach(async () => {
  await Promise.all(endpoints.splice(0).map((e) => e.close()));
  await killAll();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A fresh temporary directory (mkdtemp: 0700), removed after the test. */
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'subrun-open-'));
  dirs.push(d);
  return d;
}

const serveArgs = (dir: string) => ['serve', '--ws', '--port', '0', '--token', 't', '--state-dir', dir];

/** Runs `subrun ...args` and returns its one stderr line, checking it exited 2 with nothing else said. */
async function refused(args: readonly string[]): Promise<string> {
  const r = await runSubrun(args);
  expect({ code: r.code, signal: r.signal }, r.stderr).toEqual({ code: 2, signal: null });
  const lines = r.stderr.split('\n').filter((l) => l.trim() !== '');
  expect(lines, 'exactly one line on stderr').toHaveLength(1);
  expect(r.stdout).toBe('');
  return lines[0]!;
}

/** Every file of `dir` with its bytes (LOCK aside: taking and giving back the lock is the point of it). */
function contents(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(dir).sort()) if (name !== 'LOCK') out[name] = readFileSync(join(dir, name)).toString('base64');
  return out;
}

const mode = (path: string) => statSync(path).mode & 0o777;

/** A valid, closed store in `dir` (its WAL checkpointed into store.db by close()). */
function closedStore(dir: string): string {
  SqliteStore.open(dir).close();
  const db = join(dir, 'store.db');
  expect(existsSync(`${db}-wal`), 'close() leaves no WAL behind').toBe(false);
  return db;
}

/** `serve --ws` on a port of its own; fails at once, with its stderr, if it exits instead of listening. */
async function startWsServer(args: readonly string[], opts: { env?: Record<string, string> } = {}): Promise<WsServer> {
  const token = 'test-token';
  const proc = spawnSubrun(['serve', '--ws', '--port', '0', '--token', token, ...args], opts.env);
  const listening = proc.stderr.take((l) => l.startsWith('subrun listening on '), WAIT_MS, 'the listening line');
  const first = await Promise.race([listening, proc.exited.then((exit) => exit)]);
  if (typeof first !== 'string') throw new Error(`serve exited before listening (${JSON.stringify(first)}): ${proc.stderr.all.join('\n')}`);
  const url = first.slice('subrun listening on '.length).trim();
  return { proc, url, port: Number(new URL(url).port), token };
}

async function client(server: WsServer): Promise<WsEndpoint> {
  const ep = await connectWs(server.url, server.token);
  endpoints.push(ep);
  await ep.client.waitForEvent((e) => e.type === 'gateway.ready');
  return ep;
}

describe('a start that cannot use its state directory is one line and exit 2, and rewrites nothing', () => {
  it('a database of garbage bytes', async () => {
    const dir = tempDir();
    // Not an SQLite header: the first 16 bytes of a database are "SQLite format 3\0".
    writeFileSync(join(dir, 'store.db'), Buffer.concat([Buffer.from('not a database; '), randomBytes(8192)]), { mode: 0o600 });
    const before = contents(dir);
    const line = await refused(serveArgs(dir));
    expect(line).toMatch(/^subrun: .*corrupt/);
    expect(line).toContain(join(dir, 'store.db'));
    expect(contents(dir), 'the file is left as it was, and no WAL or SHM file is made').toEqual(before);
  });

  it('a database whose pages are damaged behind a valid header', async () => {
    const dir = tempDir();
    const path = closedStore(dir);
    const bytes = readFileSync(path);
    const pageSize = bytes.readUInt16BE(16);
    expect(bytes.length, 'the schema takes more than one page').toBeGreaterThan(pageSize);
    // Page 1 (the header and the schema table) stays; every table's pages behind it are garbage.
    bytes.fill(0xa5, pageSize);
    writeFileSync(path, bytes);
    const before = contents(dir);
    const line = await refused(serveArgs(dir));
    expect(line).toMatch(/^subrun: .*corrupt/);
    expect(contents(dir)).toEqual(before);
  });

  it('a database with a schema newer than this subrun knows', async () => {
    const dir = tempDir();
    const path = closedStore(dir);
    const db = new Database(path);
    db.pragma('user_version = 99');
    db.close();
    const before = contents(dir);
    const line = await refused(serveArgs(dir));
    expect(line).toMatch(/^subrun: /);
    expect(line).toContain('schema version 99');
    expect(line).toContain(`(${SCHEMA_VERSION})`);
    expect(contents(dir), 'never migrated backward, never touched').toEqual(before);
    const again = new Database(path, { readonly: true });
    expect(again.pragma('user_version', { simple: true })).toBe(99);
    again.close();
  });

  it('a state directory writable by group or others', async () => {
    const dir = tempDir();
    chmodSync(dir, 0o770);
    const line = await refused(serveArgs(dir));
    expect(line).toMatch(/^subrun: .*writable by group or others/);
    expect(line).toContain('chmod 700');
    expect(mode(dir), 'its mode is the owner’s to change, not the server’s').toBe(0o770);
    expect(readdirSync(dir), 'nothing is made in it').toEqual([]);
  });

  it('a state directory another server holds: the second exits naming the holder and both ways out; the first keeps serving', async () => {
    const dir = tempDir();
    const first = await startWsServer(['--state-dir', dir]);
    const line = await refused(serveArgs(dir));
    expect(line).toMatch(/^subrun: /);
    expect(line).toContain(dir);
    expect(line).toContain(`pid ${first.proc.child.pid}`);
    expect(line).toContain(first.url);
    expect(line).toContain('--state-dir');
    expect(line).toContain('--no-state');
    // The refused start left the lock with its holder.
    expect(JSON.parse(readFileSync(join(dir, 'LOCK'), 'utf8'))).toEqual({ pid: first.proc.child.pid, listener: first.url });
    const ep = await client(first);
    expect((await ep.client.result('session.create', {})).session_id).toEqual(expect.stringMatching(/^ses_/));
    expect(first.proc.child.exitCode).toBeNull();
  });
});

describe('the lock', () => {
  it('a stale lock (its pid is not running) is taken over: the server starts, listens and names itself in it', async () => {
    const dir = tempDir();
    const gone = spawnSubrun(['--version']);
    await gone.waitExit();
    const pid = gone.child.pid!;
    expect(() => process.kill(pid, 0), `pid ${pid} is not running`).toThrow(expect.objectContaining({ code: 'ESRCH' }));
    writeFileSync(join(dir, 'LOCK'), JSON.stringify({ pid }), { mode: 0o600 });
    const server = await startWsServer(['--state-dir', dir]);
    const ep = await client(server);
    expect((await ep.client.result('server.info', {})).durable).toBe(true);
    expect(JSON.parse(readFileSync(join(dir, 'LOCK'), 'utf8'))).toEqual({ pid: server.proc.child.pid, listener: server.url });
  });

  it('what a server makes is its own: the directory 0700, the database, its WAL and the lock 0600', async () => {
    const dir = join(tempDir(), 'made-by-the-server');
    const server = await startWsServer(['--state-dir', dir]);
    const ep = await client(server);
    await ep.client.result('session.create', {});
    expect(mode(dir)).toBe(0o700);
    const files = readdirSync(dir).sort();
    expect(files).toEqual(expect.arrayContaining(['LOCK', 'store.db']));
    for (const f of files) expect([f, mode(join(dir, f))]).toEqual([f, 0o600]);
    expect(
      files.every((f) => ['LOCK', 'store.db', 'store.db-wal', 'store.db-shm'].includes(f)),
      files.join(', '),
    ).toBe(true);
  });
});

describe('subrun store stats', () => {
  it('counts what a stopped server kept; on a directory in use it is the holder line and exit 2', async () => {
    const dir = tempDir();
    const server = await startWsServer(['--state-dir', dir]);
    const { client: c } = await client(server);
    const a = await c.result<{ session_id: string; session_key: string }>('session.create', {});
    const b = await c.result<{ session_id: string; session_key: string }>('session.create', {});
    const task = { goal: 'says hi', agent: { kind: 'scripted', steps: [{ op: 'say', text: 'hi' }, { op: 'finish' }] } };
    const spawned = await c.result<{ delegation_id: string }>('delegation.spawn', { session_id: a.session_id, tasks: [task], idempotency_key: 'k1' });
    await c.waitForEvent((e) => e.type === 'delegation.complete' && e.payload.delegation_id === spawned.delegation_id);
    let events = 0;
    for (const s of [a, b])
      events += (await c.result<{ count: number }>('session.events.since', { session_id: s.session_id, session_key: s.session_key })).count;
    expect(events, 'the spawn told its session something').toBeGreaterThan(0);

    const line = await refused(['store', 'stats', '--state-dir', dir, '--json']);
    expect(line).toContain(`pid ${server.proc.child.pid}`);
    expect(line).toContain(server.url);
    expect(line).toContain('--no-state');

    server.proc.child.kill('SIGTERM');
    expect(await server.proc.waitExit(30_000)).toEqual({ code: 0, signal: null });
    const r = await runSubrun(['store', 'stats', '--state-dir', dir, '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      path: join(dir, 'store.db'),
      bytes: expect.any(Number),
      schema_version: SCHEMA_VERSION,
      sessions: 2,
      events,
      children: 1,
      unfinished_children: 0,
      steers: 0,
      delegations: 1,
      answers: 1,
    });
    // Reading the figures changed nothing: a second reading is the same.
    const again = await runSubrun(['store', 'stats', '--state-dir', dir, '--json']);
    expect(JSON.parse(again.stdout)).toEqual({ ...(JSON.parse(r.stdout) as object), bytes: expect.any(Number) });
  });
});

describe('which servers keep a store', () => {
  /** server.info over a `serve --stdio`, and the process's default state home. */
  async function stdioDurable(args: string[], xdg: string): Promise<boolean> {
    const { proc, peer } = await startStdio(args, { XDG_STATE_HOME: xdg });
    const info = await call<{ durable: boolean }>(peer, 'server.info', {});
    await proc.kill();
    return info.durable;
  }

  async function wsDurable(args: string[], xdg: string): Promise<boolean> {
    const server = await startWsServer(args, { env: { XDG_STATE_HOME: xdg } });
    const ep = await client(server);
    const info = await ep.client.result<{ durable: boolean }>('server.info', {});
    await server.proc.kill();
    return info.durable;
  }

  it('--stdio keeps none unless given --state-dir', async () => {
    const xdg = tempDir();
    expect(await stdioDurable([], xdg)).toBe(false);
    expect(readdirSync(xdg), 'a pipe writes no default state directory').toEqual([]);
    const dir = join(tempDir(), 'state');
    expect(await stdioDurable(['--state-dir', dir], xdg)).toBe(true);
    expect(existsSync(join(dir, 'store.db'))).toBe(true);
  });

  it(
    '--ws keeps one by default, in $XDG_STATE_HOME/subrun; --no-state keeps none',
    async () => {
      const xdg = tempDir();
      expect(await wsDurable([], xdg)).toBe(true);
      expect(existsSync(join(xdg, 'subrun', 'store.db'))).toBe(true);
      expect(mode(join(xdg, 'subrun'))).toBe(0o700);
      const other = tempDir();
      expect(await wsDurable(['--no-state'], other)).toBe(false);
      expect(readdirSync(other)).toEqual([]);
    },
    2 * WAIT_MS,
  );
});
