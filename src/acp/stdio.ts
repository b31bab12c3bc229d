// The ACP server on the process's stdio, and its part of `subrun serve`'s one shutdown path.
// stdout carries ACP alone; every log line goes to stderr.
//
// Shutdown, whatever starts it (the IDE closing stdin, SIGTERM, SIGINT): every session's turn and
// children are interrupted as a cancel would do; the pending prompts answer `cancelled` once their
// children's terminal updates are out; then the server shuts down (anything left interrupted, its
// completions translated and sent), and only then does the SDK see the end of the input and
// close. Each wait is bounded by the shutdown grace.
import type { Readable, Writable } from 'node:stream';
import type { Logger } from '../log.ts';
import type { RpcServer } from '../rpc/server.ts';
import { AcpAgent } from './agent.ts';
import { stdioWire, type StdioWire } from './stdio-wire.ts';

export interface AcpStdioOptions {
  readonly server: RpcServer;
  readonly input: Readable;
  readonly output: Writable;
  /** The longest line taken (`--max-message-bytes`); a longer one is refused with -32600. */
  readonly max_message_bytes: number;
  readonly roots: readonly string[];
  /** Root each session's parent agent tools at its cwd (see AcpAgent). */
  readonly workspaces?: boolean;
  readonly logger: Logger;
  /** The end of the input: starts the shutdown (resolves when it is done). */
  readonly onInputEnd: () => Promise<void>;
}

export interface AcpStdio {
  /** Resolves when the ACP connection closed (the shutdown finished, or stdout failed). */
  readonly closed: Promise<void>;
  /** The shutdown's first part, before the server's: turns and children stopped, prompts answered. */
  settle(grace_ms: number): Promise<void>;
  /** The shutdown's last part, after the server's: the rest written, the connection closed. */
  finish(grace_ms: number): Promise<void>;
  /** How much state the adapter holds now (AcpAgent#held). */
  held(): ReturnType<AcpAgent['held']>;
}

/** Resolves with whether `p` settled within `ms`. */
async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const r = await Promise.race([p.then(() => true), deadline]);
  clearTimeout(timer);
  return r;
}

export function acpStdio(opts: AcpStdioOptions): AcpStdio {
  const agent = new AcpAgent({ server: opts.server, roots: opts.roots, workspaces: opts.workspaces, logger: opts.logger });
  const wire: StdioWire = stdioWire({
    input: opts.input,
    output: opts.output,
    max_message_bytes: opts.max_message_bytes,
    tap: (m) => agent.tap(m),
    onAnswer: (id) => agent.answered(id),
    onInputEnd: opts.onInputEnd,
  });
  const conn = agent.connect(wire);
  const flushed = async () => {
    await wire.answered();
    await agent.written();
  };
  return {
    closed: conn.closed,
    held: () => agent.held(),
    async settle(grace_ms) {
      agent.cancelAll();
      if (!(await within(flushed(), grace_ms))) opts.logger.warn({ grace_ms }, 'acp prompts still unanswered at the end of the shutdown grace');
    },
    async finish(grace_ms) {
      agent.close();
      await within(flushed(), grace_ms);
      wire.endInput();
      await within(conn.closed, grace_ms);
    },
  };
}
