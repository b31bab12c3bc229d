// ACP over stdio: newline-delimited JSON through the SDK's ndJsonStream, with four seams the SDK
// does not give:
// - `--max-message-bytes`, as `serve --stdio` applies it and with the same code (rpc/transports/
//   lines.ts): a line over it is refused as it streams with one -32600 (id null), never buffered
//   whole, and the stream goes on. The SDK's own limit (whose error ends the whole stream) is set
//   above it, so that it never sees such a line.
// - a tap that sees every parsed inbound message synchronously, in arrival order, before the SDK
//   dispatches it. The SDK runs handlers concurrently (a cancel's handler can run before the
//   prompt that preceded it on the wire), so ordering per session is decided here, never by the
//   handler schedule.
// - a deferred end of input: if EOF reached the SDK it would close the connection at once and
//   every later notification would fail, so the shutdown (every child's terminal update, every
//   pending answer) runs first and only then does the SDK see the end.
// - written-response tracking, so the shutdown can wait until every request it was sent has its
//   answer on stdout, and so whatever the tap registered for a request goes when it is answered,
//   whatever the answer (a refusal of the SDK's own, before any handler ran, included).
import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk/unstable';
import type { AnyMessage, Stream } from '@agentclientprotocol/sdk/unstable';
import { lineSplitter, OVERSIZE_ANSWER } from '../rpc/transports/lines.ts';

export interface StdioWireOptions {
  readonly input: Readable;
  readonly output: Writable;
  /** The longest line taken, in bytes (`--max-message-bytes`). */
  readonly max_message_bytes: number;
  /** Every inbound message, parsed, in wire order, before the SDK sees it. Must not throw. */
  readonly tap: (message: AnyMessage) => void;
  /** Every response the SDK sends (result or error), by its id, as it is handed to the output. */
  readonly onAnswer?: (id: Id) => void;
  /** Runs once when the input ends (EOF), before the SDK is told; the SDK closes after it settles. */
  readonly onInputEnd: () => Promise<void>;
}

export interface StdioWire {
  readonly stream: Stream;
  /** Resolves once every inbound request seen so far has its response written. */
  answered(): Promise<void>;
  /** Ends the input as EOF does, without running onInputEnd (a shutdown begun elsewhere). */
  endInput(): void;
}

export type Id = string | number | null;

/** The id the SDK will answer with, for a well-formed JSON-RPC 2.0 request; undefined otherwise. */
function requestId(m: AnyMessage): Id | undefined {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- a peer's message, typed by the SDK but read off the wire
  if (m.jsonrpc !== '2.0' || !('method' in m) || typeof m.method !== 'string' || !('id' in m)) return undefined;
  const id = m.id;
  return id === null || typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? id : undefined;
}

export function stdioWire(opts: StdioWireOptions): StdioWire {
  const source: ReadableStreamDefaultReader<Uint8Array> = Readable.toWeb(opts.input).getReader();
  let closed = false;
  let control!: ReadableStreamDefaultController<Uint8Array>;
  let wake!: () => void;
  const woken = new Promise<{ done: true; value: undefined }>((resolve) => (wake = () => resolve({ done: true, value: undefined })));
  const close = () => {
    if (closed) return;
    closed = true;
    wake();
    control.close();
    void source.cancel().catch(() => undefined);
  };
  const input = new ReadableStream<Uint8Array>({
    start(controller) {
      control = controller;
    },
    async pull() {
      // Until a line is handed on: a pull that enqueues nothing is not called again.
      for (;;) {
        const { done, value } = await Promise.race([source.read(), woken]);
        if (closed) return;
        if (done) break;
        const before = fed;
        lines.push(value);
        if (fed > before) return;
      }
      lines.end();
      await opts.onInputEnd();
      close();
    },
    cancel(reason) {
      closed = true;
      return source.cancel(reason);
    },
  });
  // What the SDK parses: the lines within the bound, each with its LF. A refusal is written in
  // line with every other answer, through the one writer of the output.
  const LF = new Uint8Array([0x0a]);
  let fed = 0;
  const lines = lineSplitter(
    opts.max_message_bytes,
    (bytes) => {
      fed += 1;
      control.enqueue(new Uint8Array(bytes));
      control.enqueue(LF);
    },
    () => void sink.write(OVERSIZE_ANSWER).catch(() => undefined),
  );
  const raw = acp.ndJsonStream(Writable.toWeb(opts.output), input, { maxMessageBytes: opts.max_message_bytes + 2 });

  const unanswered = new Set<Id>();
  const waiters: Array<() => void> = [];
  const settle = () => {
    if (unanswered.size > 0) return;
    for (const w of waiters.splice(0)) w();
  };
  const sink = raw.writable.getWriter();
  const writable = new WritableStream<AnyMessage>({
    async write(message) {
      const answer = 'id' in message && !('method' in message) ? message : undefined;
      if (answer) opts.onAnswer?.(answer.id);
      await sink.write(message);
      if (answer) {
        unanswered.delete(answer.id);
        settle();
      }
    },
    async close() {
      await sink.close();
    },
    async abort(reason) {
      await sink.abort(reason);
    },
  });
  const readable = raw.readable.pipeThrough(
    new TransformStream<AnyMessage, AnyMessage>({
      transform(message, controller) {
        const id = requestId(message);
        if (id !== undefined) unanswered.add(id);
        opts.tap(message);
        controller.enqueue(message);
      },
    }),
  );
  return {
    stream: { writable, readable },
    answered() {
      if (unanswered.size === 0) return Promise.resolve();
      return new Promise<void>((resolve) => waiters.push(resolve));
    },
    endInput: close,
  };
}
