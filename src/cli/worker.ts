// `subrun worker --nats URL`: a worker process for a control plane started with
// `subrun serve ... --nats URL`. It runs children with the built-in runner kinds (scripted, and
// openai when given the model options). NATS unreachable or without JetStream at start: one line
// on stderr and exit 2. SIGTERM/SIGINT: stop taking children, interrupt those it holds, send
// their outcomes, flush its spans (with an OTLP endpoint configured), exit 0.
import { helpText, parseFlags, UsageError, wantsHelp, type FlagSpec } from './flags.ts';
import { openaiKind } from '../agent/runner.ts';
import { builtinRunnerKinds } from '../delegation/runners/kinds.ts';
import { LOG_FLAGS, loggerFromFlags } from './log-flags.ts';
import { MODEL_FLAGS, modelConfig } from './model-options.ts';
import { NatsStartError } from '../remote/nats.ts';
import { newWorkerId, Worker } from '../remote/worker/worker.ts';
import { startTracing } from './otel.ts';
import { withProps } from '../shapes.ts';

export const WORKER_FLAGS = [
  {
    flag: 'nats',
    env: 'SUBRUN_NATS',
    kind: 'string',
    arg: 'URL',
    help: 'the NATS server with JetStream the control plane uses, e.g. nats://127.0.0.1:4222 (required)',
  },
  {
    flag: 'max-children',
    env: 'SUBRUN_MAX_CHILDREN',
    kind: 'int',
    min: 1,
    max: 10_000,
    help: 'children this worker runs at once; one waiting for its own children does not count (default 16)',
  },
  {
    flag: 'worker-heartbeat-ms',
    env: 'SUBRUN_WORKER_HEARTBEAT_MS',
    kind: 'int',
    min: 50,
    max: 60_000,
    help: "heartbeat period; keep it well under the control plane's --worker-loss-ms (default 1000)",
  },
  {
    flag: 'shutdown-grace-ms',
    env: 'SUBRUN_SHUTDOWN_GRACE_MS',
    kind: 'int',
    min: 0,
    max: 2_147_483_647,
    help: 'on shutdown, how long its children have to send their outcomes, then its spans to be flushed (default 5000 each)',
  },
  {
    flag: 'otlp-endpoint',
    kind: 'string',
    arg: 'URL',
    help: 'export its spans over OTLP/HTTP to URL (+ /v1/traces); the OTEL_EXPORTER_OTLP_* variables do too (docs/observability.md)',
  },
  ...LOG_FLAGS,
  ...MODEL_FLAGS,
] as const satisfies readonly FlagSpec[];

const WORKER_USAGE = `usage: subrun worker --nats URL [options]

Runs children for a control plane started with \`subrun serve ... --nats URL\` (docs/scale-out.md),
with the built-in runner kinds: scripted, and openai when given the model options.`;

export async function worker(argv: readonly string[]): Promise<number> {
  if (wantsHelp(argv)) {
    process.stdout.write(helpText(WORKER_USAGE, WORKER_FLAGS));
    return 0;
  }
  const { values: v, positionals, sources } = parseFlags(argv, WORKER_FLAGS);
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])}`);
  const url = v.nats;
  if (url === undefined) throw new UsageError('worker needs --nats URL (or SUBRUN_NATS)');
  const logger = loggerFromFlags(v);
  // A retried model request says so on this logger (info).
  const model = modelConfig(v, sources);
  const openai = model && withProps(model, { logger });
  const id = newWorkerId();
  // Before any child can arrive; a bad OTLP protocol is one line and exit 2 (a UsageError).
  const tracing = await startTracing({ endpoint: v['otlp-endpoint'], service: 'subrun-worker', instance: id, logger });
  const grace = v['shutdown-grace-ms'] ?? 5000;
  let w: Worker;
  try {
    w = await Worker.start({
      id,
      url,
      max_children: v['max-children'],
      heartbeat_ms: v['worker-heartbeat-ms'],
      kinds: withProps(builtinRunnerKinds, { openai: openaiKind(openai) }),
      logger,
    });
  } catch (err) {
    if (!(err instanceof NatsStartError)) throw err;
    process.stderr.write(`subrun: ${err.message}\n`);
    // A failed handshake can leave a socket open: exit now, not when it times out.
    process.exit(2);
  }
  process.stderr.write(`subrun worker ${w.id} on ${url}\n`);
  await new Promise<void>((resolve) => {
    let stopping = false;
    for (const sig of ['SIGINT', 'SIGTERM'] as const) {
      process.on(sig, () => {
        if (stopping) return;
        stopping = true;
        void w
          .stop(grace)
          // The spans of every child it let go, the last outcomes' included; a dead collector gets the grace, no more.
          .then(() => tracing?.shutdown(grace))
          // Whatever failed on the way, the process ends (a second signal is already ignored).
          .finally(resolve);
      });
    }
  });
  // Nothing is owed to anyone any more: an exporter's request still in flight must not hold the process.
  setTimeout(() => process.exit(), 0).unref();
  return 0;
}
