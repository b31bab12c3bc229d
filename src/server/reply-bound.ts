// The per-message reply bound every surface applies (`--max-reply-bytes`): the measures and the
// one error, shared by JSON-RPC's reply budget (rpc/reply-budget.ts) and the HTTP API's answers
// (http/respond.ts).
import { RpcCode, RpcError } from './errors.ts';

/** The UTF-8 length of `text` (a string's UTF-8 length is at most three bytes per UTF-16 unit). */
export function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/** Whether `text` alone fits in `max` bytes; measured only when its length does not decide it. */
export function fitsAlone(text: string, max: number): boolean {
  return text.length * 3 <= max || (text.length <= max && utf8Bytes(text) <= max);
}

export const tooLargeError = (max: number): RpcError => new RpcError(RpcCode.ResponseTooLarge, 'response too large', { max_reply_bytes: max });

/** V8's answer to a string longer than it can make: whatever was being built, it was far past any bound. */
export function isStringLimit(err: unknown): boolean {
  return err instanceof RangeError && err.message === 'Invalid string length';
}
