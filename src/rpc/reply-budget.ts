// What one incoming message may cost: its count of calls (max_batch, checked when it is parsed)
// and the bytes its replies may take (max_reply_bytes, spent here). A message of 1 MiB can ask for far more
// than 1 MiB back: 6,000 `subagent.tail` calls for a child whose window holds 16 KiB of control
// characters (each escapes to six bytes) ask for 590 MB, past V8's longest string (2^29 - 24
// UTF-16 units), and building that reply threw out of the microtask that wrote it and ended the
// process. The budget is spent in request order; once a reply does not fit, it and every later
// reply of the message are replaced by -32001 `response too large`, with the request's id: each
// request still gets exactly one response, and each call still took its effect.
import { tooLargeError, utf8Bytes } from '../server/reply-bound.ts';
import { errorResponse, type RpcId } from './jsonrpc.ts';

export { fitsAlone, isStringLimit, tooLargeError, utf8Bytes } from '../server/reply-bound.ts';

export { DEFAULT_MAX_BATCH, DEFAULT_MAX_REPLY_BYTES, MAX_MAX_BATCH, MAX_MAX_REPLY_BYTES } from '../server/hub.ts';

/** A reply's JSON text, as #text makes it: or TOO_LARGE when it could not even be built. */
export const TOO_LARGE = Symbol('too large');

/** The -32001 reply for `id`: small whatever the result was (the id is echoed, nothing else). */
export function tooLargeText(id: RpcId, max: number): string {
  return JSON.stringify(errorResponse(id, tooLargeError(max)));
}

/** The bytes left for one message's replies. */
export class ReplyBudget {
  readonly #max: number;
  #left: number;
  #spent = false;

  /** `reserve`: bytes set aside up front (a batch's closing `]`). */
  constructor(max: number, reserve = 0) {
    this.#max = max;
    this.#left = max - reserve;
  }

  /** True once a reply did not fit: every later one is replaced without being built. */
  get spent(): boolean {
    return this.#spent;
  }

  /**
   * The text to send for one reply: `text` itself if it fits in what is left (`extra` bytes of
   * framing, a batch's `[` or `,`, counted with it), or the -32001 reply for `id`.
   */
  take(text: string | typeof TOO_LARGE, id: RpcId, extra = 0): string {
    if (!this.#spent && text !== TOO_LARGE) {
      // A UTF-8 text is at least as many bytes as it has UTF-16 units: no need to measure past that.
      const cost = text.length + extra > this.#left ? Number.POSITIVE_INFINITY : utf8Bytes(text) + extra;
      if (cost <= this.#left) {
        this.#left -= cost;
        return text;
      }
    }
    this.#spent = true;
    return tooLargeText(id, this.#max);
  }
}
