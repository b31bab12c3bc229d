// stdio transport: one JSON value per line, UTF-8, split on LF only (a CR before it is tolerated;
// U+2028/U+2029 inside strings are not line breaks). A line over the limit is discarded and
// answered with -32600 (id null); the stream goes on at the next line. The end of the input ends
// the last line, LF or not.
//
// The input ending is not the transport closing: a host that closes stdin may still be reading
// stdout, and is owed the replies to what it sent and the completions of the shutdown that
// follows. With `onInputEnd` set, the transport stays open for output until close(); without it,
// the input's end closes the transport.
import type { Readable, Writable } from 'node:stream';
import { lineSplitter, OVERSIZE_TEXT } from './lines.ts';
import type { Transport } from './transport.ts';

export interface StdioOptions {
  readonly input: Readable;
  readonly output: Writable;
  readonly max_message_bytes: number;
  /** Called once when the input ends (EOF, close or error), after its last line was handled. */
  readonly onInputEnd?: () => void;
}

export interface StdioTransport extends Transport {
  /**
   * Resolves once everything sent so far was handed to the output (its write callbacks ran), or
   * at once if the output failed: nothing more can be written then.
   */
  drained(): Promise<void>;
}

/** UTF-16 units joined into one write at most (a text longer than this goes out on its own). */
const JOIN_LIMIT = 1024 * 1024;

export function stdioTransport(opts: StdioOptions): StdioTransport {
  const { input, output, max_message_bytes: max } = opts;
  let closed = false;
  const decoder = new TextDecoder('utf-8', { ignoreBOM: true });

  const line = (bytes: Buffer) => {
    let end = bytes.length;
    if (end > 0 && bytes[end - 1] === 0x0d) end -= 1;
    const text = decoder.decode(bytes.subarray(0, end));
    if (text.trim() === '') return;
    t.onmessage?.(text);
  };
  const lines = lineSplitter(max, line, () => t.send(OVERSIZE_TEXT));
  const onData = (chunk: Buffer) => lines.push(chunk);

  // Everything sent in one turn leaves in one write, joined rather than corked (bench/cases/rpc-stdio.ts).
  // The flush runs before any I/O, so no reply waits, and after a close too, so nothing sent is lost.
  //
  // The join is bounded: a turn's replies can add up past V8's longest string (each message's
  // replies are bounded by max_reply_bytes, but one chunk of input may hold many messages), and
  // `pending +=` would then throw. Past JOIN_LIMIT what is pending goes out at once, and so does
  // a text that would take it past the limit; the stream keeps their order.
  let pending = '';
  /** Set once the output errored or closed: nothing written now would arrive. */
  let broken = false;
  let lastWrite: Promise<void> = Promise.resolve();
  let resolveBroken!: () => void;
  const whenBroken = new Promise<void>((resolve) => (resolveBroken = resolve));
  const write = (text: string) => {
    if (broken || output.destroyed) return;
    let written!: () => void;
    const done = new Promise<void>((resolve) => (written = resolve));
    try {
      output.write(text, () => written());
    } catch {
      // Runs from process.nextTick, where a throw would end the process: a stdout that cannot
      // be written to is a failed output.
      outputFailed();
      return;
    }
    lastWrite = done;
  };
  const flush = () => {
    const text = pending;
    pending = '';
    if (text !== '') write(text);
  };

  const finish = () => {
    if (closed) return;
    closed = true;
    input.off('data', onData);
    t.onclose?.();
  };

  let inputEnded = false;
  const endOfInput = () => {
    if (inputEnded) return;
    inputEnded = true;
    input.off('data', onData);
    // The last line needs no LF: EOF ends it (unless it was already refused as oversize).
    lines.end();
    if (opts.onInputEnd) opts.onInputEnd();
    else finish();
  };

  // A host that closes its end of stdout (EPIPE) cannot read anything more: the transport closes.
  // The listener stays for the transport's life: process.stdout is never really destroyed, and a
  // second 'error' with no listener would be thrown out of the process.
  const outputFailed = () => {
    broken = true;
    resolveBroken();
    finish();
  };

  const t: StdioTransport = {
    kind: 'stdio',
    send(text) {
      if (closed) return;
      if (pending.length + text.length >= JOIN_LIMIT) {
        flush();
        write(`${text}\n`);
        return;
      }
      if (pending === '') process.nextTick(flush);
      pending += `${text}\n`;
    },
    close() {
      finish();
    },
    start() {
      input.on('data', onData);
      input.once('end', endOfInput);
      input.once('close', endOfInput);
      input.on('error', endOfInput);
      output.on('error', outputFailed);
      output.once('close', outputFailed);
    },
    drained() {
      flush();
      return Promise.race([lastWrite, whenBroken]);
    },
  };
  return t;
}
