// `subrun serve`: the JSON-RPC server over stdio or WebSocket (with Streamable HTTP MCP at /mcp),
// the Agent Client Protocol adapter over stdio (--acp, for IDEs), or the Model Context Protocol
// surface over stdio (--mcp, for MCP hosts). stdout of --stdio, --acp and --mcp carries the
// protocol alone; everything human-readable and every log line goes to stderr.
//
// One shutdown path, whatever starts it (SIGTERM, SIGINT, the host closing stdin; a repeated
// signal joins the shutdown already running): stop taking connections, stop every child and send
// its completion, close every connection behind what it was sent, then give the peers
// --shutdown-grace-ms to read it all before whatever is left is cut and the process exits.
import { randomBytes } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import type { AcpStdio } from '../acp/stdio.ts';
import type { McpHttp } from '../mcp/http.ts';
import type { McpStdio } from '../mcp/stdio.ts';
import { helpText, parseFlags, UsageError, wantsHelp } from './flags.ts';
import { SERVE_FLAGS } from './serve-flags.ts';

export { SERVE_FLAGS };
import { openaiKind, openaiRunner } from '../agent/runner.ts';
import { builtinRunnerKinds } from '../delegation/runners/kinds.ts';
import { SCRIPTED_MODEL } from '../delegation/runners/scripted.ts';
import { loggerFromFlags } from './log-flags.ts';
import { modelConfig } from './model-options.ts';
import { RpcServer } from '../server.ts';
import { stdioTransport, type StdioTransport } from '../rpc/transports/stdio.ts';
import { CUT_MESSAGE, isLoopback, type WsListener } from '../rpc/transports/ws.ts';
import { createHttpApi } from '../http/api.ts';
import { defaultStateDir } from './state-dir.ts';
import { attachPlacement, drainedWithin, listenOrSay, openJetStream, openStore, takeLead } from './serve-parts.ts';
import { Metrics } from '../telemetry/metrics.ts';
import { startTracing } from './otel.ts';
import { withProps } from '../shapes.ts';

const SERVE_USAGE = `usage: subrun serve --stdio | --ws | --acp | --mcp [options]

The server for hosts. --stdio serves one JSON-RPC host over this process's stdin and stdout;
--ws serves any number of hosts on ws://HOST:PORT/ with a token (docs/protocol.md), and MCP hosts
on http://HOST:PORT/mcp with the same token (Streamable HTTP, docs/mcp.md); --acp serves an IDE
over stdin and stdout with the Agent Client Protocol (docs/acp.md); --mcp serves an MCP host
(Claude Code, Claude Desktop, Cursor, VS Code) over stdin and stdout (docs/mcp.md).`;

export async function serve(argv: readonly string[]): Promise<number> {
  if (wantsHelp(argv)) {
    process.stdout.write(helpText(SERVE_USAGE, SERVE_FLAGS));
    return 0;
  }
  const { values: v, positionals, sources } = parseFlags(argv, SERVE_FLAGS);
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])}`);
  if ([v.stdio, v.ws, v.acp, v.mcp].filter(Boolean).length !== 1) throw new UsageError('serve needs exactly one of --stdio, --ws, --acp or --mcp');
  const logger = loggerFromFlags(v);
  // A retried model request says so on this logger (info).
  const model = modelConfig(v, sources);
  const openai = model && withProps(model, { logger });
  const defaultRunner = v['default-runner'] ?? 'scripted';
  if (defaultRunner !== 'scripted' && defaultRunner !== 'openai') {
    throw new UsageError(`--default-runner must be scripted or openai, got ${JSON.stringify(defaultRunner)}`);
  }
  if (defaultRunner === 'openai' && !openai) throw new UsageError('--default-runner openai needs --base-url and --model');

  // A flag beats the environment: `--no-state` with SUBRUN_STATE_DIR set keeps no state, and
  // `--state-dir DIR` with SUBRUN_NO_STATE set keeps it in DIR; only the two flags together clash.
  const flagged = (name: string) => sources[name] === `--${name}`;
  let noState = v['no-state'] === true;
  let stateDir = v['state-dir'];
  if (noState && stateDir !== undefined) {
    if (flagged('no-state') && flagged('state-dir')) throw new UsageError('--no-state and --state-dir exclude each other');
    if (flagged('no-state')) stateDir = undefined;
    else if (flagged('state-dir')) noState = false;
    else throw new UsageError('SUBRUN_NO_STATE and SUBRUN_STATE_DIR exclude each other');
  }
  const state_dir = noState ? undefined : resolvePath(stateDir ?? defaultStateDir());
  const fsync = v.fsync ?? 'normal';
  if (fsync !== 'normal' && fsync !== 'full') throw new UsageError(`--fsync must be normal or full, got ${JSON.stringify(fsync)}`);
  // A listener outlives any one host, so it keeps its state by default; a pipe dies with its host's
  // pipe, so it keeps state only when asked (docs/durability.md, "Where state lives").
  const durable_dir = noState ? undefined : v.ws === true || stateDir !== undefined ? state_dir : undefined;

  const nats = v.nats;
  if (nats === undefined && (v['worker-loss-ms'] !== undefined || v['nats-outage-ms'] !== undefined)) {
    throw new UsageError('--worker-loss-ms and --nats-outage-ms need --nats');
  }
  if (nats === undefined && (v.standby === true || v['lease-ms'] !== undefined)) throw new UsageError('--standby and --lease-ms need --nats');
  const storeKind = v.store ?? 'sqlite';
  if (storeKind !== 'sqlite' && storeKind !== 'jetstream') throw new UsageError(`--store must be sqlite or jetstream, got ${JSON.stringify(storeKind)}`);
  if (storeKind === 'jetstream' && nats === undefined) throw new UsageError('--store jetstream needs --nats');
  if (storeKind === 'jetstream' && noState) throw new UsageError('--store jetstream and --no-state exclude each other');
  if (storeKind === 'jetstream' && v.fsync !== undefined)
    throw new UsageError('--fsync applies to --store sqlite only (JetStream stores what the server is configured to)');

  // Before anything starts a span; a bad OTLP protocol is one line and exit 2 (a UsageError).
  const tracing = await startTracing({ endpoint: v['otlp-endpoint'], service: 'subrun', logger });
  // The lease first: a standby waits here, before it opens the state directory (a leader on the
  // same machine may hold it) or acts on anything a worker sends.
  const lead = nats === undefined ? undefined : await takeLead(nats, v, logger);
  const store =
    storeKind === 'jetstream' && lead
      ? await openJetStream(lead.link, logger)
      : durable_dir === undefined
        ? undefined
        : await openStore(durable_dir, fsync, logger);
  const remote = lead === undefined ? undefined : await attachPlacement(lead.link, v, logger);
  const localKinds = withProps(builtinRunnerKinds, { openai: openaiKind(openai) });
  // Served at GET /metrics on the --ws listener; nothing reads them elsewhere.
  const metrics = v.ws === true ? new Metrics() : undefined;
  if (metrics && remote) {
    // The fleet as the workers' heartbeats tell it, read at scrape time; a lost worker's series go.
    metrics.setWorkers(() => remote.workers.gauges());
    remote.onWorkerLost(() => metrics.workerLost());
  }
  const server = new RpcServer({
    max_concurrent_children: v['max-concurrent-children'],
    max_spawn_depth: v['max-spawn-depth'],
    max_message_bytes: v['max-message-bytes'],
    max_batch: v['max-batch'],
    max_reply_bytes: v['max-reply-bytes'],
    park_ttl_ms: v['park-ttl-ms'],
    replay_events: v['replay-events'],
    replay_bytes: v['replay-bytes'],
    single_user: v['single-user'] === true,
    state_dir,
    ...(store ? { store } : {}),
    // A remote child's spawn uses the ids its worker already answered with (delegate() returns
    // them synchronously there); the runtime makes every other id as usual.
    ...(remote ? { ids: remote.ids } : {}),
    cwd: resolvePath(v.workspace ?? '.'),
    runtime: {
      interrupt_grace_ms: v['interrupt-grace-ms'],
      max_queued_steers: v['max-queued-steers'],
      max_queued_steer_bytes: v['max-queued-steer-bytes'],
      retain_finished: v['retain-finished'],
      checkpoint_ms: v['checkpoint-ms'],
      // With --nats every child runs on a worker; the runtime itself is the same. With a store, a
      // child the last process left running on a worker is adopted there, not settled.
      ...(remote ? { runner_kinds: remote.kinds(localKinds), ...(store ? { adopt: remote.adopter() } : {}) } : {}),
    },
    openai,
    default_runner: remote
      ? remote.defaultRunner(defaultRunner, defaultRunner === 'openai' && openai ? openai.endpoint.model : SCRIPTED_MODEL)
      : defaultRunner === 'openai' && openai
        ? openaiRunner(openai)
        : undefined,
    logger,
    ...(metrics ? { metrics } : {}),
  });
  // What the start settled is stored before anyone hears of it (a JetStream store's log).
  await store?.settled()?.catch((err: unknown) => logger.error({ err }, 'what the start settled is not stored yet; retried'));
  // Only now, the adopted children known: the workers' heartbeats and events (an event is acked
  // once what it caused is stored, and its place in the stream is stored with it).
  await remote?.start(
    store
      ? {
          flush: () => store.flush(),
          settled: () => store.settled(),
          cursor: { get: () => store.cursor('worker_events'), set: (seq) => store.moveCursor('worker_events', seq) },
        }
      : undefined,
  );

  const grace = v['shutdown-grace-ms'] ?? 5_000;
  let listener: WsListener | undefined;
  let stdio: StdioTransport | undefined;
  let acp: AcpStdio | undefined;
  let mcp: McpStdio | undefined;
  let mcpHttp: McpHttp | undefined;
  let stopping: Promise<void> | undefined;
  const stop = (why: string) => {
    stopping ??= (async () => {
      logger.info({ why }, 'shutting down');
      listener?.stopAccepting();
      // ACP: every turn cancelled and answered, each after its children's terminal updates.
      await acp?.settle(grace);
      // MCP: no more delegations; the waiting calls answer as their children's completions come.
      mcp?.settle();
      mcpHttp?.settle();
      // Every child stopped and its completion sent; every connection closed behind it.
      await server.shutdown();
      // Children left running on workers: what their workers send now waits for the next process.
      remote?.quiet();
      // Everything the shutdown settled is stored; the next start finds it.
      await store?.settled()?.catch((err: unknown) => logger.error({ err }, 'the last writes could not be stored at shutdown'));
      store?.close();
      // After the shutdown settled everything, before the link closes: a standby takes over now.
      await lead?.lease.release();
      await remote?.close();
      // Every MCP answer written on its stream before the listener gives its peers the grace.
      await mcpHttp?.finish(grace);
      if (listener) await listener.close();
      else if (stdio && !(await drainedWithin(stdio, grace))) logger.warn({ peers: 1, grace_ms: grace }, CUT_MESSAGE);
      else if (acp) await acp.finish(grace);
      else if (mcp) await mcp.finish(grace);
      // The spans of everything above, the last completions' included; a dead collector gets the grace, no more.
      await tracing?.shutdown(grace);
      // Nothing is owed to anyone any more. Whatever still holds the event loop (a write to a
      // stdout nobody reads, a runner abandoned with a request in flight) must not hold the
      // process: an unref'd timer fires only if something else keeps the loop alive.
      setTimeout(() => process.exit(), 0).unref();
    })();
    return stopping;
  };
  // The ACP SDK is loaded only to serve ACP: it is most of what `serve --ws` would load at start
  // otherwise (bench/cases/startup.ts).
  const acpModule = v.acp ? await import('../acp/stdio.ts') : undefined;
  const mcpModule = v.mcp ? await import('../mcp/stdio.ts') : undefined;
  const done = new Promise<void>((resolve) => {
    // `on`, not `once`: a second signal must not fall through to the default action (death by
    // signal, with completions still unsent); the shutdown running already is bounded.
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => void stop(sig).then(resolve));
    if (v.stdio) {
      // stdio is one connection for the server's life: when the host closes stdin, nobody can
      // attach again, so the server shuts down, and the host, which may still be reading stdout,
      // gets the replies to its last requests and every completion before the transport closes.
      stdio = stdioTransport({
        input: process.stdin,
        output: process.stdout,
        max_message_bytes: server.limits.max_message_bytes,
        onInputEnd: () => void stop('stdin closed').then(resolve),
      });
      const conn = server.connect(stdio);
      // The host closed stdout (EPIPE): nothing can reach it any more; shut down the same way.
      void conn.whenClosed.then(() => stop('stdout closed')).then(resolve);
    }
    if (acpModule) {
      // The same rule as --stdio: the IDE closing stdin ends the server, and it is still owed the
      // terminal update of every child and the answer to every prompt before the connection closes.
      const roots = [realpathSync(resolvePath(v.workspace ?? '.'))];
      acp = acpModule.acpStdio({
        server,
        input: process.stdin,
        output: process.stdout,
        max_message_bytes: server.limits.max_message_bytes,
        roots,
        workspaces: openai !== undefined,
        logger,
        onInputEnd: () => stop('stdin closed').then(resolve),
      });
      // stdout failed (the IDE went away): nothing can reach it any more; shut down the same way.
      void acp.closed.then(() => stop('acp connection closed')).then(resolve);
    }
    if (mcpModule) {
      // The same rule again: the host closing stdin ends the server, after every answer it is owed.
      mcp = mcpModule.mcpStdio({
        server,
        input: process.stdin,
        output: process.stdout,
        max_message_bytes: server.limits.max_message_bytes,
        logger,
        onInputEnd: () => void stop('stdin closed').then(resolve),
      });
      // A line past the SDK's buffer, or stdout failed: the connection is gone; shut down the same way.
      void mcp.closed.then(() => stop('mcp connection closed')).then(resolve);
    }
  });

  if (v.ws) {
    const generated = v.token === undefined;
    const token = v.token ?? randomBytes(24).toString('base64url');
    const maxOut = v['max-outbound-bytes'];
    // One listener: the WebSocket, the HTTP API, its event streams and the dashboard.
    const host = v.host ?? '127.0.0.1';
    // MCP over Streamable HTTP at /mcp on the same listener; its SDK is loaded on the first request there.
    const { mcpHttp: makeMcpHttp } = await import('../mcp/http.ts');
    mcpHttp = makeMcpHttp({
      server,
      token,
      logger,
      max_message_bytes: server.limits.max_message_bytes,
      park_ttl_ms: server.limits.park_ttl_ms,
      replay_events: server.limits.replay_events,
      replay_bytes: server.limits.replay_bytes,
      loopback: isLoopback(host),
    });
    const http = createHttpApi(server, {
      token,
      logger,
      ui_dir: v['ui-dir'],
      max_outbound_bytes: maxOut,
      metrics_token: v['metrics-token'],
      features: { mcp: true },
    });
    const rest = http.handle;
    const onRequest: typeof rest = (req, res, ctx) => (mcpHttp?.owns(req) ? mcpHttp.handle(req, res, ctx) : rest(req, res, ctx));
    listener = await listenOrSay(
      {
        host,
        port: v.port ?? 8787,
        token,
        allow_origins: v['allow-origin'] ?? [],
        max_message_bytes: server.limits.max_message_bytes,
        heartbeat_ms: v['heartbeat-ms'],
        max_outbound_bytes: maxOut,
        shutdown_grace_ms: grace,
        logger,
        onRequest,
      },
      (t) => server.connect(t),
    );
    store?.announce(listener.url);
    // In the lease before the line that says it is up: a second plane refused names it.
    await lead?.lease.announce(listener.url);
    if (store) process.stderr.write(`subrun state: ${store.path} (recovered ${JSON.stringify(server.recovered)})\n`);
    process.stderr.write(`subrun listening on ${listener.url}\n`);
    // The page trades ?token= for a cookie and drops it from the address. A token made up here is
    // printed anyway (below), so its link is whole; one the user chose is never echoed to a log.
    const dashboard = `${listener.url.replace(/^ws:/, 'http:')}ui/`;
    process.stderr.write(`subrun dashboard: ${dashboard}?token=${generated ? encodeURIComponent(token) : '<your --token>'}\n`);
    if (!isLoopback(host)) {
      process.stderr.write(`subrun: warning: listening on ${host}, not loopback: any host that can reach it may try the token\n`);
    }
    if (generated) process.stderr.write(`subrun token: ${token}\n`);
  }
  await done;
  process.stdin.pause();
  return 0;
}
