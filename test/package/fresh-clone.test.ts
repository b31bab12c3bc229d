// A newcomer's first commands: a fresh clone, `npm ci`, and then every `npx subrun ...` the README
// shows must run (the build happens on install: the `prepare` script), and a clone whose build is
// missing says in one line what to run, never a stack trace. Real git, real npm (from its cache:
// the lock file's packages are the ones this checkout installed), real processes.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/process.ts';

interface Ran {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function run(cmd: string, args: readonly string[], cwd: string, timeout = 120_000): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(
      cmd,
      args,
      { cwd, timeout, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false' } },
      (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
      },
    );
  });
}

let dir: string;
let clone: string;
let installWarnings = '';
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'subrun-clone-'));
  clone = join(dir, 'subrun');
  const cloned = await run('git', ['clone', '--quiet', '--no-hardlinks', ROOT, clone], dir);
  expect(cloned.code, cloned.stderr).toBe(0);
  const installed = await run('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund'], clone, 600_000);
  expect(installed.code, installed.stderr.slice(-2000)).toBe(0);
  installWarnings = installed.stderr;
}, 660_000);
// Removing a whole installed clone (its node_modules, a native build) is disk-bound: on a busy
// machine it took past the default 30 s hook bound once, so the cleanup has the install's scale.
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
}, 300_000);

describe('a fresh clone after npm ci', () => {
  it('installs on Node 20 without an engine warning (@nats-io/nuid is pinned to its Node 18+ release)', () => {
    expect(installWarnings).not.toContain('EBADENGINE');
  });

  it('runs `npx subrun` and its subcommands’ help, as the README shows them', async () => {
    for (const args of [['--help'], ['serve', '--help'], ['call', '--help'], ['watch', '--help'], ['worker', '--help']]) {
      const ran = await run('npx', ['--no-install', 'subrun', ...args], clone);
      expect(ran.code, `${args.join(' ')}: ${ran.stderr}`).toBe(0);
      expect(ran.stdout).toMatch(/usage: subrun/);
    }
  });

  it("runs the README's first example as written (npx tsx examples/library.ts)", async () => {
    const ran = await run('npx', ['--no-install', 'tsx', 'examples/library.ts'], clone);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toContain('late steer: finished');
  });

  it('says in one line what to run when the build is missing', async () => {
    rmSync(join(clone, 'dist'), { recursive: true, force: true });
    const ran = await run('npx', ['--no-install', 'subrun', '--help'], clone);
    expect(ran.code).toBe(2);
    expect(ran.stdout).toBe('');
    expect(ran.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^subrun: not built yet: run `npm run build` in .+ \(a clone builds on `npm ci`\)$/)]);
  });
});
