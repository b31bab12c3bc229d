// The token check on a keep-alive connection: a connection that proved the token once is let in
// again with the very same header without another digest, and never with anything else. Raw
// requests on one real TCP connection, so every request is known to share the socket.
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAll } from '../helpers/process.ts';
import { startHttp, type HttpServer } from './client.ts';

let server: HttpServer;
beforeAll(async () => {
  server = await startHttp();
});
afterAll(killAll);

/** One connection; `get` writes a request and resolves with the status line's code of its answer. */
async function connection(): Promise<{ get(auth: string | undefined): Promise<number>; close(): void }> {
  const socket: Socket = connect({ host: '127.0.0.1', port: server.port });
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  socket.setEncoding('utf8');
  let buf = '';
  const waiting: Array<(status: number) => void> = [];
  socket.on('data', (chunk: string) => {
    buf += chunk;
    // Each answer here is a small JSON body with a Content-Length: cut them one by one.
    for (;;) {
      const head = buf.indexOf('\r\n\r\n');
      if (head < 0) return;
      const length = Number(/content-length: *(\d+)/i.exec(buf.slice(0, head))?.[1] ?? 0);
      if (buf.length < head + 4 + length) return;
      const status = Number(buf.slice(9, 12));
      buf = buf.slice(head + 4 + length);
      waiting.shift()?.(status);
    }
  });
  return {
    get: (auth) =>
      new Promise((resolve) => {
        waiting.push(resolve);
        socket.write(`GET /v1/capabilities HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth === undefined ? '' : `Authorization: ${auth}\r\n`}\r\n`);
      }),
    close: () => socket.destroy(),
  };
}

describe('the token on a keep-alive connection', () => {
  it('lets the proven header in again, and nothing else', async () => {
    const c = await connection();
    expect(await c.get(`Bearer ${server.token}`)).toBe(200);
    expect(await c.get(`Bearer ${server.token}`)).toBe(200);
    expect(await c.get('Bearer wrong-token')).toBe(401);
    expect(await c.get(`Bearer ${server.token}x`)).toBe(401);
    expect(await c.get(undefined)).toBe(401);
    expect(await c.get(`Bearer ${server.token}`)).toBe(200);
    c.close();
  });

  it('a connection that never proved the token is refused whatever another one proved', async () => {
    const proven = await connection();
    expect(await proven.get(`Bearer ${server.token}`)).toBe(200);
    const other = await connection();
    expect(await other.get('Bearer wrong-token')).toBe(401);
    expect(await other.get(`Bearer ${server.token}`)).toBe(200);
    proven.close();
    other.close();
  });
});
