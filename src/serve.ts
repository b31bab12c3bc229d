// `subrun serve`: the JSON-RPC server over stdio or WebSocket. stdout of --stdio carries the
// protocol alone; everything human-readable and every log line goes to stderr.
import { randomBytes } from 'node:crypto';
import { parseFlags, UsageError, type FlagSpec } from './cli-options.ts';
import { openaiRunner } from './delegation/runners/openai/runner.ts';
import { createLogger } from './log.ts';
import { MODEL_FLAGS, modelConfig } from './model-options.ts';
import { RpcServer } from './rpc/server.ts';
import { stdioTransport } from './rpc/transports/stdio.ts';
import { isLoopback, listenWs } from './rpc/transports/ws.ts';

export const SERVE_FLAGS: readonly FlagSpec[] = [
  { flag: 'stdio', kind: 'bool' },
  { flag: 'ws', kind: 'bool' },
  { flag: 'host', env: 'SUBRUN_HOST', kind: 'string' },
  { flag: 'port', env: 'SUBRUN_PORT', kind: 'int', min: 0, max: 65535 },
  { flag: 'token', env: 'SUBRUN_TOKEN', kind: 'string' },
  { flag: 'allow-origin', env: 'SUBRUN_ALLOW_ORIGIN', kind: 'list' },
  { flag: 'max-concurrent-children', env: 'SUBRUN_MAX_CONCURRENT_CHILDREN', kind: 'int', min: 1, max: 1024 },
  { flag: 'max-spawn-depth', env: 'SUBRUN_MAX_SPAWN_DEPTH', kind: 'int', min: 1, max: 64 },
  { flag: 'max-message-bytes', env: 'SUBRUN_MAX_MESSAGE_BYTES', kind: 'int', min: 1024, max: 256 * 1024 * 1024 },
  { flag: 'park-ttl-ms', env: 'SUBRUN_PARK_TTL_MS', kind: 'int', min: 0 },
  { flag: 'interrupt-grace-ms', env: 'SUBRUN_INTERRUPT_GRACE_MS', kind: 'int', min: 0 },
  // A setInterval over 2^31-1 ms would fire every millisecond.
  { flag: 'heartbeat-ms', env: 'SUBRUN_HEARTBEAT_MS', kind: 'int', min: 100, max: 2_147_483_647 },
  { flag: 'max-outbound-bytes', env: 'SUBRUN_MAX_OUTBOUND_BYTES', kind: 'int', min: 1024 },
  { flag: 'max-queued-steers', env: 'SUBRUN_MAX_QUEUED_STEERS', kind: 'int', min: 1, max: 100_000 },
  { flag: 'max-queued-steer-bytes', env: 'SUBRUN_MAX_QUEUED_STEER_BYTES', kind: 'int', min: 32768, max: 1024 * 1024 * 1024 },
  { flag: 'retain-finished', env: 'SUBRUN_RETAIN_FINISHED', kind: 'int', min: 0, max: 100_000 },
  { flag: 'log-level', env: 'SUBRUN_LOG_LEVEL', kind: 'string' },
  { flag: 'default-runner', env: 'SUBRUN_DEFAULT_RUNNER', kind: 'string' },
  ...MODEL_FLAGS,
];

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export async function serve(argv: readonly string[]): Promise<number> {
  const { values: v, positionals, sources } = parseFlags(argv, SERVE_FLAGS);
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])}`);
  if (Boolean(v.stdio) === Boolean(v.ws)) throw new UsageError('serve needs exactly one of --stdio or --ws');
  const level = (v['log-level'] as string | undefined) ?? 'warn';
  if (!LOG_LEVELS.includes(level)) throw new UsageError(`--log-level must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(level)}`);
  const openai = modelConfig(v, sources);
  const defaultRunner = (v['default-runner'] as string | undefined) ?? 'scripted';
  if (defaultRunner !== 'scripted' && defaultRunner !== 'openai') {
    throw new UsageError(`--default-runner must be scripted or openai, got ${JSON.stringify(defaultRunner)}`);
  }
  if (defaultRunner === 'openai' && !openai) throw new UsageError('--default-runner openai needs --base-url and --model');

  const logger = createLogger(level);
  const server = new RpcServer({
    max_concurrent_children: v['max-concurrent-children'] as number | undefined,
    max_spawn_depth: v['max-spawn-depth'] as number | undefined,
    max_message_bytes: v['max-message-bytes'] as number | undefined,
    park_ttl_ms: v['park-ttl-ms'] as number | undefined,
    runtime: {
      interrupt_grace_ms: v['interrupt-grace-ms'] as number | undefined,
      max_queued_steers: v['max-queued-steers'] as number | undefined,
      max_queued_steer_bytes: v['max-queued-steer-bytes'] as number | undefined,
      retain_finished: v['retain-finished'] as number | undefined,
    },
    openai,
    default_runner: defaultRunner === 'openai' && openai ? openaiRunner(openai) : undefined,
    logger,
  });

  let stopping: Promise<void> | undefined;
  let closeListener: () => Promise<void> = async () => undefined;
  const stop = (why: string) => {
    stopping ??= (async () => {
      logger.info({ why }, 'shutting down');
      await server.shutdown();
      await closeListener();
    })();
    return stopping;
  };
  const done = new Promise<void>((resolve) => {
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => void stop(sig).then(resolve));
    if (v.stdio) {
      const conn = server.connect(
        stdioTransport({ input: process.stdin, output: process.stdout, max_message_bytes: server.limits.max_message_bytes }),
      );
      // stdio is one connection for the server's life: when the host hangs up, nobody can attach
      // again, so the server stops its children and exits.
      void conn.whenClosed.then(() => stop('stdin closed')).then(resolve);
    }
  });

  if (v.ws) {
    const generated = v.token === undefined;
    const token = (v.token as string | undefined) ?? randomBytes(24).toString('base64url');
    const listener = await listenWs(
      {
        host: (v.host as string | undefined) ?? '127.0.0.1',
        port: (v.port as number | undefined) ?? 8787,
        token,
        allow_origins: (v['allow-origin'] as string[] | undefined) ?? [],
        max_message_bytes: server.limits.max_message_bytes,
        heartbeat_ms: v['heartbeat-ms'] as number | undefined,
        max_outbound_bytes: v['max-outbound-bytes'] as number | undefined,
        logger,
      },
      (t) => server.connect(t),
    );
    closeListener = () => listener.close();
    process.stderr.write(`subrun listening on ${listener.url}\n`);
    const host = (v.host as string | undefined) ?? '127.0.0.1';
    if (!isLoopback(host)) {
      process.stderr.write(`subrun: warning: listening on ${host}, not loopback: any host that can reach it may try the token\n`);
    }
    if (generated) process.stderr.write(`subrun token: ${token}\n`);
  }
  await done;
  process.stdin.pause();
  return 0;
}
