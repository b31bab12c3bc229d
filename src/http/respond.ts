// Answers of the HTTP API: JSON bodies, and the one error shape `{error: {code, message, data?}}`
// with the JSON-RPC code, mapped to an HTTP status here and nowhere else.
import type { ServerResponse } from 'node:http';
import { RpcCode, RpcError } from '../server/errors.ts';
import { DEFAULT_MAX_REPLY_BYTES } from '../server/options.ts';
import { JsonText } from '../server/json-text.ts';
import { fitsAlone, isStringLimit, tooLargeError } from '../server/reply-bound.ts';

/** HTTP-only refusals, with the JSON-RPC code that fits each. */
export const HttpCode = {
  /** No or wrong credentials. */
  Unauthorized: 4007,
  /** A cookie request without an allowed Origin, or a listing this mode does not offer. */
  Forbidden: 4008,
} as const;

const STATUS: ReadonlyMap<number, number> = new Map([
  [RpcCode.ParseError, 400],
  [RpcCode.InvalidRequest, 400],
  [RpcCode.InvalidParams, 400],
  [RpcCode.IdRequired, 400],
  [RpcCode.TextRequired, 400],
  [RpcCode.TextTooLong, 400],
  [RpcCode.NotOwned, 404],
  [RpcCode.DelegationNotFound, 404],
  [RpcCode.SteerQueueFull, 429],
  [RpcCode.NotAcceptingSteer, 409],
  [RpcCode.SpawnPaused, 409],
  [RpcCode.TooManyTasks, 422],
  [RpcCode.TurnRunning, 409],
  [RpcCode.NoModel, 422],
  [RpcCode.IdempotencyConflict, 409],
  [RpcCode.ShuttingDown, 503],
  [RpcCode.StoreUnavailable, 503],
  [RpcCode.NotRevivable, 409],
  [RpcCode.AlreadyRevived, 409],
  [RpcCode.ResponseTooLarge, 500],
  [RpcCode.InternalError, 500],
  [HttpCode.Unauthorized, 401],
  [HttpCode.Forbidden, 403],
]);

export function statusOf(code: number): number {
  return STATUS.get(code) ?? 500;
}

/**
 * The one answer for everything that is not the caller's, whatever the reason (unknown, closed or
 * expired session, wrong key, foreign, unknown or retired child, unknown path): byte for byte.
 */
export const NOT_FOUND_BODY = '{"error":{"code":4001,"message":"not found"}}';

export interface Answer {
  readonly status: number;
  /** A value to serialise, or JSON text already built. */
  readonly body: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

export const answer = (status: number, body: unknown, headers?: Record<string, string>): Answer => ({ status, body, headers });

/** The answer for a wire error: its status, and its code, message and data as they are. */
export function errorAnswer(err: RpcError, headers?: Record<string, string>): Answer {
  if (err.code === RpcCode.NotOwned) return { status: 404, body: new JsonText(NOT_FOUND_BODY), headers };
  // Both say "not now": the store is retried every second, a shutdown ends within its grace.
  const retry = err.code === RpcCode.ShuttingDown ? '5' : err.code === RpcCode.StoreUnavailable ? '1' : undefined;
  const extra = retry === undefined ? headers : { 'Retry-After': retry, ...headers };
  return { status: statusOf(err.code), body: { error: err.toJSON() }, headers: extra };
}

export const notFound = (): Answer => ({ status: 404, body: new JsonText(NOT_FOUND_BODY) });

export const httpError = (code: number, message: string, headers?: Record<string, string>, data?: unknown): Answer =>
  errorAnswer(new RpcError(code, message, data), headers);

/**
 * The answer's text within `max_reply_bytes`, as JSON-RPC bounds one message's replies: past it
 * -32001; one that cannot be built at all (past V8's longest string: -32001; a BigInt, a cycle:
 * -32603) is an error answer too, never a throw out of the request.
 */
function bounded(a: Answer, max: number): { status: number; text: string } {
  const refused = (err: RpcError) => ({ status: statusOf(err.code), text: JSON.stringify({ error: err.toJSON() }) });
  let text: string;
  try {
    text = a.body instanceof JsonText ? a.body.text : JSON.stringify(a.body);
  } catch (err) {
    return refused(isStringLimit(err) ? tooLargeError(max) : new RpcError(RpcCode.InternalError, 'Internal error'));
  }
  return fitsAlone(text, max) ? { status: a.status, text } : refused(tooLargeError(max));
}

/** Writes a JSON answer (the connection closes after it once shutdown began). Never throws. */
export function send(res: ServerResponse, a: Answer, closing: boolean, max_reply_bytes: number = DEFAULT_MAX_REPLY_BYTES): void {
  if (res.headersSent || res.destroyed) return;
  const { status, text } = bounded(a, max_reply_bytes);
  // One object, filled in place: no spread per answer (bench: http.steer.p50@1conn).
  const headers: Record<string, string | number> = {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(text, 'utf8'),
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
  };
  if (closing) headers.Connection = 'close';
  if (a.headers) Object.assign(headers, a.headers);
  res.writeHead(status, headers);
  res.end(text);
}
