// What a hermes host calls at start, against real `subrun serve` processes over WebSocket
// (/api/ws) and stdio: `gateway.capabilities` (what the build enforces, and the methods it has),
// `session.list` (the caller's own sessions, never another's) and `session.events.stats` (the
// caller's replay rings: their counts and bounds). Each answer in hermes' shapes, and true.
import { afterEach, describe, expect, it } from 'vitest';
import { HermesHost, hermesWsUrl, stdioWire, wsWire, type HermesWire } from '../helpers/hermes-host.ts';
import { killAll, scriptedTask, spawnSubrun, startWsServer, WAIT_MS } from '../helpers/process.ts';
import { CATALOG } from '../../src/protocol.ts';
import { hermesProblems } from './hermes-shapes.ts';

const TOKEN = 'hermes-boot-token';
afterEach(killAll);

interface Boot {
  readonly dial: () => Promise<HermesWire>;
}

async function serve(transport: 'ws' | 'stdio', singleUser: boolean): Promise<Boot> {
  const extra = ['--no-state', '--replay-events', '50', ...(singleUser ? ['--single-user'] : [])];
  if (transport === 'ws') {
    const s = await startWsServer(extra, { token: TOKEN });
    return { dial: () => wsWire(hermesWsUrl(s.port, TOKEN)) };
  }
  const proc = spawnSubrun(['serve', '--stdio', ...extra]);
  const wire = stdioWire(proc.child.stdin, proc.child.stdout);
  return { dial: async () => wire };
}

async function host(wire: HermesWire, problems: string[]): Promise<HermesHost> {
  const h = new HermesHost();
  h.onFrame = (frame, answers) => problems.push(...hermesProblems(frame, answers));
  await h.connect(wire);
  return h;
}

describe.each([
  ['ws', false],
  ['ws', true],
  ['stdio', false],
] as const)('hermes boot calls over %s (single-user: %s)', (transport, singleUser) => {
  it("answers gateway.capabilities, session.list and session.events.stats truthfully, in hermes' shapes", { timeout: 60_000 }, async () => {
    const problems: string[] = [];
    const served = await serve(transport, singleUser);
    const me = await host(await served.dial(), problems);

    expect(await me.request('gateway.capabilities')).toEqual({
      per_session_exclusive_submit: true,
      worker_snapshot_v1: false,
      methods: [...CATALOG.methods],
    });
    expect(CATALOG.methods).toEqual(expect.arrayContaining(['gateway.capabilities', 'session.list', 'session.events.stats']));
    expect(await me.request('session.list')).toEqual({ sessions: [] });
    expect(await me.request('session.events.stats')).toEqual({
      sessions: 0,
      events: 0,
      bytes: 0,
      max_per_session: 50,
      max_bytes_per_session: 1024 * 1024,
      max_bytes_process: 0,
    });

    const older = await me.request('session.create', { title: 'older' });
    const newer = await me.request('session.create', { title: 'newer' });
    const spawned = await me.request<{ subagent_ids: string[] }>('delegation.spawn', {
      session_id: newer.session_id,
      tasks: [scriptedTask('short', [{ op: 'say', text: 'hi' }])],
    });
    await me.events.take((e) => e.type === 'subagent.complete' && e.payload?.subagent_id === spawned.subagent_ids[0], WAIT_MS, 'the completion');
    await me.events.take((e) => e.type === 'delegation.complete', WAIT_MS, 'the delegation');

    const listed = await me.request<{ sessions: Array<Record<string, unknown>> }>('session.list');
    // Newest first; hermes' fields; nothing of subrun's authority (no key).
    expect(listed.sessions.map((s) => [s.id, s.title])).toEqual([
      [newer.session_id, 'newer'],
      [older.session_id, 'older'],
    ]);
    expect(listed.sessions[0]).toEqual({ id: newer.session_id, title: 'newer', preview: '', started_at: expect.any(Number), message_count: 0, source: '' });
    expect(await me.request('session.list', { limit: 1 })).toMatchObject({ sessions: [{ id: newer.session_id }] });

    const seq = Math.max(...me.events.all.filter((e) => e.session_id === newer.session_id).map((e) => Number(e.seq)));
    const stats = await me.request<Record<string, number>>('session.events.stats');
    expect(stats).toMatchObject({ sessions: 2, events: seq, max_per_session: 50, max_bytes_process: 2 * 1024 * 1024 });
    expect(stats.bytes).toBeGreaterThan(0);

    if (transport === 'ws') {
      // Another connection with the same token: its own sessions only, unless the token owns all.
      const other = await host(await served.dial(), problems);
      const theirs = await other.request<{ sessions: Array<{ id: string }> }>('session.list');
      expect(theirs.sessions.map((s) => s.id)).toEqual(singleUser ? [newer.session_id, older.session_id] : []);
      expect((await other.request<{ sessions: number }>('session.events.stats')).sessions).toBe(singleUser ? 2 : 0);
    }
    expect(problems).toEqual([]);
  });
});
