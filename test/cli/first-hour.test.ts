// The slips of a first hour, each answered with what to do: `subrun help serve` and `subrun
// version`, a near-miss option or command ("did you mean"), a port in use, a missing or wrong
// token, a call without a session, `--store jetstream` without NATS, and `watch` saying so when
// its server goes away. Real processes over real sockets.
import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { killAll, runSubrun, spawnSubrun, startWsServer, WAIT_MS } from '../helpers/process.ts';

const held: Server[] = [];
afterEach(async () => {
  await killAll();
  for (const s of held.splice(0)) await new Promise((r) => s.close(r));
});

/** Its one stderr line (a usage error prints exactly one). */
function oneLine(stderr: string): string {
  const lines = stderr.trim().split('\n');
  expect(lines, stderr).toHaveLength(1);
  return lines[0] ?? '';
}

describe('the first hour', () => {
  it('`subrun help serve` is `subrun serve --help`; `subrun version` is `--version`', async () => {
    const [viaHelp, direct, version, flag] = await Promise.all([
      runSubrun(['help', 'serve']),
      runSubrun(['serve', '--help']),
      runSubrun(['version']),
      runSubrun(['--version']),
    ]);
    expect(viaHelp.code).toBe(0);
    expect(viaHelp.stdout).toBe(direct.stdout);
    expect(viaHelp.stdout).toMatch(/^usage: subrun serve/);
    expect(version.code).toBe(0);
    expect(version.stdout).toBe(flag.stdout);
  });

  it('names the option or command a slip was near', async () => {
    const option = await runSubrun(['serve', '--ws', '--prot', '8790']);
    expect(option.code).toBe(2);
    expect(oneLine(option.stderr)).toBe('subrun: unknown option --prot; did you mean --port?');
    const command = await runSubrun(['serv', '--ws']);
    expect(command.code).toBe(2);
    expect(oneLine(command.stderr)).toBe('subrun: unknown command "serv" (did you mean serve?); try subrun --help');
    // Nothing near: no guess.
    const far = await runSubrun(['serve', '--ws', '--frobnicate']);
    expect(oneLine(far.stderr)).toBe('subrun: unknown option --frobnicate');
  });

  it('says a port in use is in use, and the way out', async () => {
    const holder = createServer();
    held.push(holder);
    await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
    const port = (holder.address() as AddressInfo).port;
    const r = await runSubrun(['serve', '--ws', '--no-state', '--port', String(port), '--token', 'first-hour-token']);
    expect(r.code).toBe(2);
    expect(oneLine(r.stderr)).toBe(`subrun: 127.0.0.1:${port} is in use: stop what holds it, or pick another port with --port N (--port 0: any free port)`);
  });

  it('names the flag and the variable behind a 401, and what a call without a session needs', async () => {
    const server = await startWsServer(['--no-state'], { token: 'first-hour-token' });
    const none = await runSubrun(['call', 'session.create', '--url', server.url]);
    expect(none.code).toBe(1);
    expect(oneLine(none.stderr)).toMatch(/HTTP 401: no token given; pass --token T or set SUBRUN_TOKEN/);
    const wrong = await runSubrun(['call', 'session.create', '--url', server.url, '--token', 'not-the-token']);
    expect(oneLine(wrong.stderr)).toMatch(/HTTP 401: the token is wrong; .*--token T or SUBRUN_TOKEN/);
    const sessionless = await runSubrun(['call', 'subagent.list', '--url', server.url, '--token', server.token]);
    expect(sessionless.code).toBe(1);
    expect(sessionless.stderr).toMatch(/^error 4001: .*\n {2}this call needs a session .*subrun call session.create.*--session ID --key KEY/);
  });

  it('refuses --store jetstream without --nats, and a store it does not know, in one line', async () => {
    const alone = await runSubrun(['serve', '--ws', '--store', 'jetstream']);
    expect(alone.code).toBe(2);
    expect(oneLine(alone.stderr)).toBe('subrun: --store jetstream needs --nats');
    const odd = await runSubrun(['serve', '--ws', '--store', 'redis']);
    expect(oneLine(odd.stderr)).toBe('subrun: --store must be sqlite or jetstream, got "redis"');
  });

  it('lets a flag beat the environment: --no-state with SUBRUN_STATE_DIR set keeps no state', async () => {
    const flagWins = await runSubrun(['serve', '--stdio', '--no-state'], { SUBRUN_STATE_DIR: '/nonexistent/subrun-state' });
    expect(flagWins.code, flagWins.stderr).toBe(0);
    expect(flagWins.stderr).not.toMatch(/exclude/);
    const both = await runSubrun(['serve', '--stdio', '--no-state', '--state-dir', '/nonexistent/subrun-state']);
    expect(both.code).toBe(2);
    expect(oneLine(both.stderr)).toBe('subrun: --no-state and --state-dir exclude each other');
  });

  it('`subrun watch` says so when its server goes away, and exits 1', async () => {
    const server = await startWsServer(['--no-state'], { token: 'first-hour-token' });
    const created = await runSubrun(['call', 'session.create', '--url', server.url, '--token', server.token]);
    const s = JSON.parse(created.stdout) as { session_id: string; session_key: string };
    const watcher = spawnSubrun(['watch', '--url', server.url, '--token', server.token, '--session', s.session_id, '--key', s.session_key]);
    await watcher.stderr.take((l) => l.startsWith('watching '), WAIT_MS, 'the watcher attached');
    server.proc.child.kill('SIGTERM');
    await watcher.stderr.take((l) => l.startsWith('subrun: the server closed the connection'), WAIT_MS, 'the watcher saying so');
    expect((await watcher.waitExit(WAIT_MS)).code).toBe(1);
  });
});
