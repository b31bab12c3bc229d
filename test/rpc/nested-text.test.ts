// A steer or prompt whose `text` is not a string is a shape error (-32602) on every surface, not
// "text is required" (4002) and never an internal error (-32603), however deep it is nested; a
// missing one stays 4002; params nested past MAX_PARAMS_DEPTH anywhere are -32602 too. Real processes: `serve --stdio` over its pipes, `serve --ws` over a
// WebSocket and over HTTP on 127.0.0.1 (the ACP extension: test/acp/edges.test.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, connectWs, killAll, request, startStdio, type Peer } from '../helpers/process.ts';
import { createSession, req, startHttp, type HttpServer } from '../http/client.ts';

afterAll(killAll);

const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
/** Raw JSON texts of `text` values that are not strings, and the code each must get. */
const TEXTS: ReadonlyArray<[string, string, number]> = [
  ['an array nested 20,000 deep', nested(20_000), -32602],
  ['an object over an array nested 20,000 deep', `{"a":${nested(20_000)}}`, -32602],
  ['a number', '7', -32602],
  ['true', 'true', -32602],
  ['null', 'null', 4002],
];

let raw = 0;
/** Sends a request whose params are raw JSON text, so the nesting reaches the server unparsed. */
async function rawCall(peer: Peer, method: string, params: string): Promise<{ code?: number; message?: string }> {
  const id = `raw-${++raw}`;
  peer.send(`{"jsonrpc":"2.0","id":"${id}","method":"${method}","params":${params}}`);
  const reply = await peer.inbox.take((m) => !Array.isArray(m) && m.id === id, undefined, `the reply to ${method}`);
  return (Array.isArray(reply) ? {} : reply.error) ?? {};
}

describe.each([
  ['serve --stdio', 'stdio'],
  ['serve --ws', 'ws'],
] as const)('%s: a text that is not a string', (_name, kind) => {
  let peer: Peer;
  let session_id: string;
  let child: string;
  beforeAll(async () => {
    if (kind === 'stdio') peer = (await startStdio()).peer;
    else peer = (await connectWs(await startHttp())).peer;
    ({ session_id } = await call<{ session_id: string }>(peer, 'session.create'));
    const spawned = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', {
      session_id,
      tasks: [{ goal: 'waits', agent: { kind: 'scripted', steps: [{ op: 'wait_steer' }] } }],
    });
    child = spawned.subagent_ids[0] as string;
  });

  it.each(TEXTS)('subagent.steer with %s', async (_what, text, code) => {
    const error = await rawCall(peer, 'subagent.steer', `{"session_id":"${session_id}","subagent_id":"${child}","text":${text}}`);
    expect(error.code, error.message).toBe(code);
    // Keyed too: a shape error is answered at once, never kept.
    const keyed = await rawCall(peer, 'subagent.steer', `{"session_id":"${session_id}","subagent_id":"${child}","text":${text},"idempotency_key":"k-${raw}"}`);
    expect(keyed.code, keyed.message).toBe(code);
  });

  it.each(TEXTS)('session.steer and prompt.submit with %s', async (_what, text, code) => {
    for (const method of ['session.steer', 'prompt.submit']) {
      const error = await rawCall(peer, method, `{"session_id":"${session_id}","text":${text}}`);
      expect(error.code, `${method}: ${error.message}`).toBe(code);
    }
  });

  it('answers params nested 20,000 deep anywhere (keyed or not, any field) with -32602, never -32603', async () => {
    const deep = nested(20_000);
    const calls: Array<[string, string]> = [
      ['delegation.spawn', `{"session_id":"${session_id}","idempotency_key":"deep-1","tasks":[{"goal":"x","extra":${deep}}]}`],
      ['delegation.spawn', `{"session_id":"${session_id}","tasks":[{"goal":"x","agent":{"kind":"scripted","steps":[{"op":"say","text":"x","z":${deep}}]}}]}`],
      ['subagent.steer', `{"session_id":"${session_id}","idempotency_key":"deep-2","subagent_id":"${child}","text":"t","z":${deep}}`],
    ];
    for (const [method, params] of calls) {
      const error = await rawCall(peer, method, params);
      expect(error.code, `${method}: ${error.message}`).toBe(-32602);
      expect(error.message).toMatch(/nested more than \d+ levels deep/);
    }
  });

  it('serves on: the child still takes a steer', async () => {
    expect((await request(peer, 'subagent.steer', { session_id, subagent_id: child, text: 'go' })).result).toMatchObject({ status: 'queued' });
  });
});

describe('HTTP: a steer whose text is not a string', () => {
  let server: HttpServer;
  beforeAll(async () => {
    server = await startHttp();
  });

  it.each(TEXTS)('POST …/steer with %s', async (_what, text, code) => {
    const s = await createSession(server);
    const spawn = await req(server, 'POST', `/v1/sessions/${s.session_id}/delegations`, {
      key: s.session_key,
      body: { tasks: [{ goal: 'waits', agent: { kind: 'scripted', steps: [{ op: 'wait_steer' }] } }] },
    });
    const id = spawn.json.subagent_ids[0] as string;
    const r = await req(server, 'POST', `/v1/sessions/${s.session_id}/subagents/${id}/steer`, {
      key: s.session_key,
      raw: `{"text":${text}}`,
      headers: { 'Content-Type': 'application/json' },
    });
    expect(r.status).toBe(400);
    expect(r.json.error.code, r.text.slice(0, 200)).toBe(code);
  });
});
