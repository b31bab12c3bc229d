// Newline-delimited framing with a bound, shared by every stdio surface (`serve --stdio`'s
// JSON-RPC, `serve --acp`'s ACP): split on LF only (a CR before it is the line's, for the reader
// to drop), and a line over `max` bytes is refused as soon as it is known to be too long, then
// skipped to its end: never buffered whole, whatever its length. The end of the input ends the
// last line, LF or not.

/** The one answer to an oversize line (no id can be read from a line that is not kept). */
export const OVERSIZE_ANSWER = { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Invalid Request: message too large' } } as const;
export const OVERSIZE_TEXT = JSON.stringify(OVERSIZE_ANSWER);

export interface LineSplitter {
  /** Feeds a chunk of input: each complete line within the bound goes to `onLine`, in order. */
  push(chunk: Uint8Array): void;
  /** The input ended: its last line, if any and not refused, goes to `onLine`. */
  end(): void;
}

const LF = 0x0a;

/**
 * `onLine` gets each line's bytes without its LF (the buffer may be the chunk's own memory: copy
 * it to keep it); `onOversize` runs once per line over `max` bytes, before its end has arrived.
 */
export function lineSplitter(max: number, onLine: (bytes: Buffer) => void, onOversize: () => void): LineSplitter {
  let parts: Buffer[] = [];
  let size = 0;
  /** True while skipping the rest of an oversize line. */
  let skipping = false;
  const reset = () => {
    parts = [];
    size = 0;
  };
  return {
    push(input) {
      const chunk = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
      let start = 0;
      for (;;) {
        const nl = chunk.indexOf(LF, start);
        if (nl < 0) break;
        const piece = chunk.subarray(start, nl);
        if (skipping) skipping = false;
        else if (size + piece.length > max) onOversize();
        else onLine(parts.length === 0 ? piece : Buffer.concat([...parts, piece]));
        reset();
        start = nl + 1;
      }
      const rest = chunk.subarray(start);
      if (rest.length === 0 || skipping) return;
      if (size + rest.length > max) {
        // Answered as soon as the line is known to be too long; its bytes are dropped until its end.
        onOversize();
        reset();
        skipping = true;
        return;
      }
      parts.push(Buffer.from(rest));
      size += rest.length;
    },
    end() {
      if (!skipping && parts.length > 0) onLine(Buffer.concat(parts));
      reset();
    },
  };
}
