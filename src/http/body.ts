// A request body: JSON only (415 otherwise), at most the server's message limit (413), an object
// (400 otherwise). No body at all is `{}`.
import type { IncomingMessage } from 'node:http';
import { isRecord } from '../guards.ts';
import { RpcCode } from '../server/errors.ts';
import { httpError, type Answer } from './respond.ts';
import { withProps } from '../shapes.ts';

export type Body = { readonly ok: true; readonly value: Record<string, unknown> } | { readonly ok: false; readonly answer: Answer };

const JSON_TYPE = /^application\/json\s*(;|$)/i;
/** JSON by its media type, parameters allowed; the exact type every client sends is seen first. */
const isJsonType = (type: string) => type === 'application/json' || JSON_TYPE.test(type.trim());

const tooLarge = (max_bytes: number): Body => ({
  ok: false,
  answer: withProps(httpError(RpcCode.InvalidRequest, 'request body too large', { Connection: 'close' }, { max_message_bytes: max_bytes }), { status: 413 }),
});

/** The body's text parsed and checked. */
function parsed(text: string, type: string | undefined): Body {
  if (typeof type !== 'string' || !isJsonType(type)) {
    return { ok: false, answer: withProps(httpError(RpcCode.InvalidRequest, 'Content-Type must be application/json'), { status: 415 }) };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, answer: httpError(RpcCode.ParseError, 'Parse error: the body is not JSON') };
  }
  if (!isRecord(value)) {
    return {
      ok: false,
      answer: httpError(RpcCode.InvalidParams, 'invalid params: the body must be a JSON object', undefined, {
        issues: [{ path: '', message: 'expected an object' }],
      }),
    };
  }
  return { ok: true, value };
}

/**
 * Reads the body and calls `done` once with it, from the request's own events: no promise, so the
 * handler runs in the step the body ends in (bench: http.steer.p50@1conn). `done` must not throw.
 */
export function readBody(req: IncomingMessage, max_bytes: number, done: (body: Body) => void): void {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (Number.isFinite(declared) && declared > max_bytes) {
    req.resume();
    return done(tooLarge(max_bytes));
  }
  let first: Buffer | undefined;
  let more: Buffer[] | undefined;
  let size = 0;
  // Set once `done` was called: nothing after it (the rest of a body past the bound, an error)
  // calls it again.
  let settled = false;
  req.on('data', (chunk: Buffer) => {
    if (settled) return;
    size += chunk.length;
    if (size > max_bytes) {
      settled = true;
      return done(tooLarge(max_bytes));
    }
    // A small body comes in one chunk: no list, no concat.
    if (first === undefined) first = chunk;
    else (more ??= [first]).push(chunk);
  });
  req.on('error', () => {
    if (settled) return;
    settled = true;
    done({ ok: false, answer: httpError(RpcCode.InvalidRequest, 'request body not read') });
  });
  req.on('end', () => {
    if (settled) return;
    settled = true;
    if (first === undefined || size === 0) return done({ ok: true, value: {} });
    done(parsed((more ? Buffer.concat(more) : first).toString('utf8'), req.headers['content-type']));
  });
}
