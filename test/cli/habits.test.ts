// CLI habits a person relies on: `subrun watch --format pretty` (one readable line per event),
// `watch --reconnect` across a server restart (backoff, then a resume from the last seq printed,
// each step said on stderr, every event printed once), `--log-format pretty`, and a retried model
// request logging one line per retry at info. Real processes, sockets and a local fake model.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { answer, FakeModel } from '../helpers/fake-model.ts';
import { killAll, runSubrun, spawnSubrun, startWsServer, WAIT_MS, type WsServer } from '../helpers/process.ts';

afterEach(killAll);

async function session(server: WsServer): Promise<{ session_id: string; session_key: string }> {
  const created = await runSubrun(['call', 'session.create', '--url', server.url, '--token', server.token]);
  expect(created.code, created.stderr).toBe(0);
  return JSON.parse(created.stdout) as { session_id: string; session_key: string };
}

/** `subrun call delegation.spawn` with the session's id and key; the first child's id. */
async function spawnVia(server: WsServer, s: { session_id: string; session_key: string }, tasks: unknown[]): Promise<string> {
  const r = await runSubrun([
    'call',
    'delegation.spawn',
    JSON.stringify({ tasks }),
    '--url',
    server.url,
    '--token',
    server.token,
    '--session',
    s.session_id,
    '--key',
    s.session_key,
  ]);
  expect(r.code, r.stderr).toBe(0);
  return (JSON.parse(r.stdout) as { subagent_ids: string[] }).subagent_ids[0] ?? '';
}

async function spawnScripted(server: WsServer, s: { session_id: string; session_key: string }, goal: string): Promise<string> {
  const tasks = [
    {
      goal,
      agent: {
        kind: 'scripted',
        steps: [
          { op: 'say', text: `${goal} says hi` },
          { op: 'finish', summary: `${goal} done` },
        ],
      },
    },
  ];
  return spawnVia(server, s, tasks);
}

const watchArgs = (server: WsServer, s: { session_id: string; session_key: string }, ...extra: string[]) => [
  'watch',
  '--url',
  server.url,
  '--token',
  server.token,
  '--session',
  s.session_id,
  '--key',
  s.session_key,
  ...extra,
];

describe('subrun watch', () => {
  it('--format pretty prints one readable line per event', async () => {
    const server = await startWsServer(['--no-state']);
    const s = await session(server);
    const watcher = spawnSubrun(watchArgs(server, s, '--format', 'pretty'));
    await watcher.stderr.take((l) => l.startsWith('watching '), WAIT_MS, 'the watcher attached');
    const id = await spawnScripted(server, s, 'greeter');
    const done = await watcher.stdout.take((l) => l.includes('subagent.complete'), WAIT_MS, 'the completion line');
    expect(done).toMatch(new RegExp(`^\\d\\d:\\d\\d:\\d\\d #\\d+ subagent\\.complete +${id} completed \\(completed, \\d+\\.\\d s\\) "greeter done"$`));
    const lines = watcher.stdout.all;
    expect(lines.find((l) => l.includes('subagent.text'))).toMatch(new RegExp(`subagent\\.text +${id} says "greeter says hi"$`));
    expect(lines.some((l) => l.startsWith('{'))).toBe(false);
    expect((await runSubrun(watchArgs(server, s, '--format', 'yaml'))).stderr).toBe('subrun: --format must be json or pretty, got "yaml"');
  });

  it('--reconnect waits out a server restart and resumes after the last seq it printed, each event once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'subrun-watch-'));
    try {
      const first = await startWsServer(['--state-dir', dir]);
      const s = await session(first);
      const watcher = spawnSubrun(watchArgs(first, s, '--reconnect'));
      await watcher.stderr.take((l) => l.startsWith('watching '), WAIT_MS, 'the watcher attached');
      await spawnScripted(first, s, 'before');
      await watcher.stdout.take((l) => l.includes('"subagent.complete"'), WAIT_MS, 'the first completion');
      first.proc.child.kill('SIGKILL');
      const lost = await watcher.stderr.take((l) => l.startsWith('subrun: connection lost after seq '), WAIT_MS, 'the watcher saying so');
      const lastSeen = Number(/after seq (\d+)/.exec(lost)?.[1]);
      expect(lost).toMatch(/reconnecting in 250 ms \(attempt 1\)$/);
      // The same port and state: the session and its events survive the restart.
      const second = await startWsServer(['--state-dir', dir, '--port', String(first.port)]);
      const after = await spawnScripted(second, s, 'after');
      const resumed = await watcher.stderr.take((l) => l.startsWith('subrun: reconnected; '), WAIT_MS, 'the watcher back');
      expect(resumed).toMatch(new RegExp(`^subrun: reconnected; resumed after seq ${lastSeen} \\(\\d+ missed events? replayed\\)$`));
      await watcher.stdout.take((l) => l.includes('"subagent.complete"') && l.includes(after), WAIT_MS, 'the second completion');
      const seqs = watcher.stdout.all.map((l) => (JSON.parse(l) as { seq: number }).seq);
      // Every event once, in order: strictly increasing seqs across the restart.
      expect(seqs).toEqual([...new Set(seqs)].sort((a, b) => a - b));
      expect(seqs.some((q) => q > lastSeen)).toBe(true);
      watcher.child.kill('SIGINT');
      expect((await watcher.waitExit(WAIT_MS)).code).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('logs', () => {
  let model: FakeModel;
  beforeAll(async () => {
    model = await FakeModel.start();
  });
  afterAll(() => model.close());

  it.each(['pretty', 'json'] as const)('a retried model request logs one line per retry at info (--log-format %s)', async (format) => {
    model.reply({ status: 503, body: '{"error":{"message":"overloaded"}}' }, answer('done'));
    const server = await startWsServer(['--no-state', '--log-level', 'info', '--log-format', format, '--base-url', model.url, '--model', 'fake']);
    const s = await session(server);
    const tasks = [{ goal: 'on the model', agent: { kind: 'openai' } }];
    await spawnVia(server, s, tasks);
    const line = await server.proc.stderr.take((l) => l.includes('model request failed; retrying'), WAIT_MS, 'the retry line');
    if (format === 'pretty') {
      expect(line).toMatch(
        /^\d\d:\d\d:\d\d\.\d{3} INFO  model request failed; retrying subagent_id=sa_\w+ model=fake retry=1 max_retries=3 delay_ms=500 error_kind=http status=503$/,
      );
    } else {
      expect(JSON.parse(line)).toMatchObject({
        level: 30,
        msg: 'model request failed; retrying',
        retry: 1,
        max_retries: 3,
        delay_ms: 500,
        error_kind: 'http',
        status: 503,
      });
    }
    // The retry's request was the second: by then the one retry has said so, once.
    await model.waitForRequests(model.requests.length >= 2 ? model.requests.length : 2);
    expect(server.proc.stderr.all.filter((l) => l.includes('model request failed; retrying'))).toHaveLength(1);
  });

  it('refuses a log format it does not know, naming both', async () => {
    const r = await runSubrun(['serve', '--stdio', '--log-format', 'xml']);
    expect(r.stderr).toBe('subrun: --log-format must be json or pretty, got "xml"');
    expect(r.code).toBe(2);
  });
});
