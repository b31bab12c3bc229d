// The event stream's bytes on the wire, read over raw TCP: the response is the connection's last
// (`Connection: close`, no `Transfer-Encoding: chunked`), so its body is the SSE frames alone, not
// each wrapped in a chunk-size line and CRLFs; the body ends with the connection, and a stream the
// server ended says so in its last frame (`: end`), which a cut stream lacks.
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { killAll, WAIT_MS, withTimeout } from '../helpers/process.ts';
import { createSession, req, scripted, spawn, startHttp, type HttpServer } from './client.ts';

let server: HttpServer;
beforeAll(async () => {
  server = await startHttp();
});
afterAll(killAll);

/** Everything the socket receives, and a promise of the moment the server closes it. */
function rawGet(path: string): {
  socket: Socket;
  received: () => string;
  ended: Promise<void>;
  until: (pred: (s: string) => boolean, what: string) => Promise<void>;
} {
  const socket = connect(server.port, '127.0.0.1');
  let text = '';
  const waiters: Array<{ pred: (s: string) => boolean; done: () => void }> = [];
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => {
    text += d;
    for (let i = waiters.length - 1; i >= 0; i--) {
      const w = waiters[i];
      if (w?.pred(text)) {
        waiters.splice(i, 1);
        w.done();
      }
    }
  });
  const ended = new Promise<void>((resolve) => socket.once('end', () => resolve()));
  socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${server.token}\r\nConnection: keep-alive\r\n\r\n`);
  return {
    socket,
    received: () => text,
    ended,
    until: (pred, what) =>
      pred(text) ? Promise.resolve() : withTimeout(new Promise((done) => waiters.push({ pred, done })), WAIT_MS, `${what}; got ${text.length} bytes`),
  };
}

it('sends the frames alone, close-delimited, and ends the body with `: end` and the connection when the session closes', async () => {
  const s = await createSession(server);
  const raw = rawGet(`/v1/sessions/${s.session_id}/events?session_key=${encodeURIComponent(s.session_key)}`);
  try {
    await spawn(server, s, [
      scripted('talks', [
        { op: 'say', text: 'one' },
        { op: 'say', text: 'two' },
        { op: 'finish', summary: 'ok' },
      ]),
    ]);
    await raw.until((t) => t.includes('event: session.idle\n'), 'session.idle on the stream');
    const text = raw.received();
    const split = text.indexOf('\r\n\r\n');
    const head = text.slice(0, split).toLowerCase().split('\r\n');
    expect(head[0]).toBe('http/1.1 200 ok');
    expect(head).toContain('connection: close');
    expect(head.some((h) => h.startsWith('transfer-encoding:'))).toBe(false);
    expect(head.some((h) => h.startsWith('content-length:'))).toBe(false);
    // The body is SSE and nothing else: `retry`, then frames of `id`, `event` and `data` lines.
    const body = text.slice(split + 4);
    expect(body.startsWith('retry: 2000\n\n')).toBe(true);
    const frames = body
      .slice('retry: 2000\n\n'.length)
      .split('\n\n')
      .filter((f) => f !== '');
    expect(frames.length).toBeGreaterThan(3);
    for (const f of frames) expect(f).toMatch(/^id: \d+\nevent: [a-z._]+\ndata: \{.*\}$/s);
    expect(body.includes(': end')).toBe(false);
    // The session closes: the stream ends, and with it the connection (the body's end).
    const closed = await req(server, 'DELETE', `/v1/sessions/${s.session_id}`, { key: s.session_key });
    expect(closed.status).toBe(200);
    await raw.ended;
    // The server ended it: its last frame says so.
    expect(raw.received().endsWith('\n\n: end\n\n')).toBe(true);
  } finally {
    raw.socket.destroy();
  }
});
