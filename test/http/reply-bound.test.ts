// The HTTP API answers within the same per-message reply bound as JSON-RPC (--max-reply-bytes):
// an answer past it, or one that cannot be built at all (past V8's longest string, a BigInt), is
// an error answer (500, -32001 or -32603), never an exception out of the request handler, and the
// server answers on. A real server over 127.0.0.1, and `send` itself on a real socket.
import { createServer, type Server } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { send } from '../../src/http/respond.ts';
import { killAll } from '../helpers/process.ts';
import { createSession, nextFrame, openSse, req, scripted, spawn, startHttp } from './client.ts';

afterAll(killAll);

describe('serve --ws --max-reply-bytes 1024: HTTP answers', () => {
  it('a tail past the bound is 500 -32001 with the bound; smaller answers and the next requests are served', async () => {
    const server = await startHttp(['--max-reply-bytes', '1024']);
    const s = await createSession(server);
    const stream = await openSse(server, `/v1/sessions/${s.session_id}/events?session_key=${encodeURIComponent(s.session_key)}`);
    const { subagent_ids } = await spawn(server, s, [scripted('talks', [{ op: 'say', text: 'z'.repeat(4000) }, { op: 'wait_steer' }])]);
    const id = subagent_ids[0] as string;
    const path = `/v1/sessions/${s.session_id}/subagents/${id}/tail`;
    await nextFrame(stream, (f) => f.event === 'subagent.text', 'the text said');
    stream.close();
    const r = await req(server, 'GET', path, { key: s.session_key });
    expect(r.status).toBe(500);
    expect(r.json).toEqual({ error: { code: -32001, message: 'response too large', data: { max_reply_bytes: 1024 } } });
    expect((await req(server, 'GET', '/health')).status).toBe(200);
    expect((await req(server, 'GET', `/v1/sessions/${s.session_id}`, { key: s.session_key })).status).toBe(200);
  });
});

describe('send', () => {
  let http: Server | undefined;
  afterAll(() => http?.close());

  it('turns an answer it cannot build into an error answer, and never throws', async () => {
    const bodies: unknown[] = [
      // A body whose text would pass the longest string V8 can make.
      {
        toJSON() {
          throw new RangeError('Invalid string length');
        },
      },
      { n: 1n },
      { ok: 'x'.repeat(2000) },
      { ok: 'small' },
    ];
    let thrown = 0;
    http = createServer((request, res) => {
      const body = bodies[Number(request.url?.slice(1))];
      try {
        send(res, { status: 200, body }, false, 1024);
      } catch {
        thrown += 1;
        res.destroy();
      }
    });
    await new Promise<void>((resolve) => http?.listen(0, '127.0.0.1', resolve));
    const address = http.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    const got = [];
    for (let i = 0; i < bodies.length; i++) {
      const res = await fetch(`http://127.0.0.1:${port}/${i}`);
      got.push({ status: res.status, body: await res.json() });
    }
    expect(thrown).toBe(0);
    expect(got).toEqual([
      { status: 500, body: { error: { code: -32001, message: 'response too large', data: { max_reply_bytes: 1024 } } } },
      { status: 500, body: { error: { code: -32603, message: 'Internal error' } } },
      { status: 500, body: { error: { code: -32001, message: 'response too large', data: { max_reply_bytes: 1024 } } } },
      { status: 200, body: { ok: 'small' } },
    ]);
  });
});
