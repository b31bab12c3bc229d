// A request body: JSON only (415 otherwise), at most the server's message limit (413), an object
// (400 otherwise). No body at all is `{}`.
import type { IncomingMessage } from 'node:http';
import { isRecord } from '../guards.ts';
import { RpcCode } from '../server/errors.ts';
import { httpError, type Answer } from './respond.ts';

export type Body = { readonly ok: true; readonly value: Record<string, unknown> } | { readonly ok: false; readonly answer: Answer };

const isJsonType = (type: string) => /^application\/json\s*(;|$)/i.test(type.trim());

export function readBody(req: IncomingMessage, max_bytes: number): Promise<Body> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  const type = req.headers['content-type'];
  const tooLarge = (): Body => ({
    ok: false,
    answer: { ...httpError(RpcCode.InvalidRequest, 'request body too large', { Connection: 'close' }, { max_message_bytes: max_bytes }), status: 413 },
  });
  if (Number.isFinite(declared) && declared > max_bytes) {
    req.resume();
    return Promise.resolve(tooLarge());
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size > max_bytes) {
        over = true;
        resolve(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    req.on('error', () => resolve({ ok: false, answer: httpError(RpcCode.InvalidRequest, 'request body not read') }));
    req.on('end', () => {
      if (over) return;
      if (size === 0) return resolve({ ok: true, value: {} });
      if (typeof type !== 'string' || !isJsonType(type)) {
        return resolve({ ok: false, answer: { ...httpError(RpcCode.InvalidRequest, 'Content-Type must be application/json'), status: 415 } });
      }
      let value: unknown;
      try {
        value = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return resolve({ ok: false, answer: httpError(RpcCode.ParseError, 'Parse error: the body is not JSON') });
      }
      if (!isRecord(value)) {
        return resolve({
          ok: false,
          answer: httpError(RpcCode.InvalidParams, 'invalid params: the body must be a JSON object', undefined, {
            issues: [{ path: '', message: 'expected an object' }],
          }),
        });
      }
      resolve({ ok: true, value });
    });
  });
}
