// JSON-RPC 2.0 envelopes: parsing one received text into calls, and shaping responses. Batches
// follow the spec exactly: an array in, an array out; `[]` is one -32600; an all-notification
// batch gets no reply; every request gets exactly one response. A batch over the server's
// max_batch is one -32600 too (as go-ethereum answers one): none of it runs.
import { isRecord } from '../guards.ts';
import { RpcCode, RpcError } from '../server/errors.ts';

export type RpcId = string | number | null;

export interface Call {
  readonly method: string;
  /** `{}` when the request had no params; an object otherwise (validated later, per method). */
  readonly params: Record<string, unknown>;
  /** undefined for a notification. */
  readonly id: RpcId | undefined;
}

export type Response =
  | { readonly jsonrpc: '2.0'; readonly id: RpcId; readonly result: unknown }
  | { readonly jsonrpc: '2.0'; readonly id: RpcId; readonly error: { code: number; message: string; data?: unknown } };

/** One element of a received message: a call to run, or an envelope error to answer at once. */
export type Item =
  | { readonly kind: 'call'; readonly call: Call }
  | { readonly kind: 'invalid'; readonly response: Response }
  /** A well-formed notification that cannot run (e.g. bad params): notifications never get a reply. */
  | { readonly kind: 'dropped' };

export type Parsed = { readonly batch: false; readonly item: Item } | { readonly batch: true; readonly items: readonly Item[] };

export function errorResponse(id: RpcId, err: RpcError): Response {
  return { jsonrpc: '2.0', id, error: err.toJSON() };
}

export function resultResponse(id: RpcId, result: unknown): Response {
  return { jsonrpc: '2.0', id, result };
}

const invalid = (id: RpcId, message = 'Invalid Request'): Item => ({
  kind: 'invalid',
  response: errorResponse(id, new RpcError(RpcCode.InvalidRequest, message)),
});

function isValidId(id: unknown): id is RpcId {
  return id === null || typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id));
}

function toItem(value: unknown): Item {
  if (!isRecord(value)) return invalid(null);
  const msg = value;
  const hasId = Object.hasOwn(msg, 'id');
  const id = hasId && isValidId(msg.id) ? msg.id : null;
  if (hasId && !isValidId(msg.id)) return invalid(null, 'Invalid Request: id must be a string, a number or null');
  if (msg.jsonrpc !== '2.0') return invalid(id, 'Invalid Request: jsonrpc must be "2.0"');
  if (typeof msg.method !== 'string') return invalid(id, 'Invalid Request: method must be a string');
  let params: Record<string, unknown> = {};
  if (Object.hasOwn(msg, 'params')) {
    if (isRecord(msg.params)) params = msg.params;
    else {
      // Per protocol: params present but not an object is invalid params, not an invalid request.
      const err = new RpcError(RpcCode.InvalidParams, 'invalid params: params must be an object', {
        issues: [{ path: 'params', message: 'must be an object' }],
      });
      return hasId ? { kind: 'invalid', response: errorResponse(id, err) } : { kind: 'dropped' };
    }
  }
  return { kind: 'call', call: { method: msg.method, params, id: hasId ? id : undefined } };
}

/**
 * Parses one received text (a stdio line or a WebSocket frame). A batch of more than `maxBatch`
 * elements is refused as a whole (one -32600, id null) before any of it runs, notifications
 * included: what one message may cost is bounded by its count of calls, not only by its bytes.
 */
export function parseMessage(text: string, maxBatch = Number.POSITIVE_INFINITY): Parsed | Response {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return errorResponse(null, new RpcError(RpcCode.ParseError, 'Parse error'));
  }
  if (Array.isArray(value)) {
    if (value.length === 0) return errorResponse(null, new RpcError(RpcCode.InvalidRequest, 'Invalid Request: empty batch'));
    if (value.length > maxBatch) {
      return errorResponse(null, new RpcError(RpcCode.InvalidRequest, 'Invalid Request: batch too large', { max_batch: maxBatch }));
    }
    return { batch: true, items: value.map(toItem) };
  }
  return { batch: false, item: toItem(value) };
}

export function isResponse(p: Parsed | Response): p is Response {
  return 'jsonrpc' in p;
}
