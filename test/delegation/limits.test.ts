// Bounded memory and the limits around it: a child's undelivered steers are capped in count and
// bytes (overflow refused with a clear answer, nothing changed), and the server says so when it
// is bound to something other than loopback.
import { afterEach, describe, expect, it } from 'vitest';
import { counterIds, createRuntime, scripted } from '../../src/index.ts';
import { RpcServer } from '../../src/rpc/server.ts';
import { flush } from '../helpers/manual-clock.ts';
import { killAll, spawnSubrun } from '../helpers/process.ts';
import { connectMemory, ok } from '../helpers/rpc-client.ts';

afterEach(async () => {
  await killAll();
});

describe('steer queue bounds', () => {
  it('refuses the steer past max_queued_steers, changes nothing, and takes more once delivered', async () => {
    const rt = createRuntime({ ids: counterIds(), max_queued_steers: 3 });
    const h = rt.delegate([{ goal: 'g', runner: scripted([{ op: 'wait_steer' }, { op: 'wait_steer' }]) }]);
    const id = h.subagent_ids[0] as string;
    // Hold the child before its first delivery point: queue while it is still queued for a slot.
    const answers = ['a', 'b', 'c', 'd'].map((t) => rt.steer(id, t));
    expect(answers.map((a) => a.status)).toEqual(['queued', 'queued', 'queued', 'rejected']);
    expect(answers[3]).toMatchObject({ status: 'rejected', reason: 'queue_full' });
    await flush();
    // The first wait_steer delivered a, b and c at once, which frees the queue: e is taken.
    expect(rt.tail(id).text).toContain('[steer] c');
    expect(rt.steer(id, 'e').status).toBe('queued');
    const [entry] = await h.results;
    expect(entry?.missed_steer).toBeUndefined();
    expect(rt.tail(id).text).toContain('[steer] e');
    // d was refused and appears nowhere.
    expect(rt.tail(id).text).not.toContain('[steer] d');
  });

  it('counts bytes too: a steer that would pass max_queued_steer_bytes is refused', () => {
    const rt = createRuntime({ max_queued_steer_bytes: 40_000 });
    const h = rt.delegate([{ goal: 'g', runner: scripted([{ op: 'hang' }]) }]);
    const id = h.subagent_ids[0] as string;
    expect(rt.steer(id, 'x'.repeat(30_000)).status).toBe('queued');
    expect(rt.steer(id, 'y'.repeat(10_001))).toMatchObject({ status: 'rejected', reason: 'queue_full' });
    expect(rt.steer(id, 'z'.repeat(10_000)).status).toBe('queued');
    rt.interrupt(id);
  });

  it('answers 4005 on the wire and the child is untouched', async () => {
    const server = new RpcServer({ runtime: { max_queued_steers: 1 } });
    const c = connectMemory(server);
    const s = await ok(c.client, 'session.create', {});
    const spawn = await ok(c.client, 'delegation.spawn', {
      session_id: s.session_id,
      tasks: [{ goal: 'g', agent: { kind: 'scripted', steps: [{ op: 'hang' }] } }],
    });
    const id = spawn.subagent_ids[0];
    expect(await ok(c.client, 'subagent.steer', { session_id: s.session_id, subagent_id: id, text: 'one' })).toMatchObject({ status: 'queued' });
    const err = await c.client.error('subagent.steer', { session_id: s.session_id, subagent_id: id, text: 'two' });
    expect(err).toMatchObject({ code: 4005, message: 'steer queue full' });
    await flush();
    const list = await ok(c.client, 'subagent.list', { session_id: s.session_id });
    expect(list.subagents[0]).toMatchObject({ subagent_id: id, status: 'running', accepting_steer: true });
    await server.shutdown();
  });
});

describe('bind address', () => {
  it('warns on stderr when listening on a non-loopback address', async () => {
    const p = spawnSubrun(['serve', '--ws', '--host', '0.0.0.0', '--port', '0', '--token', 't']);
    const line = await p.stderr.take((l) => l.includes('not loopback'));
    expect(line).toContain('listening on 0.0.0.0, not loopback');
  });

  it('says nothing of the kind on loopback', async () => {
    const p = spawnSubrun(['serve', '--ws', '--port', '0', '--token', 't']);
    await p.stderr.take((l) => l.startsWith('subrun listening on ws://127.0.0.1:'));
    await p.kill();
    expect(p.stderr.all.some((l) => l.includes('not loopback'))).toBe(false);
  });
});
