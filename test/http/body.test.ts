// readBody (src/http/body.ts) over a real socket: a body sent in several writes is read whole, an
// empty one is {}, and each refusal (413 declared or streamed past the bound, 415, 400) is answered
// exactly once.
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBody, type Body } from '../../src/http/body.ts';

const MAX = 64 * 1024;
let server: Server;
let port: number;
let calls = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    readBody(req, MAX, (body: Body) => {
      calls++;
      const out = body.ok ? { ok: true, value: body.value } : { ok: false, status: body.answer.status };
      res.writeHead(200, { 'Content-Type': 'application/json', Connection: 'close' }).end(JSON.stringify(out));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

/** Sends `parts` as separate writes (chunked unless `length` is declared) and reads the answer. */
function post(parts: string[], headers: Record<string, string> = { 'Content-Type': 'application/json' }): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/', headers }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve(JSON.parse(text)));
    });
    req.on('error', reject);
    const write = (i: number): void => {
      if (i === parts.length) return void req.end();
      req.write(parts[i]);
      setImmediate(() => write(i + 1));
    };
    write(0);
  });
}

describe('readBody', () => {
  it('reads a body sent in several writes as one', async () => {
    const text = 'x'.repeat(30_000);
    const json = JSON.stringify({ text, n: 1 });
    const parts = [json.slice(0, 7), json.slice(7, 20_000), json.slice(20_000)];
    expect(await post(parts)).toEqual({ ok: true, value: { text, n: 1 } });
  });

  it('takes no body as {}', async () => {
    expect(await post([])).toEqual({ ok: true, value: {} });
  });

  it('refuses each bad body once, with its status', async () => {
    const before = calls;
    expect(await post(['{"a":', '1}'], { 'Content-Type': 'text/plain' })).toEqual({ ok: false, status: 415 });
    expect(await post(['{"a":', ' nope'])).toEqual({ ok: false, status: 400 });
    expect(await post(['[1, 2]'])).toEqual({ ok: false, status: 400 });
    expect(await post(['{}'], { 'Content-Type': 'application/json', 'Content-Length': String(MAX + 1) })).toEqual({ ok: false, status: 413 });
    expect(await post(['"', 'y'.repeat(MAX), '"'])).toEqual({ ok: false, status: 413 });
    expect(calls - before).toBe(5);
  });
});
