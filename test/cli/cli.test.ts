// The `subrun` command as a person runs it: `serve` option validation (exit 2, one line naming the
// option), flags over their environment twins, `--version`, and the shell client (`subrun call`,
// `subrun watch`) against a live `serve --ws`, each a real process over a real socket.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer } from 'ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CALL_FLAGS, CLIENT_FLAGS } from '../../src/cli/client.ts';
import { DEMO_FLAGS } from '../../src/cli/demo.ts';
import type { FlagSpec } from '../../src/cli/flags.ts';
import { SERVE_FLAGS } from '../../src/cli/serve.ts';
import { call, killAll, runSubrun, spawnSubrun, startStdio, startWsServer, type Proc, type WsServer } from '../helpers/process.ts';

/** What the shell client adds under a 4001: how to get a session (test/cli/first-hour.test.ts). */
const SESSION_HINT =
  '  this call needs a session this connection may use: run `subrun call session.create`, then pass --session ID --key KEY (or SUBRUN_SESSION and SUBRUN_SESSION_KEY)';

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

interface BadStart {
  readonly args: string[];
  readonly env?: Record<string, string>;
  /** What the one stderr line must name. */
  readonly names: string[];
}

const BAD_STARTS: BadStart[] = [
  { args: ['serve', '--ws', '--port', 'abc'], names: ['--port'] },
  { args: ['serve', '--ws', '--port', '70000'], names: ['--port'] },
  { args: ['serve', '--stdio', '--max-concurrent-children', '0'], names: ['--max-concurrent-children'] },
  { args: ['serve', '--stdio', '--max-spawn-depth', '-1'], names: ['--max-spawn-depth'] },
  { args: ['serve', '--stdio', '--park-ttl-ms', 'x'], names: ['--park-ttl-ms'] },
  { args: ['serve', '--stdio', '--max-batch', '0'], names: ['--max-batch'] },
  { args: ['serve', '--stdio', '--max-batch', '100001'], names: ['--max-batch'] },
  { args: ['serve', '--stdio', '--max-reply-bytes', '1023'], names: ['--max-reply-bytes'] },
  { args: ['serve', '--stdio'], env: { SUBRUN_MAX_REPLY_BYTES: '268435457' }, names: ['SUBRUN_MAX_REPLY_BYTES'] },
  { args: ['serve', '--stdio', '--log-level', 'loud'], names: ['--log-level'] },
  // Node would run a longer interval every millisecond.
  { args: ['serve', '--ws', '--heartbeat-ms', '2147483648'], names: ['--heartbeat-ms'] },
  // A longer deadline would fire at once.
  { args: ['serve', '--ws', '--shutdown-grace-ms', '2147483648'], names: ['--shutdown-grace-ms'] },
  { args: ['serve', '--stdio'], env: { SUBRUN_SHUTDOWN_GRACE_MS: 'soon' }, names: ['SUBRUN_SHUTDOWN_GRACE_MS'] },
  { args: ['serve', '--stdio', '--frobnicate'], names: ['--frobnicate'] },
  { args: ['serve', '--stdio', '--ws'], names: ['--stdio', '--ws'] },
  { args: ['serve'], names: ['--stdio', '--ws'] },
  { args: ['serve', '--acp', '--stdio'], names: ['--stdio', '--ws', '--acp'] },
  { args: ['serve', '--ws'], env: { SUBRUN_ACP: '1' }, names: ['--acp'] },
  { args: ['serve', '--mcp', '--acp'], names: ['--acp', '--mcp'] },
  { args: ['serve', '--stdio'], env: { SUBRUN_MCP: '1' }, names: ['--mcp'] },
  { args: ['serve'], env: { SUBRUN_ACP: 'maybe' }, names: ['SUBRUN_ACP'] },
  { args: ['serve', '--stdio', '--workspace', '/no/such/dir'], names: ['--workspace'] },
  { args: ['serve', '--stdio'], env: { SUBRUN_MAX_CONCURRENT_CHILDREN: 'zero' }, names: ['SUBRUN_MAX_CONCURRENT_CHILDREN'] },
];

describe('subrun serve: option validation', () => {
  afterAll(async () => {
    await killAll();
  });

  it.concurrent.each(BAD_STARTS)('refuses $args $env with exit 2 and one line naming the option', { timeout: 90_000 }, async ({ args, env, names }) => {
    const r = await runSubrun(args, env);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stdout).toBe('');
    const lines = r.stderr.split('\n').filter((l) => l !== '');
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(/^subrun: /);
    for (const name of names) expect(lines[0]).toContain(name);
  });
});

describe('subrun serve: flags and their environment twins', () => {
  afterEach(async () => {
    await killAll();
  });

  it('a flag wins over its twin; a twin alone applies', async () => {
    const { peer } = await startStdio(['--max-concurrent-children', '7', '--max-message-bytes', '2048', '--max-batch', '9'], {
      SUBRUN_MAX_CONCURRENT_CHILDREN: '5',
      SUBRUN_MAX_BATCH: '8',
      SUBRUN_MAX_REPLY_BYTES: '5000',
      // A twin that would be refused on its own is not even read when its flag is given.
      SUBRUN_MAX_MESSAGE_BYTES: 'zero',
      SUBRUN_MAX_SPAWN_DEPTH: '4',
      SUBRUN_PARK_TTL_MS: '1234',
    });
    const info = await call<{ limits: Record<string, number> }>(peer, 'server.info');
    expect(info.limits).toMatchObject({
      max_concurrent_children: 7,
      max_message_bytes: 2048,
      max_spawn_depth: 4,
      park_ttl_ms: 1234,
      max_batch: 9,
      max_reply_bytes: 5000,
    });
  });

  it('SUBRUN_TOKEN is the WebSocket token when --token is absent', async () => {
    const fromEnv = await startWsServer([], { token: null, env: { SUBRUN_TOKEN: 'from-env' } });
    // The token came from the environment: nothing was generated or printed.
    expect(fromEnv.proc.stderr.all.some((l) => l.startsWith('subrun token:'))).toBe(false);
    const [good, bad] = await Promise.all([
      runSubrun(['call', 'server.info', '--url', fromEnv.url, '--token', 'from-env']),
      runSubrun(['call', 'server.info', '--url', fromEnv.url, '--token', 'other']),
    ]);
    expect(good.code, good.stderr).toBe(0);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('HTTP 401');
  });
});

describe('--help', () => {
  const commands: Array<[string, readonly FlagSpec[]]> = [
    ['serve', SERVE_FLAGS],
    ['demo', DEMO_FLAGS],
    ['call', CALL_FLAGS],
    ['watch', CLIENT_FLAGS],
  ];

  it.each(commands)('subrun %s --help lists every option with its environment twins, and exits 0', async (command, flags) => {
    const r = await runSubrun([command, '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^usage: subrun ${command}`));
    const lines = r.stdout.split('\n');
    for (const f of flags) {
      const line = lines.findIndex((l) => l.trimStart().startsWith(`--${f.flag}`));
      expect(line, `--${f.flag}`).toBeGreaterThanOrEqual(0);
      // The help may wrap onto the next line when the flag is long.
      const text = `${lines[line]} ${lines[line + 1] ?? ''}`;
      for (const env of f.env === undefined ? [] : typeof f.env === 'string' ? [f.env] : f.env) expect(text, `--${f.flag}`).toContain(env);
    }
  });

  it('subrun --help lists every command and says how to get their options', async () => {
    const r = await runSubrun(['--help']);
    expect(r.code).toBe(0);
    for (const command of ['demo', 'serve', 'call', 'watch']) expect(r.stdout).toMatch(new RegExp(`^  ${command} `, 'm'));
    expect(r.stdout).toContain('subrun <command> --help');
  });

  it('help wins over everything else on the line: no server starts, no option is checked', async () => {
    const r = await runSubrun(['serve', '--stdio', '--port', 'not-a-number', '--help']);
    expect(r).toMatchObject({ code: 0, stderr: '' });
  });
});

describe('subrun --version', () => {
  it('prints the package version and exits 0', async () => {
    const r = await runSubrun(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(VERSION);
    expect(r.stderr).toBe('');
  });
});

describe('the shell client against a live serve --ws', () => {
  let server: WsServer;
  const TOKEN = 'cli-token';
  let url: string;
  let session_id = '';
  let session_key = '';
  let child = '';
  let watcher: Proc | undefined;

  /** `subrun call ...` against the server, attached to the session unless told otherwise. */
  const cli = (args: string[], opts: { attach?: boolean; env?: Record<string, string> } = {}) =>
    runSubrun(['call', ...args, '--url', url, '--token', TOKEN, ...(opts.attach === false ? [] : ['--session', session_id, '--key', session_key])], opts.env);
  const json = (r: { code: number | null; stdout: string; stderr: string }) => {
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as Record<string, unknown>;
  };
  /** The watcher's next printed event of this type (consumed). */
  const watched = async (type: string) =>
    JSON.parse(await (watcher as Proc).stdout.take((l) => JSON.parse(l).type === type, 20_000, type)) as {
      type: string;
      session_id: string;
      seq: number;
      payload: Record<string, unknown>;
    };

  beforeAll(async () => {
    server = await startWsServer([], { token: TOKEN });
    url = server.url;
  });
  afterAll(async () => {
    await killAll();
  });

  it('call session.create prints the new session as JSON', async () => {
    const r = await cli(['session.create', '{"title":"from the terminal"}'], { attach: false });
    const result = json(r);
    expect(result).toMatchObject({ session_id: expect.stringMatching(/^ses_/), session_key: expect.any(String), generation: 1 });
    expect(r.stdout).toContain('\n  "'); // pretty-printed
    session_id = result.session_id as string;
    session_key = result.session_key as string;
  });

  it('watch prints the session’s events as JSON lines', async () => {
    watcher = spawnSubrun(['watch', '--url', url, '--token', TOKEN, '--session', session_id, '--key', session_key]);
    await watcher.stderr.take((l) => l.includes(`watching ${session_id}`), 20_000, 'the watching line');
    const spawned = json(
      await cli([
        'delegation.spawn',
        JSON.stringify({
          tasks: [
            {
              goal: 'wait for a steer',
              agent: { kind: 'scripted', steps: [{ op: 'say', text: 'ready' }, { op: 'wait_steer' }, { op: 'say', text: 'after steer' }, { op: 'hang' }] },
            },
          ],
        }),
      ]),
    );
    expect(spawned).toMatchObject({ status: 'dispatched', count: 1, subagent_ids: [expect.any(String)] });
    child = (spawned.subagent_ids as string[])[0] as string;
    const start = await watched('subagent.start');
    expect(start).toMatchObject({ session_id, payload: { subagent_id: child, goal: 'wait for a steer' } });
    expect(await watched('subagent.text')).toMatchObject({ payload: { subagent_id: child, text: 'ready' } });
    // Every line the watcher printed is one event object.
    for (const line of watcher.stdout.all) expect(JSON.parse(line)).toMatchObject({ session_id, seq: expect.any(Number), type: expect.any(String) });
  });

  it('call subagent.list --session/--key lists the running child', async () => {
    const list = json(await cli(['subagent.list']));
    expect(list).toMatchObject({ subagents: [{ subagent_id: child, status: 'running', depth: 0, parent_id: null }], delegations: [] });
  });

  it('call subagent.list without attaching is refused: each call is a new connection', async () => {
    const r = await cli(['subagent.list', JSON.stringify({ session_id })], { attach: false });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`error 4001: session not found or not owned by this transport\n${SESSION_HINT}`);
  });

  it('call subagent.steer queues a steer that the child takes', async () => {
    const steer = json(await cli(['subagent.steer', JSON.stringify({ subagent_id: child, text: '  focus on section 5  ' })]));
    expect(steer).toMatchObject({ status: 'queued', subagent_id: child, text: 'focus on section 5', steer_id: expect.any(String) });
    expect(steer).not.toHaveProperty('delivered');
    expect(await watched('subagent.steer.delivered')).toMatchObject({ payload: { subagent_id: child, text: 'focus on section 5', steer_id: steer.steer_id } });
    expect(await watched('subagent.text')).toMatchObject({ payload: { text: 'after steer' } });
  });

  it('call subagent.tail shows the transcript', async () => {
    const tail = json(await cli(['subagent.tail', JSON.stringify({ subagent_id: child })]));
    expect(tail).toMatchObject({ subagent_id: child, available: true, truncated: false });
    expect(tail.text).toContain('ready');
    expect(tail.text).toContain('after steer');
    expect(tail.offset).toBe(Buffer.byteLength(tail.text as string));
  });

  it('call subagent.interrupt stops the child; the watcher sees it complete as interrupted', async () => {
    const r = json(await cli(['subagent.interrupt', JSON.stringify({ subagent_id: child })]));
    expect(r).toStrictEqual({ found: true, subagent_id: child, interrupted: [child] });
    const complete = await watched('subagent.complete');
    expect(complete.payload).toMatchObject({ subagent_id: child, status: 'interrupted', summary: 'after steer' });
    expect(complete.payload).not.toHaveProperty('entry');
    const again = json(await cli(['subagent.interrupt', JSON.stringify({ subagent_id: child })]));
    expect(again).toStrictEqual({ found: false, subagent_id: child, interrupted: [] });
  });

  it('the watcher printed strictly rising seqs, and exits 0 on SIGINT', async () => {
    const w = watcher as Proc;
    const seqs = w.stdout.all.map((l) => (JSON.parse(l) as { seq: number }).seq);
    expect(seqs.length).toBeGreaterThan(4);
    expect(seqs).toStrictEqual(seqs.map((_, i) => (seqs[0] as number) + i));
    w.child.kill('SIGINT');
    expect(await w.waitExit()).toStrictEqual({ code: 0, signal: null });
  });

  it('errors print `error CODE: message` on stderr and exit non-zero', { timeout: 90_000 }, async () => {
    const [unknownSession, unknownMethod, badParams, badKey, badJson, badToken, noServer, envTwins] = await Promise.all([
      cli(['subagent.list', '{"session_id":"ses_nope"}'], { attach: false }),
      cli(['nope.nope'], { attach: false }),
      cli(['delegation.spawn', JSON.stringify({ tasks: [{ goal: '' }] })]),
      runSubrun(['call', 'subagent.list', '--url', url, '--token', TOKEN, '--session', session_id, '--key', 'wrong']),
      cli(['server.info', '{not json'], { attach: false }),
      runSubrun(['call', 'server.info', '--url', url, '--token', 'wrong']),
      runSubrun(['call', 'server.info', '--url', 'ws://127.0.0.1:1/', '--token', TOKEN]),
      runSubrun(['call', 'server.info'], { SUBRUN_URL: url, SUBRUN_TOKEN: TOKEN }),
    ]);
    expect(unknownSession).toMatchObject({ code: 1, stdout: '', stderr: `error 4001: session not found or not owned by this transport\n${SESSION_HINT}` });
    expect(unknownMethod).toMatchObject({ code: 1, stdout: '', stderr: 'error -32601: Method not found: nope.nope' });
    expect(badParams.code).toBe(1);
    expect(badParams.stderr).toMatch(/^error -32602: invalid params: tasks\.0\.goal: .* \{"issues":\[/);
    expect(badKey.code).toBe(1);
    expect(badKey.stderr).toBe(`subrun: attach failed: error 4001: session not found or not owned by this transport\n${SESSION_HINT}`);
    expect(badJson.code).toBe(2);
    expect(badJson.stderr).toMatch(/^subrun: PARAMS_JSON is not valid JSON/);
    expect(badToken.code).toBe(1);
    expect(badToken.stderr).toContain('HTTP 401');
    expect(noServer.code).toBe(1);
    expect(noServer.stderr).toMatch(/^subrun: cannot connect to ws:\/\/127\.0\.0\.1:1\//);
    expect(JSON.parse(envTwins.stdout)).toMatchObject({ name: 'subrun', version: VERSION });
  });

  it('a usage error after connecting (--session without --key) still exits 2 promptly', async () => {
    const r = await runSubrun(['call', 'subagent.list', '--url', url, '--token', TOKEN, '--session', session_id], {}, 15_000);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--key');
  });
});

describe('subrun watch: events that arrive with the attach reply', () => {
  // A stand-in server that writes the attach reply and the session's first two events in ONE
  // socket write, so they reach the client in one read (ws dispatches them synchronously). A
  // watcher that only starts listening for events after its attach call resolved loses them.
  let http: Server;
  let port = 0;

  beforeAll(async () => {
    const wss = new WebSocketServer({ noServer: true });
    http = createServer();
    http.on('upgrade', (req, socket: Socket, head) => {
      wss.handleUpgrade(req, socket, head, (ws) => {
        ws.on('message', (data) => {
          const msg = JSON.parse(String(data)) as { id: number; method: string; params: { session_id: string } };
          const reply = { jsonrpc: '2.0', id: msg.id, result: { session_id: msg.params.session_id, generation: 1, live_subagents: 1 } };
          const event = (seq: number) => ({
            jsonrpc: '2.0',
            method: 'event',
            params: { type: 'subagent.text', session_id: 'ses_x', seq, ts: 1, payload: { text: `e${seq}` } },
          });
          const frame = (o: unknown) => {
            // One unmasked FIN text frame (server to client), built by hand.
            const payload = Buffer.from(JSON.stringify(o));
            const head = payload.length < 126 ? Buffer.from([0x81, payload.length]) : Buffer.from([0x81, 126, payload.length >> 8, payload.length & 0xff]);
            return Buffer.concat([head, payload]);
          };
          socket.write(Buffer.concat([frame(reply), frame(event(1)), frame(event(2))]));
          // A later event in a read of its own: a watcher that lost the first two prints this first.
          setTimeout(() => socket.write(frame(event(3))), 200);
        });
      });
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    port = (http.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await killAll();
    http.closeAllConnections();
    await new Promise((r) => http.close(r));
  });

  it('prints every event, including one in the same read as the attach reply', async () => {
    const w = spawnSubrun(['watch', '--url', `ws://127.0.0.1:${port}/`, '--session', 'ses_x', '--key', 'k']);
    const lines: string[] = [];
    for (let i = 0; i < 3; i++) lines.push(await w.stdout.take(undefined, 20_000, `event ${i + 1}`));
    expect(lines.map((l) => (JSON.parse(l) as { seq: number }).seq)).toStrictEqual([1, 2, 3]);
    w.child.kill('SIGINT');
    expect((await w.waitExit()).code).toBe(0);
  });
});
