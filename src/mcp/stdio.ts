// `subrun serve --mcp`: one MCP session on the process's stdio (the SDK's StdioServerTransport),
// and its part of `subrun serve`'s one shutdown path. stdout carries MCP alone; logs go to stderr.
//
// The SDK does not watch for the end of stdin: it is ours, and takes the same path as SIGTERM and
// SIGINT (serve.ts): `delegate` answers -32000; the server stops every child and sends each
// completion (a log message, resource updates, the entries of every waiting call, which then
// answers); every answer is written and stdout flushed; then the connection closes and the process
// exits 0. A line past the SDK's 10 MiB buffer, or a stdout that fails, closes the connection,
// which starts the same shutdown.
import type { Readable, Writable } from 'node:stream';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Logger } from '../log.ts';
import { within } from './within.ts';
import { createSurface, type McpSurface, type SurfaceOptions } from './surface.ts';

export interface McpStdioOptions extends SurfaceOptions {
  readonly input: Readable;
  readonly output: Writable;
  /** The end of the input: starts the shutdown. */
  readonly onInputEnd: () => void;
}

export interface McpStdio {
  readonly surface: McpSurface;
  /** Resolves when the MCP connection closed (a line too long, stdout failed, or the shutdown). */
  readonly closed: Promise<void>;
  /** The shutdown's first part, before the server's: no more delegations. */
  settle(): void;
  /** The shutdown's last part, after the server's: every answer written, stdout flushed, the connection closed. */
  finish(grace_ms: number): Promise<void>;
}

function flushed(output: Writable): Promise<void> {
  return new Promise((resolve) => {
    if (output.destroyed || output.writableEnded) return resolve();
    output.write('', () => resolve());
  });
}

export function mcpStdio(opts: McpStdioOptions): McpStdio {
  const logger: Logger = opts.logger;
  const surface = createSurface(opts);
  const transport = new StdioServerTransport(opts.input, opts.output);
  let closedResolve!: () => void;
  const closed = new Promise<void>((resolve) => (closedResolve = resolve));
  surface.mcp.server.onclose = () => closedResolve();
  surface.mcp.server.onerror = (err) => logger.warn({ error: err.message }, 'mcp stdio error');
  // A stdout nobody reads any more (EPIPE) must not be an uncaught error: it ends the connection.
  opts.output.on('error', (err) => {
    logger.warn({ error: err.message }, 'stdout failed');
    closedResolve();
  });
  opts.input.once('end', () => opts.onInputEnd());
  void surface.connect(transport).catch((err: unknown) => {
    logger.error({ err }, 'mcp stdio did not start');
    closedResolve();
  });
  return {
    surface,
    closed,
    settle: () => surface.shutdown(),
    async finish(grace_ms) {
      if (!(await within(surface.answered(), grace_ms))) logger.warn({ grace_ms }, 'mcp calls still unanswered at the end of the shutdown grace');
      await within(flushed(opts.output), grace_ms);
      await within(surface.close(), grace_ms);
    },
  };
}
