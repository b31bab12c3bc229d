// A child's live transcript: the last 16 KiB of UTF-8 bytes plus the count of all bytes ever
// written, in a buffer that grows to the window only as output arrives (a quiet child costs little).

export const TAIL_WINDOW_BYTES = 16384;

export interface TailSlice {
  readonly text: string;
  readonly truncated: boolean;
  /** Total bytes written so far; pass it back as `since` to get only newer bytes. */
  readonly offset: number;
}

// ignoreBOM: a leading U+FEFF is text the child wrote; the default decoder would silently drop it.
const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
const SCRATCH_BYTES = 3 * TAIL_WINDOW_BYTES;
const scratch = Buffer.allocUnsafeSlow(SCRATCH_BYTES);
/** No buffer until the first byte: a queued child has written nothing yet. */
const NO_BYTES = Buffer.alloc(0);
/** The first buffer: a quiet child's `[start]` line fits; growth doubles from there. */
const FIRST_BYTES = 64;
/** Buffer.allocUnsafe serves sizes up to half its pool from the pool. */
const POOLED_BYTES = Buffer.poolSize >>> 1;
/** Text kept unencoded before the first buffer, in UTF-16 units (a quiet child's two lines fit). */
const PENDING_CHARS = 256;

const isHigh = (c: number): boolean => c >= 0xd800 && c <= 0xdbff;
const isLow = (c: number): boolean => c >= 0xdc00 && c <= 0xdfff;

export class Transcript {
  readonly #capacity: number;
  /** A Buffer, not a plain Uint8Array: Buffer#write encodes at an offset, with no subarray view per append. */
  #buf: Buffer;
  /** Total bytes ever written; the byte at absolute position p lives at p % capacity once full. */
  #written = 0;
  /**
   * What was appended before the first buffer, not yet encoded: a child nobody reads (most, when
   * no one tails it) never encodes its `[start]` and end lines, nor allocates a buffer for them
   * (bench: delegation.per_child). Encoded, as one text, before anything else is read or written.
   */
  #pending = '';

  constructor(capacity: number = TAIL_WINDOW_BYTES) {
    this.#capacity = capacity;
    this.#buf = NO_BYTES;
  }

  get offset(): number {
    this.#flush();
    return this.#written;
  }

  append(text: string): void {
    if (text.length === 0) return;
    if (this.#holds(text)) {
      this.#pending += text;
      return;
    }
    this.#flush();
    this.#encode(text);
  }

  #encode(text: string): void {
    // No fresh array per append: UTF-8 takes at most 3 bytes per UTF-16 unit, so a text that surely
    // fits before the end (or the wrap point) is encoded in place, and one that may not goes through
    // a shared scratch (safe: this is synchronous).
    const most = text.length * 3;
    const cap = this.#capacity;
    // Still growing: make room first, so the text is encoded straight into place.
    if (this.#buf.length < cap) this.#ensure(Math.min(cap, this.#written + most));
    const at = this.#buf.length < cap ? this.#written : this.#written % cap;
    if (most <= this.#buf.length - at) {
      this.#written += this.#buf.write(text, at);
      return;
    }
    if (most <= SCRATCH_BYTES) {
      this.appendBytes(scratch.subarray(0, scratch.write(text, 0)));
      return;
    }
    this.appendBytes(Buffer.from(text, 'utf8'));
  }

  appendNewline(): void {
    if (this.#holds('\n')) {
      this.#pending += '\n';
      return;
    }
    this.#flush();
    const cap = this.#capacity;
    this.#ensure(Math.min(cap, this.#written + 1));
    this.#buf[this.#buf.length < cap ? this.#written : this.#written % cap] = 0x0a;
    this.#written += 1;
  }

  appendBytes(bytes: Uint8Array): void {
    this.#flush();
    const cap = this.#capacity;
    let src = bytes;
    if (src.length >= cap) {
      // Only the last window of a huge write can ever be read back.
      this.#written += src.length - cap;
      src = src.subarray(src.length - cap);
    }
    this.#ensure(Math.min(cap, this.#written + src.length));
    if (this.#buf.length < cap) {
      // Still growing: positions are linear.
      this.#buf.set(src, this.#written);
      this.#written += src.length;
      return;
    }
    const at = this.#written % cap;
    const first = Math.min(src.length, cap - at);
    this.#buf.set(src.subarray(0, first), at);
    if (first < src.length) this.#buf.set(src.subarray(first), 0);
    this.#written += src.length;
  }

  /**
   * The window's text, or only what was written after `since`. `truncated` iff some of the bytes
   * asked for already left the window. The text never starts inside a multi-byte character.
   */
  read(since?: number): TailSlice {
    this.#flush();
    const end = this.#written;
    const windowStart = Math.max(0, end - this.#capacity);
    const asked = since === undefined ? 0 : Math.min(Math.max(0, Math.floor(since)), end);
    const start = Math.max(asked, windowStart);
    const bytes = this.#slice(start, end);
    let skip = 0;
    // Skip UTF-8 continuation bytes (10xxxxxx) at the cut: their lead byte is gone.
    while (skip < bytes.length && skip < 3 && ((bytes[skip] ?? 0) & 0xc0) === 0x80) skip++;
    return { text: decoder.decode(bytes.subarray(skip)), truncated: asked < windowStart, offset: end };
  }

  /**
   * Whether `text` joins the unencoded text: only before the first buffer, within its bound, and
   * never where the join would pair two halves of a surrogate (encoded apart, each is U+FFFD).
   */
  #holds(text: string): boolean {
    if (this.#buf.length !== 0 || this.#pending.length + text.length > PENDING_CHARS) return false;
    const p = this.#pending;
    return p === '' || !(isHigh(p.charCodeAt(p.length - 1)) && isLow(text.charCodeAt(0)));
  }

  /** Encodes the unencoded text, if any, as one append. */
  #flush(): void {
    const text = this.#pending;
    if (text === '') return;
    this.#pending = '';
    this.#encode(text);
  }

  #slice(start: number, end: number): Uint8Array {
    const n = end - start;
    if (n <= 0) return new Uint8Array(0);
    const cap = this.#capacity;
    if (this.#buf.length < cap || end <= cap) return this.#buf.subarray(start, end);
    const out = new Uint8Array(n);
    const at = start % cap;
    const first = Math.min(n, cap - at);
    out.set(this.#buf.subarray(at, at + first), 0);
    if (first < n) out.set(this.#buf.subarray(0, n - first), first);
    return out;
  }

  #ensure(size: number): void {
    if (this.#buf.length >= size) return;
    let next = Math.max(this.#buf.length, FIRST_BYTES);
    while (next < size) next *= 2;
    next = Math.min(next, this.#capacity);
    // Small buffers are slices of Node's shared pool: cheaper than an ArrayBuffer each, and one less object for the GC.
    const grown = next <= POOLED_BYTES ? Buffer.allocUnsafe(next) : Buffer.allocUnsafeSlow(next);
    grown.set(this.#buf.subarray(0, this.#written));
    this.#buf = grown;
  }
}
