// A hermes-shaped host (test/helpers/hermes-host.ts, which behaves like hermes-agent's own client)
// against real `subrun serve` processes, over WebSocket at /api/ws and over stdio, in both
// authority modes. Every frame it receives is held to hermes' shapes (hermes-shapes.ts): zero
// missing required fields, zero wrong types, zero missing methods on the whole path.
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { answer, callTools, FakeModel, type RecordedRequest } from '../helpers/fake-model.ts';
import { GatewayError, HermesHost, hermesWsUrl, stdioWire, wsWire, type HermesEvent, type HermesWire } from '../helpers/hermes-host.ts';
import { killAll, spawnSubrun, startWsServer, WAIT_MS, type Proc } from '../helpers/process.ts';
import { hermesProblems } from './hermes-shapes.ts';

const TOKEN = 'hermes tok+/=&x';
const dirs: string[] = [];
let model: FakeModel | undefined;
afterEach(async () => {
  await killAll();
  await model?.close();
  model = undefined;
});
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function stateDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'subrun-hermes-'));
  dirs.push(d);
  return d;
}

/** A host whose every inbound frame is checked against hermes' shapes. */
function hermesHost(problems: string[]): HermesHost {
  const host = new HermesHost();
  host.onFrame = (frame, answers) => problems.push(...hermesProblems(frame, answers));
  return host;
}

/** A child that says one line per steer it takes, `rounds` times, then waits forever. */
const talker = (rounds: number) => ({
  kind: 'scripted',
  steps: [...Array.from({ length: rounds }, (_, i) => [{ op: 'wait_steer' }, { op: 'say', text: `round ${i}` }]).flat(), { op: 'hang' }],
});

/** The fake model: the parent delegates one task, waits for it, then answers; the child reports. */
function delegatingModel(m: FakeModel): void {
  let parentCalls = 0;
  const route = (req: RecordedRequest) => {
    const system = String(req.body.messages[0]?.content ?? '');
    if (!system.startsWith('You are the parent agent')) return answer('child report');
    parentCalls += 1;
    if (parentCalls === 1) return callTools([{ name: 'delegate_task', args: { tasks: [{ goal: 'look around' }] }, id: 'call_d1' }]);
    // Done once the child's report is in the conversation (it may come with either later call).
    const reported = req.body.messages.some((m) => m.role === 'user' && String(m.content).startsWith('[subagent '));
    return answer(reported ? 'all done' : 'waiting for it');
  };
  m.reply(...Array.from({ length: 8 }, () => route));
}

const next = (host: HermesHost, pred: (e: HermesEvent) => boolean, what: string) => host.events.take(pred, WAIT_MS, what);
const of = (type: string, subagent_id?: string) => (e: HermesEvent) => e.type === type && (subagent_id === undefined || e.payload?.subagent_id === subagent_id);
const said = (text: string) => (e: HermesEvent) => e.type === 'subagent.text' && e.payload?.text === text;

interface Served {
  readonly proc: Proc;
  readonly dial: () => Promise<HermesWire>;
  readonly state: string;
}

async function serve(transport: 'ws' | 'stdio', singleUser: boolean, extra: string[] = []): Promise<Served> {
  const state = stateDir();
  model = await FakeModel.start();
  delegatingModel(model);
  const args = ['--state-dir', state, '--base-url', model.url, '--model', 'fake-model', ...extra];
  // The flag on one transport, its environment twin on the other.
  if (transport === 'ws') {
    const s = await startWsServer([...args, ...(singleUser ? ['--single-user'] : [])], { token: TOKEN });
    return { proc: s.proc, state, dial: () => wsWire(hermesWsUrl(s.port, TOKEN, { profile: 'default' })) };
  }
  const proc = spawnSubrun(['serve', '--stdio', ...args], singleUser ? { SUBRUN_SINGLE_USER: '1' } : {});
  const wire = stdioWire(proc.child.stdin, proc.child.stdout);
  return { proc, state, dial: async () => wire };
}

/** The session's seqs the host dispatched, in dispatch order. */
const seqsOf = (host: HermesHost, sid: string) => host.events.all.filter((e) => e.session_id === sid).map((e) => e.seq as number);

describe.each([
  ['ws', false],
  ['ws', true],
  ['stdio', false],
  ['stdio', true],
] as const)('a hermes host over %s (single-user: %s)', (transport, singleUser) => {
  it(
    "connects, creates, spawns, lists, tails, steers, interrupts, reads flat completions, replays, resumes and keeps spawn trees, every frame in hermes' shapes",
    { timeout: 120_000 },
    async () => {
      const problems: string[] = [];
      const served = await serve(transport, singleUser);
      const host = hermesHost(problems);
      await host.connect(await served.dial());

      // gateway.ready first, with hermes' fields; heartbeats and pings answered.
      expect(host.ready?.payload).toMatchObject({ skin: {}, change_events: false, heartbeat: true, replay_epoch: expect.any(String) });
      expect(host.ready).not.toHaveProperty('session_id');
      expect(await host.request('ping')).toEqual({ pong: true });
      expect(await host.heartbeat()).toEqual({ pong: true, ok: true });
      expect(await host.request('client.capabilities', { server_requests: true })).toEqual({ server_requests: [] });

      // session.create with a desktop's params (title null included).
      const created = await host.request('session.create', { source: 'desktop', close_on_disconnect: false, title: null, cols: 80, profile: null });
      const sid = created.session_id as string;
      const key = created.session_key as string;
      expect(created).toMatchObject({
        stored_session_id: sid,
        message_count: 0,
        messages: [],
        info: { pong: true, model: 'fake-model', running: false, title: '' },
      });

      // Children by delegation.spawn: one that talks when steered, one to stop, one that finishes.
      const spawn = await host.request('delegation.spawn', {
        session_id: sid,
        tasks: [
          { goal: 'talks', agent: talker(6) },
          { goal: 'stoppable', agent: { kind: 'scripted', steps: [{ op: 'say', text: 'working on it' }, { op: 'hang' }] } },
          {
            goal: 'finisher',
            agent: {
              kind: 'scripted',
              steps: [
                { op: 'tool', name: 'read_file', args: { path: 'spec.md' } },
                { op: 'finish', summary: 'done quickly' },
              ],
            },
          },
        ],
      });
      const [talks, stoppable, finisher] = spawn.subagent_ids as [string, string, string];
      const tool = await next(host, of('subagent.tool', finisher), "the finisher's tool");
      expect(tool.payload).toMatchObject({
        tool_name: 'read_file',
        tool_preview: '{"path":"spec.md"}',
        text: '{"path":"spec.md"}',
        goal: 'finisher',
        task_index: 2,
        task_count: 3,
      });
      const finished = await next(host, of('subagent.complete', finisher), "the finisher's completion");
      expect(finished.payload).toMatchObject({
        status: 'completed',
        summary: 'done quickly',
        api_calls: 0,
        input_tokens: 0,
        output_tokens: 0,
        model: 'scripted',
      });
      expect(typeof finished.payload?.duration_seconds).toBe('number');

      // list, tail, steer, interrupt: hermes' shapes, kept as they were.
      await next(host, said('working on it'), "the stoppable child's line");
      const list = await host.request('subagent.list', { session_id: sid });
      expect((list.subagents as { subagent_id: string }[]).map((s) => s.subagent_id).sort()).toEqual([stoppable, talks].sort());
      expect(await host.request('subagent.tail', { session_id: sid, subagent_id: stoppable })).toMatchObject({
        available: true,
        text: expect.stringContaining('working on it'),
      });
      expect(await host.request('subagent.steer', { session_id: sid, subagent_id: talks, text: 'one' })).toMatchObject({
        status: 'queued',
        subagent_id: talks,
        text: 'one',
      });
      await next(host, said('round 0'), 'round 0');
      expect(await host.request('subagent.interrupt', { session_id: sid, subagent_id: stoppable })).toMatchObject({ found: true, subagent_id: stoppable });
      const stopped = await next(host, of('subagent.complete', stoppable), "the stopped child's completion");
      expect(stopped.payload).toMatchObject({ status: 'interrupted', summary: 'working on it' });

      // Status and pause as hermes calls them: no session.
      const status = await host.request('delegation.status', {});
      expect((status.active as { subagent_id: string }[]).map((s) => s.subagent_id)).toEqual([talks]);
      expect(await host.request('delegation.pause', {})).toEqual({ paused: true });
      expect(await host.request('delegation.status', {})).toMatchObject({ paused: true });
      await expect(host.request('delegation.spawn', { session_id: sid, tasks: [{ goal: 'refused' }] })).rejects.toMatchObject({ code: 4011 });
      expect(await host.request('delegation.pause', { paused: false })).toEqual({ paused: false });

      // A parent turn on the model: it streams, delegates through delegate_task, and completes.
      expect(await host.request('prompt.submit', { session_id: sid, text: 'look around for me' })).toMatchObject({ status: 'streaming' });
      await next(host, of('message.start'), 'message.start');
      const toolStart = await next(host, of('tool.start'), 'tool.start');
      expect(toolStart.payload).toMatchObject({ tool_id: 'call_d1', name: 'delegate_task', args: { tasks: [{ goal: 'look around' }] } });
      expect((await next(host, of('tool.complete'), 'tool.complete')).payload).toMatchObject({ tool_id: 'call_d1', name: 'delegate_task' });
      const child = await next(host, (e) => e.type === 'subagent.complete' && e.payload?.goal === 'look around', "the model child's completion");
      expect(child.payload).toMatchObject({ status: 'completed', summary: 'child report', model: 'fake-model' });
      const turn = await next(host, of('message.complete'), 'message.complete');
      expect(turn.payload).toMatchObject({ status: 'complete', text: 'all done', usage: { calls: expect.any(Number), input: expect.any(Number) } });

      if (transport === 'ws') {
        // A second host watches the session (resume: with the key, or without it in single-user mode).
        const watcher = hermesHost(problems);
        await watcher.connect(await served.dial());
        await watcher.request('session.resume', singleUser ? { session_id: sid } : { session_id: sid, session_key: key });

        // The host's socket drops while the talker is talking; the talker goes on without it.
        await host.request('subagent.steer', { session_id: sid, subagent_id: talks, text: 'two' });
        host.drop();
        await next(watcher, said('round 1'), 'round 1 on the watcher');
        for (const [text, line] of [
          ['three', 'round 2'],
          ['four', 'round 3'],
        ] as const) {
          await watcher.request('subagent.steer', { session_id: sid, subagent_id: talks, text });
          await next(watcher, said(line), `${line} on the watcher`);
        }

        // Reconnect. hermes' client replays at once, before the host can re-bind: in single-user
        // mode the token is enough; by default the key is needed, so that replay is refused (4001)
        // and swallowed, as hermes' client swallows it.
        const before = seqsOf(host, sid).length;
        await host.connect(await served.dial());
        if (singleUser) expect(host.swallowed).toEqual([]);
        else expect(host.swallowed).toEqual([{ session_id: sid, code: 4001 }]);
        // The host re-binds, and fills what is left of its gap (lossless: nothing it missed while
        // it re-bound is lost, nothing is dispatched twice).
        let resumed: Record<string, unknown> = {};
        await host.replay(sid, async () => {
          resumed = await host.request('session.resume', singleUser ? { session_id: sid } : { session_id: sid, session_key: key });
        });
        expect(resumed).toMatchObject({ session_id: sid, stored_session_id: sid, open_requests: [], info: { stored_session_id: sid } });
        expect(resumed).not.toHaveProperty('session_key');
        expect(resumed.message_count).toBe((resumed.messages as unknown[]).length);
        expect(resumed.message_count).toBeGreaterThan(0);
        expect(host.events.all.slice(before).filter((e) => e.replayed).length).toBeGreaterThan(0);
        // And it is live again.
        await host.request('subagent.steer', { session_id: sid, subagent_id: talks, text: 'five' });
        await next(host, said('round 4'), 'round 4, live');
        expect(host.events.all.find(said('round 4'))?.replayed).toBeUndefined();
      } else {
        // One stdio connection for the server's life: activate re-binds it (already bound: the same
        // session), and a replay from any watermark is exactly what came after it.
        const activated = await host.request('session.activate', singleUser ? { session_id: sid } : { session_id: sid, session_key: key });
        expect(activated).toMatchObject({ session_id: sid, stored_session_id: sid, open_requests: [] });
        const sofar = host.events.all.filter((e) => e.session_id === sid);
        const mark = sofar[Math.floor(sofar.length / 2)]?.seq as number;
        const since = await host.request('session.events.since', { session_id: sid, last_seen: mark });
        const live = host.events.all.filter((e) => e.session_id === sid && (e.seq as number) > mark && (e.seq as number) <= (since.latest_seq as number));
        expect(since.events).toEqual(live);
        expect(since).toMatchObject({ truncated: false, count: (since.events as unknown[]).length, epoch: host.replayEpoch });
      }

      // Every event of the session reached the host exactly once, in order, none missing.
      const ring = await host.request('session.events.since', { session_id: sid, last_seen: 0 });
      const latest = ring.latest_seq as number;
      expect(ring.truncated).toBe(false);
      expect(seqsOf(host, sid)).toEqual(Array.from({ length: latest }, (_, i) => i + 1));

      // Spawn trees: saved atomically under the state directory, listed newest first, loaded back.
      const rows = host.events.all.filter(of('subagent.complete')).map((e) => e.payload as Record<string, unknown>);
      const first = await host.request('spawn_tree.save', {
        session_id: sid,
        subagents: rows.slice(0, 1),
        started_at: 1000,
        finished_at: 2000,
        label: 'first',
      });
      const second = await host.request('spawn_tree.save', { session_id: sid, subagents: rows, finished_at: 3000, label: 'second' });
      const loose = await host.request('spawn_tree.save', { subagents: rows.slice(0, 2), finished_at: 2500 });
      expect(first.session_id).toBe(sid);
      expect(loose.session_id).toBe('');
      const listed = await host.request('spawn_tree.list', { session_id: sid });
      expect((listed.entries as { path: string }[]).map((e) => e.path)).toEqual([second.path, first.path]);
      expect(listed.entries).toEqual([
        { path: second.path, session_id: sid, started_at: null, finished_at: 3000, label: 'second', count: rows.length },
        { path: first.path, session_id: sid, started_at: 1000, finished_at: 2000, label: 'first', count: 1 },
      ]);
      const all = await host.request('spawn_tree.list', { cross_session: true, limit: 2 });
      expect((all.entries as { path: string }[]).map((e) => e.path)).toEqual([second.path, loose.path]);
      const loaded = await host.request('spawn_tree.load', { path: first.path as string });
      expect(loaded).toEqual({ session_id: sid, started_at: 1000, finished_at: 2000, label: 'first', subagents: rows.slice(0, 1) });
      const root = join(served.state, 'spawn-trees');
      expect(String(first.path).startsWith(`${root}/`)).toBe(true);
      expect(JSON.parse(readFileSync(first.path as string, 'utf8'))).toEqual(loaded);
      // Written by rename: no temp file is left beside the trees.
      expect(readdirSync(join(root, sid)).filter((n) => !n.endsWith('.json'))).toEqual([]);

      // No client path leaves the root: not by `..`, not absolute, not by a symlink inside it.
      const outside = join(served.state, 'outside.json');
      writeFileSync(outside, JSON.stringify({ subagents: [{ secret: true }] }));
      const link = join(root, sid, '000000000000001-aaaaaaaaaaaa.json');
      symlinkSync(outside, link);
      for (const path of ['../outside.json', outside, `${root}/../outside.json`, `${sid}/../../outside.json`, link, '/etc/passwd', 'x\0.json']) {
        await expect(host.request('spawn_tree.load', { path }), path).rejects.toMatchObject({ code: 4030 });
      }
      await expect(host.request('spawn_tree.load', {})).rejects.toMatchObject({ code: 4000 });
      // Nor by a session id (it becomes one directory name inside the root) — and by default a host
      // may file trees only under its own session.
      const sneaky = host.request('spawn_tree.save', { session_id: '../../../escape', subagents: rows.slice(0, 1) });
      if (singleUser) expect(dirname(String((await sneaky).path))).toBe(join(root, '_________escape'));
      else await expect(sneaky).rejects.toMatchObject({ code: 4001 });
      await expect(host.request('spawn_tree.save', { subagents: [] })).rejects.toMatchObject({ code: 4000 });

      // Interrupt and close as hermes reads them.
      expect(await host.request('session.interrupt', { session_id: sid })).toMatchObject({ status: 'interrupted', interrupted: true, stopped: [talks] });
      expect(await host.request('session.interrupt', { session_id: sid })).toMatchObject({ status: 'not_interrupted', interrupted: false, stopped: [] });
      expect(await host.request('session.close', { session_id: sid })).toMatchObject({ closed: true });

      expect(problems).toEqual([]);
      expect(host.violations).toEqual([]);
    },
  );
});

describe('hermes hosts: the ring, the paths and the state', () => {
  it('a gap older than the ring is truncated: the host gets the newest events the ring kept and is told to refetch', { timeout: 60_000 }, async () => {
    const problems: string[] = [];
    const served = await serve('ws', true, ['--replay-events', '5']);
    const host = hermesHost(problems);
    await host.connect(await served.dial());
    const { session_id: sid } = await host.request<{ session_id: string }>('session.create', {});
    const { subagent_ids } = await host.request<{ subagent_ids: string[] }>('delegation.spawn', {
      session_id: sid,
      tasks: [{ goal: 'talks', agent: talker(12) }],
    });
    await next(host, of('subagent.start'), 'the start');
    host.drop();
    const watcher = hermesHost(problems);
    await watcher.connect(await served.dial());
    await watcher.request('session.resume', { session_id: sid });
    for (let i = 0; i < 8; i++) {
      await watcher.request('subagent.steer', { session_id: sid, subagent_id: subagent_ids[0], text: `go ${i}` });
      await next(watcher, said(`round ${i}`), `round ${i}`);
    }
    const seen = host.lastSeenSeq.get(sid) as number;
    await host.connect(await served.dial());
    const r = host.replays.get(sid) as { truncated: boolean; latest_seq: number; count: number; events: { seq: number }[] };
    expect(r.truncated).toBe(true);
    expect(r.count).toBe(5);
    expect(r.events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4].map((i) => r.latest_seq - 4 + i));
    expect(r.latest_seq - seen).toBeGreaterThan(5);
    expect(problems).toEqual([]);
  });

  it(
    'serves /api/ws and / with the same token and origin rules (--allow-origin null for a file:// renderer); any other path is 404',
    { timeout: 60_000 },
    async () => {
      const s = await startWsServer([], { token: TOKEN });
      const host = new HermesHost();
      await host.connect(await wsWire(hermesWsUrl(s.port, TOKEN, { profile: 'p', v: '2' })));
      expect(await host.request('ping')).toEqual({ pong: true });
      await expect(wsWire(hermesWsUrl(s.port, 'wrong'))).rejects.toThrow('HTTP 401');
      await expect(wsWire(`ws://127.0.0.1:${s.port}/api/ws`)).rejects.toThrow('HTTP 401');
      await expect(wsWire(`ws://127.0.0.1:${s.port}/api/other?token=${encodeURIComponent(TOKEN)}`)).rejects.toThrow('HTTP 404');
      const plain = new HermesHost();
      await plain.connect(await wsWire(`ws://127.0.0.1:${s.port}/?token=${encodeURIComponent(TOKEN)}`));
      expect(await plain.request('ping')).toEqual({ pong: true });
      // A file:// renderer (Origin: null) and a dashboard on another port: refused unless allowed.
      await expect(wsWire(hermesWsUrl(s.port, TOKEN), 'null')).rejects.toThrow('HTTP 403');
      await expect(wsWire(hermesWsUrl(s.port, TOKEN), 'http://localhost:5173')).rejects.toThrow('HTTP 403');
      const open = await startWsServer(['--allow-origin', 'null,http://localhost:5173'], { token: TOKEN });
      for (const origin of ['null', 'http://localhost:5173']) {
        const desktop = new HermesHost();
        await desktop.connect(await wsWire(hermesWsUrl(open.port, TOKEN), origin));
        expect(await desktop.request('ping')).toEqual({ pong: true });
      }
    },
  );

  it('--no-state keeps no spawn trees and says so; --no-state with --state-dir is refused', { timeout: 60_000 }, async () => {
    const proc = spawnSubrun(['serve', '--stdio', '--no-state']);
    const host = new HermesHost();
    await host.connect(stdioWire(proc.child.stdin, proc.child.stdout));
    for (const [method, params] of [
      ['spawn_tree.save', { subagents: [{ goal: 'g' }] }],
      ['spawn_tree.list', {}],
      ['spawn_tree.load', { path: 'x.json' }],
    ] as const) {
      const err = await host.request(method, params).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(GatewayError);
      expect(err).toMatchObject({ code: 4031, message: expect.stringContaining('--no-state') });
    }
    const refused = spawnSubrun(['serve', '--stdio', '--no-state', '--state-dir', stateDir()]);
    expect((await refused.waitExit()).code).toBe(2);
  });

  it('the shape checker fails on the shapes subrun used to send (it can fail)', () => {
    const ev = (type: string, payload: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
      jsonrpc: '2.0',
      method: 'event',
      params: { type, session_id: 's', seq: 1, payload, ...extra },
    });
    const identity = { subagent_id: 'a', parent_id: null, depth: 0, delegation_id: 'd', task_index: 0, task_count: 1, goal: 'g' };
    expect(hermesProblems(ev('gateway.ready', { protocol_version: 1 }, { session_id: null }), undefined).length).toBeGreaterThan(0);
    expect(hermesProblems(ev('subagent.complete', { ...identity, entry: { status: 'failed', summary: 's' } }), undefined).length).toBeGreaterThan(0);
    expect(hermesProblems(ev('subagent.tool', { ...identity, tool_name: 't', preview: 'p', tool_count: 1 }), undefined).length).toBeGreaterThan(0);
    expect(hermesProblems(ev('tool.start', { turn_id: 't', tool_name: 'x', preview: '' }), undefined).length).toBeGreaterThan(0);
    expect(hermesProblems(ev('message.complete', { status: 'completed', text: '' }), undefined).length).toBeGreaterThan(0);
    expect(
      hermesProblems({ jsonrpc: '2.0', id: 'r1', result: { session_id: 's', turn_interrupted: true, interrupted: ['a'] } }, 'session.interrupt').length,
    ).toBeGreaterThan(0);
    expect(hermesProblems({ jsonrpc: '2.0', id: 'r1', result: { status: 'started', turn_id: 't' } }, 'prompt.submit').length).toBeGreaterThan(0);
    expect(hermesProblems({ jsonrpc: '2.0', id: 'r1', result: { session_id: 's', session_key: 'k', generation: 1 } }, 'session.create').length).toBeGreaterThan(
      0,
    );
    expect(hermesProblems({ jsonrpc: '2.0', id: 'r1', error: { code: -32601, message: 'Method not found' } }, 'session.resume')).toEqual([
      'session.resume: method not found',
    ]);
    // Extras of ours are fine.
    expect(hermesProblems(ev('subagent.start', { ...identity, model: 'm', tool_count: 0, ours: true }), undefined)).toEqual([]);
  });
});
