// subrun/server: the JSON-RPC server for hosts, to embed in a process of your own, with subrun's
// model loop wired in (the composition of src/server/ and src/agent/), its transports, the HTTP
// API with the dashboard (createHttpApi, for listenWs's onRequest) and the logger they take
// (docs/embedding.md).
import { ParentAgent } from './agent/parent-agent.ts';
import { openaiKind, type OpenAIRunnerConfig } from './agent/runner.ts';
import { workspaceTools } from './agent/tools/workspace.ts';
import { RpcServer as BareRpcServer, type ServerOptions as BareServerOptions } from './rpc/server.ts';
import { withProps } from './shapes.ts';

export { METHODS, CATALOG, PROTOCOL_VERSION } from './rpc/server.ts';
export type { EventSink } from './rpc/server.ts';
export type { Connection } from './rpc/connection.ts';
export { stdioTransport } from './rpc/transports/stdio.ts';
export type { StdioOptions } from './rpc/transports/stdio.ts';
export { listenWs, isLoopback } from './rpc/transports/ws.ts';
export type { WsOptions, WsListener } from './rpc/transports/ws.ts';
export type { Transport } from './rpc/transports/transport.ts';
export { memoryPair } from './rpc/transports/memory.ts';
export type { MemoryClient } from './rpc/transports/memory.ts';
export type { ParentFactory, SessionParent } from './server/context.ts';
export { createHttpApi } from './http/api.ts';
export type { HttpApi, HttpApiOptions } from './http/api.ts';
export type { RequestHandler, ListenerContext } from './server/listener.ts';
export { createLogger, silentLogger, LOG_FORMATS } from './log.ts';
export type { Logger, LogFormat } from './log.ts';
export { Metrics } from './telemetry/metrics.ts';
export type { GaugeSources, WorkerGauge } from './telemetry/metrics.ts';

export interface ServerOptions extends BareServerOptions {
  /**
   * The model behind `agent: {kind: "openai"}` children and the sessions' parent agents; a session
   * opened in a workspace (ACP) gets the workspace tools rooted there.
   */
  readonly openai?: OpenAIRunnerConfig;
}

/** The options of a server with the model loop: the openai runner kind and a parent agent per session. */
export function withModel(options: ServerOptions): BareServerOptions {
  const { openai: given, ...rest } = options;
  // A retried model request logs where the server logs (one line at info per retry).
  const openai = given && rest.logger && !given.logger ? withProps(given, { logger: rest.logger }) : given;
  return withProps(rest, {
    model: rest.model ?? openai?.endpoint.model ?? '',
    // The caller's kinds win (a remote placement wraps openai too); openai by default.
    runtime: withProps(rest.runtime, { runner_kinds: { openai: openaiKind(openai), ...rest.runtime?.runner_kinds } }),
    parent:
      rest.parent ??
      ((ctx) =>
        new ParentAgent({
          runtime: ctx.runtime,
          config: openai && ctx.workspace !== undefined ? withProps(openai, { tools: workspaceTools(ctx.workspace) }) : openai,
          ids: ctx.ids,
          logger: ctx.logger,
          clock: ctx.clock,
          owner: ctx.owner,
          emit: ctx.emit,
        })),
  });
}

/** The JSON-RPC server with subrun's model loop (src/rpc/server.ts has the one without). */
export class RpcServer extends BareRpcServer {
  constructor(options: ServerOptions = {}) {
    super(withModel(options));
  }
}
